#!/usr/bin/env python
"""Learning benchmark for the on-policy learners (MAPPO / IPPO / PPO / PG) on MPE, SMAC and Gymnasium.

Trains one run in this process through the shared :class:`~marl.trainer.Trainer` and reads the run's
``log.jsonl``: the greedy test curve (``test_return_mean``, ``test_win_rate``, wall-clock ``time_s`` since
the run started, compile included), the first test at or above ``--target`` and the final tests. A watcher
thread drops the run's ``stop`` file when ``--budget-s`` wall-clock seconds have passed (or, with
``--stop-at-target``, once the target is reached), so the run saves and ends cleanly. Appends a Markdown
section (command, date, machine load, table) to ``--out``.

    python benchmarks/learning/learn_mpe.py --alg mappo --env mpe --map simple_spread --budget-s 600 \\
        --out benchmarks/results/learn_mpe.md t_max=2000000
    python benchmarks/learning/learn_mpe.py --alg mappo --map 3m --metric test_win_rate --target 0.95 \\
        --stop-at-target
    python benchmarks/learning/learn_mpe.py --alg ppo --env gym --map CartPole-v1 --target 475 \\
        --stop-at-target
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

import marl.learners.pg_learner  # noqa: E402,F401  (registers "pg")
import marl.learners.ppo_learner  # noqa: E402,F401  (registers "ppo")
from benchmarks import harness  # noqa: E402
from marl.config import load_config  # noqa: E402
from marl.logging.plots import read_scalars  # noqa: E402  (no MindSpore import)
from marl.trainer import Trainer  # noqa: E402


def watch(
    run_dir: Path,
    budget_s: float,
    metric: str,
    target: float | None,
    stop_at_target: bool,
    done: threading.Event,
) -> None:
    """Write ``run_dir/stop`` after ``budget_s`` seconds, or when ``metric >= target`` if asked."""
    t0 = time.time()
    while not done.wait(2.0):
        hit = (
            stop_at_target
            and target is not None
            and any(v >= target for _, v in read_scalars(run_dir / "log.jsonl").get(metric, []))
        )
        if hit or time.time() - t0 > budget_s:
            (run_dir / "stop").touch()
            return


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--alg", default="mappo")
    p.add_argument("--env", default=None)
    p.add_argument("--map", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metric", default="test_return_mean", help="test_return_mean | test_win_rate")
    p.add_argument("--target", type=float, default=None)
    p.add_argument("--stop-at-target", action="store_true")
    p.add_argument("--budget-s", type=float, default=600.0, help="wall-clock budget of the run")
    p.add_argument("--last", type=int, default=5, help="final tests averaged for the reported end value")
    p.add_argument("--note", default="", help="text added under the section title")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "learn_mpe.md"))
    p.add_argument("overrides", nargs="*")
    args = p.parse_args()
    results = Path("/tmp") / "marl_bench"
    run_name = f"bench_{args.alg}_{args.map}_seed{args.seed}_{time.strftime('%Y%m%d-%H%M%S')}"
    cfg = load_config(
        args.alg,
        env=args.env,
        map_name=args.map,
        overrides=[
            f"seed={args.seed}",
            f"results_dir={results}",
            f"run_name={run_name}",
            "log.mindinsight=false",
            "log.progress=false",
            "checkpoint.save_interval=0",
            *args.overrides,
        ],
    )
    run = harness.start()
    trainer = Trainer(cfg)
    done = threading.Event()
    watcher = threading.Thread(
        target=watch,
        args=(trainer.run_dir, args.budget_s, args.metric, args.target, args.stop_at_target, done),
        daemon=True,
    )
    wall0 = time.time()
    watcher.start()
    trainer.run()
    done.set()
    wall = time.time() - wall0
    scalars = read_scalars(trainer.run_dir / "log.jsonl")
    metric, times, ret, win = (
        dict(scalars.get(k, [])) for k in (args.metric, "time_s", "test_return_mean", "test_win_rate")
    )
    ts = sorted(metric)
    first = next((t for t in ts if args.target is not None and metric[t] >= args.target), None)
    tail = [metric[t] for t in ts[-args.last :]]
    lines = [
        f"\n## {args.alg} on {cfg.env.name}:{cfg.env.map_name} (seed {args.seed})\n",
        args.note + "\n" if args.note else "",
        *harness.header_lines(run, __file__, sys.argv[1:], python="python"),
        f"- budget: t_max={cfg.t_max}, {args.budget_s:.0f} s wall-clock; the run stopped at "
        f"t_env={trainer.t_env} after {wall:.0f} s (compile included)",
        f"- greedy tests: {cfg.log.test_nepisode} episodes every {cfg.log.test_interval} env steps; metric "
        f"`{args.metric}`",
        f"- target {args.target}: "
        + (
            f"first reached at t_env={first} ({times.get(first, float('nan')):.0f} s)"
            if first is not None
            else ("not reached in the budget" if args.target is not None else "none set (fixed budget)")
        ),
        f"- mean of the last {len(tail)} tests: {sum(tail) / max(1, len(tail)):.3f}; best "
        f"{max(metric.values()) if metric else float('nan'):.3f}\n",
        "| t_env | wall s | test_return_mean | test_win_rate |",
        "|---|---|---|---|",
    ]
    nan = float("nan")
    for t in ts:
        lines.append(f"| {t} | {times.get(t, nan):.0f} | {ret.get(t, nan):.3f} | {win.get(t, nan):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
