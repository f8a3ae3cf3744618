#!/usr/bin/env python
"""Multi-seed report over existing run folders, and the README's generated results tables.

    python scripts/report.py results/sweep_qmix_20261124-031500            # a sweep folder (or run folders)
    python scripts/report.py results/run_a results/run_b --out /tmp/report --reps 2000
    python scripts/report.py --readme            # regenerate README.md's results blocks (make tables)
    python scripts/report.py --readme --check    # exit 1 when README.md is out of date

Writes report.md (IQM and mean with 95 % stratified bootstrap CIs, probability of improvement), report.json,
marl_eval.json (marl-eval's layout, with the absolute metric: each run's best checkpoint re-evaluated over
10x its test episodes, cached in the run folder), profiles.png and sample_efficiency.png.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.report.cli import report_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(report_main())
