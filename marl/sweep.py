"""Multi-map, multi-seed experiments as Ray tasks, with a summary table and a plot of the curves.

``scripts/sweep.py --alg qmix --maps 3m 8m 2s3z --seeds 5 [key=value ...]`` runs one Trainer per
(map, seed) as a Ray task reserving ``--cpus-per-run`` CPUs (so a 2-core machine runs at most two at
once, and a cluster spreads them over its nodes). Every run gets its own folder under one sweep folder
(``<alg>_<map>_seed<k>/`` with its ``log.jsonl``, checkpoints and curves; its console output goes to
``stdout.log`` there). At the end the sweep folder holds ``summary.md`` (per map: mean ± std over seeds
of the final greedy-test win rate and of the env steps until it first reached 95 %), ``summary.json``
and ``curves.png``, then the multi-seed report of :mod:`marl.report` (``report.md``: IQM and mean with 95 %
bootstrap CIs, ``marl_eval.json``, profiles and IQM curves); each task re-evaluates its run's best
checkpoint for the report's absolute metric before it ends. All configs are resolved (and so checked)
before anything is submitted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marl.config import config_from_dict, config_to_dict, load_config
from marl.report.runs import RunResult, compute_absolute, summarize_run

METRIC = "test_win_rate"

__all__ = ["RunResult", "summarize_run", "summary_markdown", "plot_sweep", "plan", "run_sweep", "sweep_main"]


def _run_one(
    cfg_dict: dict[str, Any],
    run_dir: str,
    map_name: str,
    seed: int,
    metric: str,
    threshold: float,
    absolute: bool = True,
) -> RunResult:
    """Body of one Ray task: train, then summarise (console output to ``run_dir/stdout.log``)."""
    from marl.trainer import Trainer

    started = time.time()
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(run_dir) / "stdout.log", "a", encoding="utf-8") as out:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            Trainer(config_from_dict(cfg_dict), run_dir=Path(run_dir)).run()
            if absolute:  # the best checkpoint over 10x the test episodes, while this task holds its CPUs
                try:
                    compute_absolute(Path(run_dir), n_envs=int(cfg_dict["runner"]["batch_size_run"]))
                except Exception:  # the training run stands; the report names the missing absolute metric
                    traceback.print_exc()
    res = summarize_run(map_name, seed, run_dir, metric, threshold)
    res.started, res.finished = started, time.time()
    return res


def _mean_std(values: Sequence[float]) -> str:
    if not values:
        return "—"
    return f"{np.mean(values):.3g} ± {np.std(values):.2g}"


def summary_markdown(
    results: Sequence[RunResult], metric: str = METRIC, threshold: float = 0.95, title: str = ""
) -> str:
    """Per-map table (mean ± std over seeds) followed by a per-run table, as Markdown."""
    pct = f"{threshold:.0%}"
    lines = [f"# {title}" if title else "# Sweep", ""]
    lines += [
        f"| map | runs | final {metric} | env steps to {pct} | reached {pct} | failed |",
        "|---|---|---|---|---|---|",
    ]
    for m in dict.fromkeys(r.map_name for r in results):
        rs = [r for r in results if r.map_name == m]
        ok = [r for r in rs if not r.error]
        reached = [float(r.steps_to) for r in ok if r.steps_to is not None]
        lines.append(
            f"| {m} | {len(rs)} | {_mean_std([r.final for r in ok])} | {_mean_std(reached)} | "
            f"{len(reached)}/{len(ok)} | {len(rs) - len(ok)} |"
        )
    lines += [
        "",
        "Mean ± std over the seeds that finished; steps are over the runs that reached the "
        f"threshold. {metric} comes from each run's greedy test phases (log.jsonl).",
        "",
    ]
    lines += [f"| map | seed | final {metric} | steps to {pct} | run folder |", "|---|---|---|---|---|"]
    for r in results:
        final = "failed: " + r.error.splitlines()[-1][:80] if r.error else f"{r.final:.3f}"
        steps = "—" if r.steps_to is None else str(r.steps_to)
        lines.append(f"| {r.map_name} | {r.seed} | {final} | {steps} | {Path(r.run_dir).name} |")
    return "\n".join(lines) + "\n"


def plot_sweep(results: Sequence[RunResult], png_path: str | Path, metric: str = METRIC) -> Path:
    """One panel per map: every seed's curve (thin) and their mean on a common step grid (thick)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    maps = list(dict.fromkeys(r.map_name for r in results))
    fig = Figure(figsize=(4.5 * max(1, len(maps)), 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(maps)), squeeze=False)[0]
    for ax, m in zip(axes, maps, strict=False):
        curves = [r.curve for r in results if r.map_name == m and r.curve]
        for r in (r for r in results if r.map_name == m and r.curve):
            ts, vs = zip(*r.curve, strict=True)
            ax.plot(ts, vs, lw=0.8, alpha=0.5, label=f"seed {r.seed}")
        if curves:
            grid = np.linspace(0, min(c[-1][0] for c in curves), 50)
            ys = [np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves]
            ax.plot(grid, np.mean(ys, axis=0), lw=2.2, color="black", label="mean")
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(m)
        ax.set_xlabel("env steps")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    png_path = Path(png_path)
    fig.savefig(png_path, dpi=100)
    return png_path


