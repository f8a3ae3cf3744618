#!/usr/bin/env python
"""Train MAPPO (or ``--alg ippo | maa2c | coma``) on an MPE scenario or a SMAC map.

    python scripts/train_mappo.py --env mpe --map simple_spread
    python scripts/train_mappo.py --env mpe --map simple_tag env.args.team=adversary
    python scripts/train_mappo.py --map 3m                       (embedded SMAC engine without StarCraft II)
    python scripts/train_mappo.py --alg ippo --env mpe --map simple_spread t_max=500000

``--map`` is the MPE scenario with ``--env mpe``. ``--help`` lists the maps and every config key.

The same as ``marl train --alg mappo ...`` (the installed console command).
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
        "train_mappo.py",
        default_alg="mappo",
        description="Train MAPPO / IPPO / MAA2C / COMA on MPE (--env mpe --map simple_spread) "
        "or SMAC (--map 3m).",
    )
