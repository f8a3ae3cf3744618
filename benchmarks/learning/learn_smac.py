#!/usr/bin/env python
"""Learning benchmark: env steps and wall-clock until the greedy test win rate reaches a target.

Runs ``scripts/train_qmix.py`` (or ``--script``, e.g. ``train_mappo.py`` for ``--alg coma``) once per map and
seed (a separate process each), watches the run's ``log.jsonl`` and,
when ``test_win_rate >= --target``, drops a ``stop`` file into the run folder so the run saves and exits.
Writes a Markdown table (command, date, nproc, load) to ``benchmarks/results/learn_smac.md`` (or ``--out``).
Two clocks per run: the trainer's ``time_s`` (from the start of its loop: env stepping, learning, tests and
every jit compile) and the time since the process was launched (adds imports, building and the first
compile of the engine's kernels or their load from the cache). Several ``--seeds`` give a median per map.

    python benchmarks/learning/learn_smac.py --maps 3m 8m 2s3z 3s5z 5m_vs_6m --t-max 1000000
    python benchmarks/learning/learn_smac.py --maps 3m --seeds 0 1 2 --alg vdn t_max=300000
    python benchmarks/learning/learn_smac.py --maps 3m --alg maa2c --script train_mappo.py --t-max 500000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from marl.logging.plots import read_scalars  # noqa: E402  (no MindSpore import)


def _log_times(jsonl: Path, key: str) -> dict[int, float]:
    """``t -> wall-clock time`` (epoch s) at which ``key`` was logged at env step ``t``."""
    out: dict[int, float] = {}
    if jsonl.is_file():
        for line in jsonl.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec.get("key") == key and "time" in rec:
                out.setdefault(int(rec["t"]), float(rec["time"]))
    return out


def run_map(map_name: str, seed: int, args: argparse.Namespace, overrides: list[str], results: Path) -> dict:
    """Train on one map until the target or ``--t-max``; returns the measured figures."""
    run_name = f"bench_{args.alg}_{map_name}_seed{seed}_{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir = results / run_name
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / args.script),
        "--map",
        map_name,
        "--alg",
        args.alg,
        "--seed",
        str(seed),
        f"t_max={args.t_max}",
        f"results_dir={results}",
        f"run_name={run_name}",
        *overrides,
    ]
    print("[bench]", " ".join(cmd), flush=True)
    start = time.time()
    log_file = open(results / f"{run_name}.out", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
    reached: tuple[int, float] | None = None
    best = 0.0
    loads: list[float] = []
    while proc.poll() is None:
        time.sleep(2.0)
        loads.append(os.getloadavg()[0])
        scalars = read_scalars(run_dir / "log.jsonl")
        wins = scalars.get("test_win_rate", [])
        times = dict(scalars.get("time_s", []))
        if wins:
            best = max(best, max(v for _, v in wins))
        hit = next(((t, v) for t, v in wins if v >= args.target), None)
        if hit and reached is None:
            reached = (hit[0], times.get(hit[0], time.time() - start))
            (run_dir / "stop").touch()
        if args.budget_s and time.time() - start > args.budget_s and run_dir.exists():
            (run_dir / "stop").touch()  # out of wall-clock budget: the run saves and exits
    log_file.close()
    wall = time.time() - start
    wins = read_scalars(run_dir / "log.jsonl").get("test_win_rate", [])
    final = wins[-1][1] if wins else float("nan")
    logged = _log_times(run_dir / "log.jsonl", "test_win_rate")
    return {
        "map": map_name,
        "seed": seed,
        "reached": reached is not None,
        "t_env": reached[0] if reached else None,
        "seconds": reached[1] if reached else None,
        "launch_s": logged[reached[0]] - start if reached and reached[0] in logged else None,
        "load": (min(loads), max(loads)) if loads else (float("nan"),) * 2,
        "best": max([v for _, v in wins], default=float("nan")),
        "final": final,
        "t_end": max((t for t, _ in wins), default=0),
        "wall": wall,
        "returncode": proc.returncode,
        "run_dir": str(run_dir),
    }


def _median_row(map_name: str, runs: list[dict]) -> str:
    """One row of medians over seeds; a seed that did not reach the target counts as slowest."""
    inf = float("inf")
    done = sum(r["reached"] for r in runs)
    clock = statistics.median_low([r["seconds"] if r["reached"] else inf for r in runs])
    launch = statistics.median_low([r["launch_s"] if r["launch_s"] is not None else inf for r in runs])

    def fmt(x: float) -> str:
        return "not reached" if x == inf else f"{x / 60:.2f} min"

    return f"| {map_name} | {done}/{len(runs)} | {fmt(clock)} | {fmt(launch)} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--maps", nargs="+", default=["3m"])
    p.add_argument("--alg", default="qmix")
    scripts = sorted(f.name for f in (ROOT / "scripts").glob("train_*.py"))
    p.add_argument(
        "--script",
        default="train_qmix.py",
        choices=scripts,
        help="training script in scripts/ (default train_qmix.py)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--t-max", type=int, default=1_000_000)
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--budget-s", type=float, default=0.0, help="wall-clock budget per map (0 = none)")
    p.add_argument("--results", default=str(Path(tempfile.gettempdir()) / "marl_bench"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "learn_smac.md"))
    args, overrides = p.parse_known_args()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    run = harness.start()
    rows = [run_map(m, seed, args, overrides, results) for m in args.maps for seed in args.seeds]

    lines = [
        f"# Learning benchmark: {args.alg} ({args.script}), greedy test win rate >= {args.target:.0%}",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:], python="python"),
        "- engine: embedded (`backend=sim`); 'trainer clock': the trainer's `time_s` (env stepping, "
        "learning, tests, every jit compile); 'since launch' adds the process start (imports, building)",
        "",
        "| map | seed | reached | t_env at target | trainer clock at target | since launch "
        "| best test win rate | final | t_env run | run wall-clock | 1-min load (min–max) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = f"{r['t_env']:,}" if r["reached"] else "—"
        s = f"{r['seconds'] / 60:.2f} min" if r["reached"] else "—"
        w = f"{r['launch_s'] / 60:.2f} min" if r["launch_s"] is not None else "—"
        ok = "yes" if r["reached"] else "no"
        lines.append(
            f"| {r['map']} | {r['seed']} | {ok} | {t} | {s} | {w} | {r['best']:.2f} | {r['final']:.2f} "
            f"| {r['t_end']:,} | {r['wall'] / 60:.1f} min | {r['load'][0]:.1f}–{r['load'][1]:.1f} |"
        )
    if len(args.seeds) > 1:
        lines += [
            "",
            "| map | seeds reached | median trainer clock | median since launch |",
            "|---|---|---|---|",
        ]
        for m in args.maps:
            lines.append(_median_row(m, [r for r in rows if r["map"] == m]))
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"[bench] written to {out}")


if __name__ == "__main__":
    main()
