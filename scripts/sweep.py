#!/usr/bin/env python
"""Run one experiment per (map, seed) as Ray tasks and summarise them.

    python scripts/sweep.py --alg qmix --maps 3m 8m 2s3z --seeds 5
    python scripts/sweep.py --alg vdn --maps 3m --seeds 3 --address auto t_max=500000
    python scripts/sweep.py --env fake --maps a b --seeds 2 t_max=400      # a quick smoke test

Writes <sweep folder>/summary.md (mean ± std over seeds of the final test win rate and of the env steps
to 95 %), summary.json and curves.png, then scripts/report.py's report (report.md with IQM and 95 % CIs,
marl_eval.json, profiles.png, sample_efficiency.png; needs the report extra); each run has its own folder
inside, with absolute_metric.json (its best checkpoint over 10x the test episodes; --no-absolute skips it).
--records DIR also writes each run's record (what the report reads, small enough to commit, e.g. into
benchmarks/results/runs/<suite>/) as soon as the run finishes; --resume keeps that folder.
Exits 1 if any run failed.

The same as ``marl sweep ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.sweep import sweep_main  # noqa: E402

if __name__ == "__main__":
    _, results = sweep_main()
    sys.exit(1 if any(r.error for r in results) else 0)
