#!/usr/bin/env python
"""Train DQN (double-Q, dueling heads) on a Gymnasium env or any discrete multi-agent env (independent DQN).

    python scripts/train_dqn.py --env gym --map CartPole-v1
    python scripts/train_dqn.py --env gym --map CartPole-v1 agent.name=mlp learner.double_q=false
    python scripts/train_dqn.py --env mpe --map simple_spread

``--help`` lists every config key; key=value arguments override them.

The same as ``marl train --alg dqn ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.cli import train_main  # noqa: E402

if __name__ == "__main__":
    train_main(
        "train_dqn.py",
        default_alg="dqn",
        description="Train DQN / double / dueling DQN (Gymnasium: --env gym --map <id>).",
    )
