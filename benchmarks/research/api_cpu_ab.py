"""CPU time of one ``BatchedStarCraft2Env.step`` call at two versions of the code, side by side in one run.

    .venv/bin/python benchmarks/research/api_cpu_ab.py --base 060efc5 --head a54cfc0 \\
        --out results/api_cpu_ab.md

What a per-step call costs beyond the compiled step is mostly Python and argument passing: a few
microseconds that a loaded machine's wall-clock rates scatter more than they move (``engine_ab.py``'s
rates moved by 20 % between identical versions here while two training runs held the cores). This
benchmark times the same loop at both versions by the calling thread's CPU time (``time.thread_time``),
which a busy machine moves much less: draw uniformly random available actions, step, reset the envs that
ended (the loop of ``sim_throughput.py`` before its uniforms came in blocks, the same at both sides), one
thread, the best of five 1-second windows after 2,000 untimed calls, in fresh processes alternating base and
head ``--reps`` times; the table gives the medians. Checkouts and caches as in ``engine_ab.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness
from benchmarks.research.engine_ab import ROOT, _checkout, _rev, write_table

_WORKER = r"""
import json, sys, time
import numpy as np
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.sim.avail import sample_available
name, n = sys.argv[1], int(sys.argv[2])
env = BatchedStarCraft2Env(name, n, seed=0, threads=1)
env.reset()
rs = np.random.default_rng(0)
def one():
    avail = env.get_avail_actions().astype(bool)
    _, ended, _ = env.step(sample_available(avail, rs.random((n, env.n_agents))))
    if ended.any():
        env.reset_envs(ended)
for _ in range(2000):
    one()
best = float("inf")
for _ in range(5):
    t0, k = time.thread_time(), 0
    while time.thread_time() - t0 < 1.0:
        one()
        k += 1
    best = min(best, (time.thread_time() - t0) / k)
print(json.dumps(best * 1e6))
"""


def _timer(src: Path, cache: Path, name: str, n: int):  # noqa: ANN202
    """One side of an alternation: a fresh process of ``src``; returns its best µs of CPU a call."""
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-c", _WORKER, name, str(n)]
    return lambda: float(harness.run_command(argv, cwd=src, env=env).strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="git revision of the base side")
    ap.add_argument("--head", default=None, help="git revision of the head side (default: the working tree)")
    ap.add_argument("--cells", nargs="+", default=["3m:1", "8m:1", "27m_vs_30m:1", "3m:64"], help="MAP:ENVS")
    ap.add_argument("--reps", type=int, default=3, help="alternations of base and head per cell")
    ap.add_argument("--out", default=None, help="results file (relative: under benchmarks/)")
    args = ap.parse_args(argv)
    cells = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cells]
    run, shown = harness.start(), sys.argv[1:] if argv is None else argv
    base_rev = _rev(args.base)
    head_rev = _rev(args.head) if args.head else f"working tree ({_rev('HEAD')} + changes)"
    rows, per_round = [], []
    with tempfile.TemporaryDirectory(prefix="api_cpu_ab_") as tmp_name:
        tmp = Path(tmp_name)
        sides = {"base": _checkout(args.base, tmp), "head": _checkout(args.head, tmp) if args.head else ROOT}
        try:
            for name, n in cells:
                base, head = (_timer(src, tmp / f"cache_{side}", name, n) for side, src in sides.items())
                alt = harness.alternate(base, head, args.reps, names=("base", "head"))
                rows.append((name, n, alt.median("base", "value"), alt.median("head", "value")))
                per_round += alt.round_lines(f"{name} x{n}")
                print(name, n, json.dumps({s: alt.measures(s, "value") for s in alt.sides}), flush=True)
        finally:
            for src in sides.values():
                if src != ROOT:
                    subprocess.run(["git", "worktree", "remove", "--force", str(src)], cwd=ROOT, check=False)
    lines = [
        "# CPU time of one BatchedStarCraft2Env.step call at two versions of the code (one thread)",
        "",
        *harness.header_lines(
            run, __file__, shown, python="python", date_note=f"base {base_rev}; head {head_rev}"
        ),
        f"- {args.reps} alternations, medians; the code line and engine version are the head's checkout",
        "- a call: random available actions drawn, one step of every env, the ended envs reset",
        "",
        "| map | n_envs | base µs CPU a call | head µs CPU a call | head − base µs | head/base |",
        "|---|---|---|---|---|---|",
    ]
    for name, n, b, h in rows:
        lines.append(f"| {name} | {n} | {b:.1f} | {h:.1f} | {h - b:+.1f} | {h / b:.2f} |")
    lines += ["", "Each round is one process (start, 2,000 untimed calls, five 1-second windows):", ""]
    write_table([*lines, *harness.ROUND_HEAD, *per_round], args.out)


if __name__ == "__main__":
    main()
