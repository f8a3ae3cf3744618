#!/usr/bin/env python
"""Train DDPG (the MADDPG learner with one agent) on a Gymnasium env, e.g. Pendulum-v1.

    python scripts/train_ddpg.py --env gym --map Pendulum-v1
    python scripts/train_ddpg.py --env gym --map MountainCarContinuous-v0 t_max=200000

``--help`` lists every config key; key=value arguments override them.

The same as ``marl train --alg ddpg ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.cli import train_main  # noqa: E402

if __name__ == "__main__":
    train_main(
        "train_ddpg.py",
        default_alg="ddpg",
        description="Train DDPG on a Gymnasium env (--env gym --map <id>).",
    )
