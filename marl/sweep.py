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

A sweep survives interruptions: the folder records its plan (``sweep.json``) and each finished run a
``result.json``. Running the same command again, or ``scripts/sweep.py --resume <sweep folder>``, skips the
finished runs, resumes each interrupted run from its newest intact checkpoint (``--resume`` of the trainer),
starts the runs that never began, and writes the summary and report over all of them. A run folder left
without any checkpoint is moved to ``_incomplete/`` and that run starts again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.checkpoint import latest
from marl.config import config_from_dict, config_to_dict, load_config
from marl.report.runs import RunResult, compute_absolute, summarize_run
from marl.report.sweep_summary import METRIC, plot_sweep, summary_markdown

__all__ = ["RunResult", "summarize_run", "summary_markdown", "plot_sweep", "plan", "run_sweep", "sweep_main"]

PLAN_FILE = "sweep.json"  # the sweep's plan: what --resume re-runs
DONE_FILE = "result.json"  # in a run folder: the run finished (training and absolute metric)
PLAN_KEYS = ("alg", "env", "overrides", "metric", "threshold")  # must match when a sweep folder is reused


def _run_one(
    cfg_dict: dict[str, Any],
    run_dir: str,
    map_name: str,
    seed: int,
    metric: str,
    threshold: float,
    absolute: bool = True,
) -> RunResult:
    """Body of one Ray task: train (or resume an interrupted run), then summarise and mark it done
    (console output to ``run_dir/stdout.log``)."""
    from marl.trainer import Trainer

    started = time.time()
    folder = Path(run_dir)
    resume = folder if latest(folder) is not None else None
    if resume is None and folder.exists():  # begun but no checkpoint yet: keep it aside, start again
        aside = folder.parent / "_incomplete" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.parent.mkdir(exist_ok=True)
        shutil.move(str(folder), str(aside))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "stdout.log", "a", encoding="utf-8") as out:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            cfg = config_from_dict(cfg_dict)
            trainer = Trainer(cfg, resume=resume) if resume else Trainer(cfg, run_dir=folder)
            trainer.run()
            if absolute:  # the best checkpoint over 10x the test episodes, while this task holds its CPUs
                try:
                    compute_absolute(folder, n_envs=int(cfg_dict["runner"]["batch_size_run"]))
                except Exception:  # the training run stands; the report names the missing absolute metric
                    traceback.print_exc()
    res = summarize_run(map_name, seed, run_dir, metric, threshold)
    res.started, res.finished = started, time.time()
    (folder / DONE_FILE).write_text(json.dumps(res.as_dict()), encoding="utf-8")
    return res


def finished_result(
    run_dir: Path, map_name: str, seed: int, metric: str, threshold: float
) -> RunResult | None:
    """The result of a run that finished in an earlier invocation of the sweep (``None`` if it did not)."""
    done = run_dir / DONE_FILE
    if not done.is_file():
        return None
    res = summarize_run(map_name, seed, run_dir, metric, threshold)
    saved = json.loads(done.read_text(encoding="utf-8"))
    res.started, res.finished = saved.get("started", res.started), saved.get("finished", res.finished)
    return res


def plan(
    alg: str,
    maps: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    env: str | None = None,
    overrides: Sequence[str] = (),
) -> list[tuple[str, int, Path, dict[str, Any]]]:
    """``(map, seed, run_dir, config dict)`` per run, seed-major (every map's first seed comes before any
    second seed, so an interrupted sweep has covered all maps); every config is resolved here, so bad keys
    fail now."""
    runs = []
    for s in seeds:
        for m in maps:
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
    done: dict[Any, RunResult] = {}
    refs: dict[Any, tuple[str, int, Path]] = {}
    for m, s, d, c in runs:
        earlier = finished_result(d, m, s, metric, threshold)
        if earlier is not None:  # finished before an interruption of the sweep: not run again
            key = ("done", m, s)
            refs[key], done[key] = (m, s, d), earlier
            print(f"[sweep] {m} seed {s}: finished earlier (final {metric} {earlier.final:.3f})", flush=True)
        else:
            refs[task.remote(c, str(d), m, s, metric, threshold, absolute)] = (m, s, d)
    pending = [r for r in refs if r not in done]
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
    p.add_argument(
        "--maps", nargs="+", help="maps / scenarios, one experiment each (required without --resume)"
    )
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per map (default 5)")
    p.add_argument("--seed-start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--env", default=None, help="environment config (default: from the alg config)")
    p.add_argument("--out", default=None, help="sweep folder (default results/sweep_<alg>_<time>)")
    p.add_argument(
        "--resume",
        default=None,
        metavar="FOLDER",
        help="continue the sweep in FOLDER with its recorded plan: finished runs are kept, interrupted ones "
        "resume from their last checkpoint (running the same command with the same --out does the same)",
    )
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


