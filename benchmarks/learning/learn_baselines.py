#!/usr/bin/env python
"""Learning benchmark for any training script: env steps and wall-clock until a logged metric hits a target.

Runs ``scripts/<--script>`` in its own process, watches the run's ``log.jsonl`` and, when ``--metric``
(default ``test_return_mean``, the mean return of the periodic greedy evaluation episodes) reaches
``--target``, drops a ``stop`` file into the run folder so the run saves and exits. ``--budget-s`` does the
same after a wall-clock budget. Appends one row per run to a Markdown table (``--out``; the table's head is
written when the file is new) and, below it, the run's command, date, code, versions and machine
(``harness.header_line``).

    python benchmarks/learning/learn_baselines.py --script train_dqn.py --env gym --map CartPole-v1 \\
        --target 475
    python benchmarks/learning/learn_baselines.py --script train_ddpg.py --env gym --map Pendulum-v1 \\
        --target -200
    python benchmarks/learning/learn_baselines.py --script train_ppo.py --env gym --map CartPole-v1 \\
        --target 475 --metric test_return_mean t_max=300000
    python benchmarks/learning/learn_baselines.py --script train_maddpg.py --env mpe --map simple_spread \\
        --target 1e9 --budget-s 600        # no target: report what the budget reached

Extra ``key=value`` arguments go to the training script as config overrides.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from marl.logging.plots import read_scalars  # noqa: E402  (no MindSpore import)


def run_once(args: argparse.Namespace, overrides: list[str], results: Path) -> dict:
    """Train until the target, the budget or ``t_max``; returns the measured figures."""
    stem = Path(args.script).stem.replace("train_", "")
    run_name = f"bench_{stem}_{args.map}_seed{args.seed}_{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir = results / run_name
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / args.script),
        "--env",
        args.env,
        "--map",
        args.map,
        "--seed",
        str(args.seed),
    ]
    if args.alg:
        cmd += ["--alg", args.alg]
    cmd += [f"results_dir={results}", f"run_name={run_name}", "log.mindinsight=false", *overrides]
    print("[bench]", " ".join(cmd), flush=True)
    start = time.time()
    with open(results / f"{run_name}.out", "w") as log_file:
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
        reached, stopped_by = None, ""
        while proc.poll() is None:
            time.sleep(2.0)
            scalars = read_scalars(run_dir / "log.jsonl")
            values, times = scalars.get(args.metric, []), dict(scalars.get("time_s", []))
            hit = next(((t, v) for t, v in values if v >= args.target), None)
            if hit and reached is None:
                reached = (hit[0], times.get(hit[0], time.time() - start), hit[1])
                (run_dir / "stop").touch()
                stopped_by = "target"
            if reached is None and args.budget_s and time.time() - start > args.budget_s and not stopped_by:
                (run_dir / "stop").touch()
                stopped_by = "budget"
    values = read_scalars(run_dir / "log.jsonl").get(args.metric, [])
    last = values[-5:]
    return {
        "reached": reached,
        "best": max((v for _, v in values), default=math.nan),
        "final": values[-1][1] if values else math.nan,
        "last5": sum(v for _, v in last) / len(last) if last else math.nan,
        "t_end": max((t for t, _ in values), default=0),
        "wall": time.time() - start,
        "stopped_by": stopped_by or ("t_max" if proc.returncode == 0 else f"exit {proc.returncode}"),
        "run_dir": str(run_dir),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--script", required=True, help="a training script in scripts/ (train_dqn.py, ...)")
    p.add_argument("--env", default="gym")
    p.add_argument("--map", required=True, help="Gymnasium id / MPE scenario / SMAC map")
    p.add_argument("--alg", default="", help="--alg for the script (default: the script's own)")
    p.add_argument("--target", type=float, required=True)
    p.add_argument("--metric", default="test_return_mean")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--budget-s", type=float, default=0.0, help="stop the run after this many seconds (0: none)"
    )
    p.add_argument("--results", default=str(Path(tempfile.gettempdir()) / "marl_bench"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "learn_baselines.md"))
    args, overrides = p.parse_known_args()
    run = harness.start()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    r = run_once(args, overrides, results)

    out = Path(args.out)
    if not out.exists():
        out.write_text(
            "# Learning benchmarks: single-agent baselines and MADDPG\n\n"
            "Each row is one run of `benchmarks/learning/learn_baselines.py` (one seed). `t_env`/wall-clock\n"
            "at target are read at the first periodic greedy evaluation whose metric reached the target;\n"
            "wall-clock counts env stepping, learning, evaluation and the first jit compile.\n\n"
            "| run | metric ≥ target | t_env at target | wall-clock at target | best | mean of last 5 evals "
            "| t_env run | run wall-clock | ended by |\n|---|---|---|---|---|---|---|---|---|\n"
        )
    reached = r["reached"]
    label = f"{args.script} {args.env}/{args.map} seed {args.seed}"
    row = (
        f"| {label} | {args.metric} ≥ {args.target:g}: {'yes' if reached else 'no'} "
        f"| {reached[0] if reached else '—'} | {f'{reached[1]:.0f} s' if reached else '—'} "
        f"| {r['best']:.2f} | {r['last5']:.2f} | {r['t_end']} | {r['wall']:.0f} s | {r['stopped_by']} |\n"
    )
    head_line = harness.header_line(run, __file__, sys.argv[1:], python="python")
    note = f"\n- {head_line}; run folder `{harness.shown(r['run_dir'])}`\n"
    text = out.read_text()
    head, sep, tail = text.partition("\n\n- ")  # the table first, then the list of commands
    out.write_text(head.rstrip("\n") + "\n" + row + (("\n- " + tail.rstrip("\n")) if sep else "") + note)
    print(row, end="")


if __name__ == "__main__":
    main()
