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
starts the runs that never began, and writes the summary and report over all of them. With ``--records DIR``
each run's record (:mod:`marl.report.records`: what the report reads, small enough to commit) goes into DIR as
soon as the run finishes; the folder is recorded in ``sweep.json`` and kept by ``--resume``. A run folder left
without any checkpoint is moved to ``_incomplete/`` and that run starts again. A first SIGINT or SIGTERM
stops every running run with a checkpoint (:mod:`marl.sweep_stop`), so a stopped sweep resumes without
redoing any steps.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.checkpoint import latest
from marl.config import config_from_dict, config_to_dict, load_config
from marl.report.records import DONE_FILE, write_run_record
from marl.report.runs import RunResult, compute_absolute, summarize_run
from marl.report.sweep_summary import METRIC, plot_sweep, summary_markdown
from marl.signals import RunStopped, StopSignals, exit_code
from marl.sweep_plan import (
    PLAN_FILE,
    args_from_plan,
    build_parser,
    merge_plan,
    parse_run_memory,
    plan_record,
    prepare_records,
    read_object,
)
from marl.sweep_stop import SweepStopped, check_finished, check_not_stopping, clear, request_stop
from marl.untrusted import safe_name

__all__ = ["RunResult", "summarize_run", "summary_markdown", "plot_sweep", "plan", "run_sweep", "sweep_main"]


def _run_one(
    cfg_dict: dict[str, Any],
    run_dir: str,
    map_name: str,
    seed: int,
    metric: str,
    threshold: float,
    absolute: bool = True,
    records: str | None = None,
) -> RunResult:
    """Body of one Ray task: train (or resume an interrupted run), then summarise and mark it done
    (console output to ``run_dir/stdout.log``); with ``records``, write the run's record there."""
    from marl.trainer import Trainer

    started = time.time()
    folder = Path(run_dir)
    check_not_stopping(folder)
    resume = folder if latest(folder) is not None else None
    if resume is None and folder.exists():  # begun but no checkpoint yet: keep it aside, start again
        aside = folder.parent / "_incomplete" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.parent.mkdir(exist_ok=True)
        shutil.move(str(folder), str(aside))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "stdout.log", "a", encoding="utf-8") as out:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                cfg = config_from_dict(cfg_dict)
                trainer = Trainer(cfg, resume=resume) if resume else Trainer(cfg, run_dir=folder)
                check_not_stopping(folder)  # again: building the trainer removed any stop file
                trainer.run()
                check_finished(folder, trainer.t_env, cfg.t_max)
            except SweepStopped:  # stopped, not failed: --resume goes on
                raise
            except Exception:  # the run folder keeps why it failed (the driver gets the error too)
                traceback.print_exc()
                raise
            if absolute:  # the best checkpoint over 10x the test episodes, while this task holds its CPUs
                try:
                    compute_absolute(folder, n_envs=int(cfg_dict["runner"]["batch_size_run"]))
                except Exception:  # the training run stands; the report names the missing absolute metric
                    traceback.print_exc()
    res = summarize_run(map_name, seed, run_dir, metric, threshold)
    res.started, res.finished = started, time.time()
    done = {**res.as_dict(), "worker_pid": os.getpid()}  # one process per run: see run_sweep's max_calls
    (folder / DONE_FILE).write_text(json.dumps(done), encoding="utf-8")
    if records:  # the run's record (marl.report.records) as soon as it finished
        write_run_record(folder, Path(records), metric)
    return res


