#!/usr/bin/env python
"""Train QMIX (or ``--alg vdn | iql | qplex | cw_qmix | ow_qmix | qtran``) on a SMAC map.

    python scripts/train_qmix.py --map 3m
    python scripts/train_qmix.py --map 8m --alg vdn --seed 3 t_max=500000 learner.lr=5e-4
    python scripts/train_qmix.py --resume results/qmix_3m_seed0_20261122-101500

Without StarCraft II the embedded engine plays the map. ``--help`` lists the maps and every config key.

The same as ``marl train --alg qmix ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.cli import train_main  # noqa: E402

if __name__ == "__main__":
    train_main(
        "train_qmix.py",
        default_alg="qmix",
        description="Train QMIX / VDN / IQL / QPLEX / CW-QMIX / OW-QMIX / QTRAN on a SMAC map "
        "(embedded engine by default).",
    )
