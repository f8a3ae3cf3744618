#!/usr/bin/env python
"""Train single-agent PPO on a Gymnasium environment (the 1-agent Gymnasium adapter).

    python scripts/train_ppo.py --env gym --map CartPole-v1
    python scripts/train_ppo.py --env gym --map Pendulum-v1 gamma=0.95 t_max=500000

The Gymnasium id goes in ``--map`` (``--env`` names the config layer ``configs/envs/<env>.yaml``;
``gym`` is this algorithm's default, so ``--map CartPole-v1`` alone works too).

The same as ``marl train --alg ppo ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
import marl.learners.ppo_learner  # noqa: E402,F401  (registers the "ppo" learner)
from marl.cli import train_main  # noqa: E402

if __name__ == "__main__":
    train_main(
        "train_ppo.py",
        default_alg="ppo",
        description="Train PPO on a Gymnasium env (--env gym --map CartPole-v1 / Pendulum-v1).",
    )