def finished_result(
    run_dir: Path, map_name: str, seed: int, metric: str, threshold: float
) -> RunResult | None:
    """The result of a run that finished in an earlier invocation of the sweep (``None`` if it did not)."""
    done = run_dir / DONE_FILE
    if not done.is_file():
        return None
    res = summarize_run(map_name, seed, run_dir, metric, threshold)
    saved = read_object(done, "the run's start and end", "delete that file to train the run again")
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
            run_dir = out / f"{safe_name(f'{alg}_{m}')}_seed{s}"
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
    run_memory: dict[str | None, float] | None = None,
    records: Path | None = None,
) -> list[RunResult]:
    """Submit every run as a Ray task (Ray must be initialised); a failed run is reported, not fatal.
    With ``absolute`` each task then evaluates its run's best checkpoint (the report's absolute metric).
    ``run_memory`` (:func:`~marl.sweep_plan.parse_run_memory`) reserves Ray's memory resource per run.
    With ``records`` each task writes its run's record there when the run finishes."""
    import ray

    # max_calls=1: every run in a fresh worker process (a reused one keeps the last run's memory)
    task = ray.remote(num_cpus=cpus_per_run, max_retries=0, max_calls=1)(_run_one)
    done: dict[Any, RunResult] = {}
    refs: dict[Any, tuple[str, int, Path]] = {}
    rec_dir = str(records) if records else None
    for m, s, d, c in runs:
        earlier = finished_result(d, m, s, metric, threshold)
        if earlier is not None:  # finished before an interruption of the sweep: not run again
            key = ("done", m, s)
            refs[key], done[key] = (m, s, d), earlier
            print(f"[sweep] {m} seed {s}: finished earlier (final {metric} {earlier.final:.3f})", flush=True)
        else:
            gib = (run_memory or {}).get(m, (run_memory or {}).get(None))
            submit = task.options(memory=int(gib * 2**30)) if gib else task
            refs[submit.remote(c, str(d), m, s, metric, threshold, absolute, rec_dir)] = (m, s, d)
    pending = [r for r in refs if r not in done]
    # the first signal stops every run with a checkpoint; a second one aborts at once
    signals, asked = StopSignals(), False
    with signals:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            if signals.requested and not asked:
                asked = True
                request_stop(runs[0][2].parent, [refs[r][2] for r in pending])
                print("[sweep] stopping: each running run saves a checkpoint and returns", flush=True)
            if ready:
                done[ready[0]] = _collect(ray, ready[0], refs[ready[0]], metric, threshold)
                m, s = refs[ready[0]][:2]
                print(
                    f"[sweep] {len(done)}/{len(refs)} {m} seed {s}: {_state(done[ready[0]], metric)}",
                    flush=True,
                )
    if signals.signum is not None:
        name = signal.Signals(signals.signum).name
        raise RunStopped(
            f"{name} received; runs stopped with a checkpoint", exit_code=exit_code(signals.signum)
        )
    return [done[r] for r in refs]


def check_memory_offered(run_memory: dict[str | None, float]) -> None:
    """Refuse reservations that no node of the Ray cluster offers (Ray would wait for them forever)."""
    if not run_memory:
        return
    import ray

    offered = max((n["Resources"].get("memory", 0.0) for n in ray.nodes() if n.get("Alive")), default=0.0)
    gib = offered / 2**30
    over = {m or "default": g for m, g in run_memory.items() if g > gib}
    if over:
        asked = ", ".join(f"{m}: {g:g} GiB" for m, g in over.items())
        raise SystemExit(
            f"sweep.py: --run-memory asks more than any Ray node offers to tasks ({gib:.1f} GiB; a local Ray "
            f"offers the memory free at its start less its object store): {asked}. Reserve less, or start "
            "Ray with a smaller object store (ray start --head --object-store-memory BYTES) and pass "
            "--address auto"
        )


def _collect(ray: Any, ref: Any, run: tuple[str, int, Path], metric: str, threshold: float) -> RunResult:
    """The result of the finished task ``ref``, or what its run logged and the error it raised."""
    try:
        return ray.get(ref)
    except Exception as err:  # the run's own exception, re-raised by Ray: keep going, report it
        res = summarize_run(*run, metric, threshold)  # what it logged before failing (plot only)
        res.error = "".join(traceback.format_exception_only(err)).strip()
        return res


def _last_line(error: str) -> str:
    """The last line of a run's error: the exception and its whole message (ours say what to change)."""
    return error.splitlines()[-1]


def _state(res: RunResult, metric: str) -> str:
    return f"FAILED ({_last_line(res.error)})" if res.error else f"final {metric} {res.final:.3f}"


