#!/usr/bin/env python
"""Multi-seed report over existing run folders or run records, and the generated results tables.

    python scripts/report.py results/sweep_qmix_20261124-031500            # a sweep folder (or run folders)
    python scripts/report.py results/run_a results/run_b --out results/report --reps 2000
    python scripts/report.py results/sweep_qmix_20261124-031500 --save-records benchmarks/results/runs/suite
    python scripts/report.py benchmarks/results/runs/suite --out results/report   # from committed records
    python scripts/report.py --readme            # regenerate the results blocks (README, docs/)
    python scripts/report.py --readme --check    # exit 1 when one of them is out of date

Writes report.md (IQM and mean with 95 % stratified bootstrap CIs, probability of improvement), report.json,
marl_eval.json (marl-eval's layout, with the absolute metric: each run's best checkpoint re-evaluated over
10x its test episodes, cached in the run folder), profiles.png and sample_efficiency.png. --save-records DIR
also writes one run record per run into DIR (<alg>_<map>_seed<k>.json: what the report reads, small enough to
commit); the report reads such records exactly as their run folders (a different record already in DIR for
the same alg/map/seed is refused unless --force). Runs of one environment made on different engines (engine
version or backend, docs/smac.md section 8) are not pooled: the report stops and names them, unless
--allow-mixed-engines.

The same as ``marl report ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.report.cli import report_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(report_main())
