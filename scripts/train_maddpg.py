#!/usr/bin/env python
"""Train MADDPG on MPE (or any multi-agent env of the registry).

    python scripts/train_maddpg.py --env mpe --map simple_spread
    python scripts/train_maddpg.py --env fake t_max=5000

``--help`` lists every config key; key=value arguments override them.

The same as ``marl train --alg maddpg ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.cli import train_main  # noqa: E402

if __name__ == "__main__":
    train_main(
        "train_maddpg.py",
        default_alg="maddpg",
        description="Train MADDPG (--env mpe --map <scenario>; --env gym gives DDPG).",
    )