def sweep_main(argv: Sequence[str] | None = None) -> tuple[Path, list[RunResult]]:
    """The ``scripts/sweep.py`` command line; returns the sweep folder and the per-run results."""
    from marl.runners.ray_runner import RayStartError, _ray, connect

    args = build_parser().parse_args(argv)
    if args.resume:
        args = args_from_plan(args)
    if not args.maps:
        raise SystemExit("sweep.py: --maps is required (or --resume FOLDER)")
    if args.seeds < 1 or args.cpus_per_run <= 0:
        raise SystemExit("--seeds must be >= 1 and --cpus-per-run > 0")
    run_memory = parse_run_memory(args.run_memory, list(args.maps))
    out = Path(args.out or Path("results") / f"sweep_{args.alg}_{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    # each run's learner on its share of the cores (a later ms_threads=... of the user's wins)
    share = [f"ms_threads={max(1, int(args.cpus_per_run))}"]
    runs = plan(args.alg, args.maps, seeds, out, args.env, [*share, *args.overrides])
    record = merge_plan(out, plan_record(args))
    records = prepare_records(record.get("records"), runs, args.metric)  # checked before any run starts
    out.mkdir(parents=True, exist_ok=True)
    (out / PLAN_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
    clear(out)  # an earlier stop request: this invocation runs
    try:
        owns = connect(args.address, args.num_cpus)
    except (ConnectionError, RayStartError) as err:  # before any run: one line, exit 1
        raise SystemExit(f"[sweep] {err}") from err
    try:
        check_memory_offered(run_memory)
        print(
            f"[sweep] {len(runs)} runs ({len(args.maps)} maps x {len(seeds)} seeds) -> {out}; "
            f"cluster CPUs: {_ray().cluster_resources().get('CPU', 0):g}",
            flush=True,
        )
        results = run_sweep(
            runs, args.cpus_per_run, args.metric, args.threshold, not args.no_absolute, run_memory, records
        )
    except RunStopped as stop:  # the first signal: every run stopped with a checkpoint
        print(f"[sweep] {stop}; finished runs are kept. Continue with: scripts/sweep.py --resume {out}")
        raise SystemExit(stop.exit_code) from None
    except KeyboardInterrupt:  # a second signal
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
    failed = {r.run_dir: r.error for r in results if r.error}
    _report(out, title, args.metric, args.threshold, args.reps, failed)
    return out, results


def _report(
    out: Path, title: str, metric: str, threshold: float, reps: int, failed: dict[str, str] | None = None
) -> None:
    """The multi-seed report (``marl.report``: IQM, CIs, marl-eval JSON, profiles) over the sweep folder.
    The runs in ``failed`` (run folder -> error) are left out and named: a run stopped part-way (the memory
    check, a non-finite loss) logged test phases, but its last one is not a result of the sweep's budget."""
    from marl.report.cli import write_report
    from marl.report.runs import load_runs

    try:
        import rliable  # noqa: F401  (the report's statistics)
    except ImportError as err:  # rliable is an extra: the sweep's own summary above still stands
        print(f"[sweep] no report.md: {err}; install the report extra: pip install -e '.[report]'")
        return
    runs, skipped = load_runs([out], metric, threshold, absolute=False)
    failed = {Path(d).resolve(): err for d, err in (failed or {}).items()}
    errors = [failed.get(Path(r.run_dir).resolve()) for r in runs]
    skipped += [
        f"{r.run_dir}: left out, the run failed ({_last_line(e)})"
        for r, e in zip(runs, errors, strict=True)
        if e
    ]
    runs = [r for r, e in zip(runs, errors, strict=True) if not e]
    if not runs:
        print("[sweep] no report.md: no run that finished logged a test phase")
        return
    written = write_report(runs, out, metric, threshold, reps, title=title, notes=skipped)
    print(written["report.md"].read_text(encoding="utf-8"))
    print("[sweep] wrote " + ", ".join(str(f) for f in written.values()))