def _plan_record(args: argparse.Namespace) -> dict[str, Any]:
    """What ``sweep.json`` records: enough to re-run the sweep with ``--resume``."""
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    return {
        "alg": args.alg,
        "env": args.env,
        "overrides": list(args.overrides),
        "metric": args.metric,
        "threshold": args.threshold,
        "maps": list(args.maps),
        "seeds": seeds,
    }


def _merge_plan(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """The plan to record in ``out``: ``record``, or an earlier plan of that folder extended by its maps and
    seeds. A folder holding a sweep of other settings is an error naming them (a resumed sweep must mean
    the same experiment)."""
    f = out / PLAN_FILE
    if not f.is_file():
        return record
    old = json.loads(f.read_text(encoding="utf-8"))
    differ = [f"{k}: {old.get(k)!r} there, {record[k]!r} now" for k in PLAN_KEYS if old.get(k) != record[k]]
    if differ:
        raise SystemExit(
            f"sweep.py: {out} holds a sweep with other settings ({'; '.join(differ)}); use another --out, "
            f"or --resume {out} to continue it as it was"
        )
    merged = dict(old)
    merged["maps"] = list(dict.fromkeys([*old["maps"], *record["maps"]]))
    merged["seeds"] = sorted({*old["seeds"], *record["seeds"]})
    return merged


def _args_from_plan(args: argparse.Namespace) -> argparse.Namespace:
    """``--resume FOLDER``: the recorded plan's settings replace those of the command line."""
    folder = Path(args.resume)
    f = folder / PLAN_FILE
    if not f.is_file():
        raise SystemExit(f"sweep.py: --resume {folder}: no {PLAN_FILE} there (not a sweep folder)")
    plan_ = json.loads(f.read_text(encoding="utf-8"))
    seeds = plan_["seeds"]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"sweep.py: --resume {folder}: its seeds {seeds} are not a contiguous range")
    for k in ("alg", "env", "overrides", "metric", "threshold", "maps"):
        setattr(args, k, plan_[k])
    args.seed_start, args.seeds, args.out = seeds[0], len(seeds), str(folder)
    return args


def sweep_main(argv: Sequence[str] | None = None) -> tuple[Path, list[RunResult]]:
    """The ``scripts/sweep.py`` command line; returns the sweep folder and the per-run results."""
    from marl.runners.ray_runner import _ray, connect

    args = build_parser().parse_args(argv)
    if args.resume:
        args = _args_from_plan(args)
    if not args.maps:
        raise SystemExit("sweep.py: --maps is required (or --resume FOLDER)")
    if args.seeds < 1 or args.cpus_per_run <= 0:
        raise SystemExit("--seeds must be >= 1 and --cpus-per-run > 0")
    out = Path(args.out or Path("results") / f"sweep_{args.alg}_{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    runs = plan(args.alg, args.maps, seeds, out, args.env, args.overrides)
    record = _merge_plan(out, _plan_record(args))
    out.mkdir(parents=True, exist_ok=True)
    (out / PLAN_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
    owns = connect(args.address, args.num_cpus)
    try:
        print(
            f"[sweep] {len(runs)} runs ({len(args.maps)} maps x {len(seeds)} seeds) -> {out}; "
            f"cluster CPUs: {_ray().cluster_resources().get('CPU', 0):g}",
            flush=True,
        )
        results = run_sweep(runs, args.cpus_per_run, args.metric, args.threshold, not args.no_absolute)
    except KeyboardInterrupt:
        print(
            f"\n[sweep] interrupted; finished runs are kept. Continue with: scripts/sweep.py --resume {out}"
        )
        raise
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