def plan(
    alg: str,
    maps: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    env: str | None = None,
    overrides: Sequence[str] = (),
) -> list[tuple[str, int, Path, dict[str, Any]]]:
    """``(map, seed, run_dir, config dict)`` per run; every config is resolved here, so bad keys fail now."""
    runs = []
    for m in maps:
        for s in seeds:
            run_dir = out / f"{alg}_{m}_seed{s}"
            cfg = load_config(
                alg,
                env=env,
                map_name=m,
                overrides=[*overrides, f"seed={s}", f"results_dir={out}", f"run_name={run_dir.name}"],
            )
            runs.append((m, s, run_dir, config_to_dict(cfg)))
    return runs


def run_sweep(
    runs: Sequence[tuple[str, int, Path, dict[str, Any]]],
    cpus_per_run: float = 1.0,
    metric: str = METRIC,
    threshold: float = 0.95,
    absolute: bool = True,
) -> list[RunResult]:
    """Submit every run as a Ray task (Ray must be initialised); a failed run is reported, not fatal.
    With ``absolute`` each task then evaluates its run's best checkpoint (the report's absolute metric)."""
    import ray

    task = ray.remote(_run_one).options(num_cpus=cpus_per_run, max_retries=0)
    refs = {task.remote(c, str(d), m, s, metric, threshold, absolute): (m, s, d) for m, s, d, c in runs}
    done: dict[Any, RunResult] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        m, s, d = refs[ready[0]]
        try:
            res = ray.get(ready[0])
        except Exception as err:  # the run's own exception, re-raised by Ray: keep going, report it
            res = summarize_run(m, s, d, metric, threshold)  # what it logged before failing (plot only)
            res.error = "".join(traceback.format_exception_only(err)).strip()
        done[ready[0]] = res
        state = f"final {metric} {res.final:.3f}"
        if res.error:
            state = f"FAILED ({res.error.splitlines()[-1][:120]})"
        print(f"[sweep] {len(done)}/{len(refs)} {m} seed {s}: {state}", flush=True)
    return [done[r] for r in refs]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sweep.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--alg", default="qmix", help="algorithm config (default qmix)")
    p.add_argument("--maps", nargs="+", required=True, help="maps / scenarios, one experiment each")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per map (default 5)")
    p.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--env", default=None, help="environment config (default: from the alg config)")
    p.add_argument("--out", default=None, help="sweep folder (default results/sweep_<alg>_<time>)")
    p.add_argument(
        "--address", default="", help="Ray address: '' (local Ray or $RAY_ADDRESS), auto, ray://h:p"
    )
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray (default: all)")
    p.add_argument("--cpus-per-run", type=float, default=1.0, help="CPUs reserved per run (default 1)")
    p.add_argument("--metric", default=METRIC, help=f"logged key summarised (default {METRIC})")
    p.add_argument("--threshold", type=float, default=0.95, help="'steps to' threshold (default 0.95)")
    p.add_argument("--reps", type=int, default=2_000, help="bootstrap resamples of the report (default 2000)")
    p.add_argument(
        "--no-absolute",
        action="store_true",
        help="skip re-evaluating each run's best checkpoint (absolute metric)",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every run")
    return p


def sweep_main(argv: Sequence[str] | None = None) -> tuple[Path, list[RunResult]]:
    """The ``scripts/sweep.py`` command line; returns the sweep folder and the per-run results."""
    from marl.runners.ray_runner import _ray, connect

    args = build_parser().parse_args(argv)
    if args.seeds < 1 or args.cpus_per_run <= 0:
        raise SystemExit("--seeds must be >= 1 and --cpus-per-run > 0")
    out = Path(args.out or Path("results") / f"sweep_{args.alg}_{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    runs = plan(args.alg, args.maps, seeds, out, args.env, args.overrides)
    out.mkdir(parents=True, exist_ok=True)
    owns = connect(args.address, args.num_cpus)
    try:
        print(
            f"[sweep] {len(runs)} runs ({len(args.maps)} maps x {len(seeds)} seeds) -> {out}; "
            f"cluster CPUs: {_ray().cluster_resources().get('CPU', 0):g}",
            flush=True,
        )
        results = run_sweep(runs, args.cpus_per_run, args.metric, args.threshold, not args.no_absolute)
    finally:
        if owns:
            _ray().shutdown()
    title = f"Sweep: {args.alg} on {', '.join(args.maps)} ({len(seeds)} seeds)"
    table = summary_markdown(results, args.metric, args.threshold, title)
    (out / "summary.md").write_text(table, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps([r.as_dict() for r in results], indent=1), encoding="utf-8")
    plot_sweep(results, out / "curves.png", args.metric)
    print(table)
    print(f"[sweep] wrote {out / 'summary.md'}, {out / 'summary.json'}, {out / 'curves.png'}")
    _report(out, title, args.metric, args.threshold, args.reps)
    return out, results


def _report(out: Path, title: str, metric: str, threshold: float, reps: int) -> None:
    """The multi-seed report (``marl.report``: IQM, CIs, marl-eval JSON, profiles) over the sweep folder."""
    from marl.report.cli import write_report
    from marl.report.runs import load_runs

    try:
        import rliable  # noqa: F401  (the report's statistics)
    except ImportError as err:  # rliable is an extra: the sweep's own summary above still stands
        print(f"[sweep] no report.md: {err}; install the report extra: pip install -e '.[report]'")
        return
    runs, skipped = load_runs([out], metric, threshold, absolute=False)
    if not runs:
        print("[sweep] no report.md: no run logged a test phase")
        return
    written = write_report(runs, out, metric, threshold, reps, title=title, notes=skipped)
    print(written["report.md"].read_text(encoding="utf-8"))
    print("[sweep] wrote " + ", ".join(str(f) for f in written.values()))
