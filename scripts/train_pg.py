#!/usr/bin/env python
"""Train REINFORCE with a learned baseline on a Gymnasium environment.

    python scripts/train_pg.py --env gym --map CartPole-v1

The Gymnasium id goes in ``--map``; ``--env gym`` is this algorithm's default.

The same as ``marl train --alg pg ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
import marl.learners.pg_learner  # noqa: E402,F401  (registers the "pg" learner)
from marl.cli import train_main  # noqa: E402

if __name__ == "__main__":
    train_main(
        "train_pg.py",
        default_alg="pg",
        description="Train REINFORCE + baseline on a Gymnasium env (--env gym --map CartPole-v1).",
    )
