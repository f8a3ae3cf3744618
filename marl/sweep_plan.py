"""The sweep's command line and its plan file (``sweep.json``): what ``--resume`` re-runs, the check that a
reused sweep folder means the same experiment, and the check of the ``--records`` folder."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.report.records import (
    CURVE_KEYS,
    DONE_FILE,
    RecordError,
    record_from_run_dir,
    record_name,
    records_folder,
    write_records,
)
from marl.report.sweep_summary import METRIC
from marl.untrusted import BadFileError, read_json

PLAN_FILE = "sweep.json"  # the sweep's plan: what --resume re-runs
PLAN_KEYS = ("alg", "env", "overrides", "metric", "threshold")  # must match when a sweep folder is reused


def build_parser() -> argparse.ArgumentParser:
    """The ``scripts/sweep.py`` argument parser."""
    p = argparse.ArgumentParser(
        prog="sweep.py",
        description="Multi-map, multi-seed experiments as Ray tasks, with a summary and a report over seeds.",
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
    p.add_argument(
        "--run-memory",
        default=None,
        metavar="[MAP=]GIB,...",
        help="memory reserved per run through Ray's memory resource, in GiB, comma-separated: one number for "
        "every map and/or MAP=GIB for one map (e.g. 3,27m_vs_30m=13): Ray then starts a run only beside runs "
        "whose reservations fit with it (default: none, CPUs alone decide)",
    )
    p.add_argument("--metric", default=METRIC, help=f"logged key summarised (default {METRIC})")
    p.add_argument("--threshold", type=float, default=0.95, help="'steps to' threshold (default 0.95)")
    p.add_argument("--reps", type=int, default=2_000, help="bootstrap resamples of the report (default 2000)")
    p.add_argument(
        "--no-absolute",
        action="store_true",
        help="skip re-evaluating each run's best checkpoint (absolute metric)",
    )
    p.add_argument(
        "--records",
        default=None,
        metavar="DIR",
        help="write each run's record (what the reports read, small enough to commit; e.g. "
        "benchmarks/results/runs/<suite>/) into DIR as soon as the run finishes; kept by --resume",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every run")
    return p


def plan_record(args: argparse.Namespace) -> dict[str, Any]:
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
        "run_memory": args.run_memory,
        "records": str(Path(args.records).resolve()) if args.records else None,
    }


def parse_run_memory(specs: str | None, maps: list[str]) -> dict[str | None, float]:
    """``--run-memory`` (``"3,8m=4"``) as ``{map or None (every other map): GiB}``; a clear error for a
    malformed entry or a map the sweep does not run."""
    out: dict[str | None, float] = {}
    for spec in (specs or "").split(","):
        if not spec.strip():
            continue
        spec = spec.strip()
        name, _, value = spec.rpartition("=")
        try:
            gib = float(value)
        except ValueError:
            gib = -1.0
        if gib <= 0 or (name and name not in maps):
            what = f"{name!r} is not a map of this sweep ({', '.join(maps)})" if gib > 0 else "not GIB > 0"
            raise SystemExit(f"sweep.py: --run-memory {spec!r}: {what}; write GIB or MAP=GIB (e.g. 3,8m=4)")
        out[name or None] = gib
    return out


_PLAN_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "alg": ((str,), "a string"),
    "env": ((str, type(None)), "a string or null"),
    "overrides": ((list,), "a list of key=value strings"),
    "metric": ((str,), "a string"),
    "threshold": ((int, float), "a finite number"),
    "maps": ((list,), "a non-empty list of map names"),
    "seeds": ((list,), "a non-empty list of ints"),
    "run_memory": ((str, type(None)), "a string or null"),
    "records": ((str, type(None)), "a string or null"),
}


def read_object(f: Path, what: str, fix: str = "") -> dict[str, Any]:
    """The JSON object in the sweep's file ``f`` (``what`` it holds); ``SystemExit`` naming the file, the
    fault and ``fix`` (what to do) when it does not parse or is not an object."""
    tail = f"; {fix}" if fix else ""
    try:
        obj = read_json(f)
    except BadFileError as exc:
        raise SystemExit(f"sweep.py: {exc}{tail}") from None
    if not isinstance(obj, dict):
        raise SystemExit(f"sweep.py: {f}: must hold a JSON object ({what}){tail}")
    return obj


def read_plan(f: Path) -> dict[str, Any]:
    """``sweep.json`` checked field by field; ``SystemExit`` naming the file and the field otherwise."""
    plan_ = read_object(f, "the sweep's plan")
    for key, (types, what) in _PLAN_FIELDS.items():
        v = plan_.get(key)
        ok = isinstance(v, types) and not isinstance(v, bool)
        if ok and isinstance(v, list):
            item = int if key == "seeds" else str
            ok = all(isinstance(x, item) and not isinstance(x, bool) for x in v) and (key == "overrides" or v)
        if not ok:
            raise SystemExit(f"sweep.py: {f}: {key} must be {what}, got {v!r}")
    return plan_


def merge_plan(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """The plan to record in ``out``: ``record``, or an earlier plan of that folder extended by its maps and
    seeds. A folder holding a sweep of other settings is an error naming them (a resumed sweep must mean
    the same experiment)."""
    f = out / PLAN_FILE
    if not f.is_file():
        return record
    old = read_plan(f)
    differ = [f"{k}: {old.get(k)!r} there, {record[k]!r} now" for k in PLAN_KEYS if old.get(k) != record[k]]
    if differ:
        raise SystemExit(
            f"sweep.py: {out} holds a sweep with other settings ({'; '.join(differ)}); use another --out, "
            f"or --resume {out} to continue it as it was"
        )
    merged = dict(old)
    if record.get("run_memory") is not None:  # a new reservation replaces the recorded one
        merged["run_memory"] = record["run_memory"]
    if record.get("records") is not None:  # so does a new records folder
        merged["records"] = record["records"]
    merged["maps"] = list(dict.fromkeys([*old["maps"], *record["maps"]]))
    merged["seeds"] = sorted({*old["seeds"], *record["seeds"]})
    return merged


def args_from_plan(args: argparse.Namespace) -> argparse.Namespace:
    """``--resume FOLDER``: the recorded plan's settings replace those of the command line."""
    folder = Path(args.resume)
    f = folder / PLAN_FILE
    if not f.is_file():
        raise SystemExit(f"sweep.py: --resume {folder}: no {PLAN_FILE} there (not a sweep folder)")
    plan_ = read_plan(f)
    seeds = plan_["seeds"]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise SystemExit(f"sweep.py: --resume {folder}: its seeds {seeds} are not a contiguous range")
    for k in ("alg", "env", "overrides", "metric", "threshold", "maps"):
        setattr(args, k, plan_[k])
    if args.run_memory is None:  # the command line's reservation wins over the recorded one
        args.run_memory = plan_.get("run_memory")
    if args.records is None:  # likewise the records folder
        args.records = plan_.get("records")
    args.seed_start, args.seeds, args.out = seeds[0], len(seeds), str(folder)
    return args


def prepare_records(
    folder: str | None, runs: Sequence[tuple[str, int, Path, dict[str, Any]]], metric: str
) -> Path | None:
    """``--records``: the folder (created when missing), checked before any run starts, with the records of
    the runs that finished earlier written into it. A file there, a record there for a run this sweep is about
    to train, or one that differs from a finished run's stops the sweep with what was wrong."""
    if folder is None:
        return None
    try:
        out = records_folder(Path(folder))
        finished = []
        for m, s, run_dir, cfg in runs:
            path = out / record_name(str(cfg["alg"]), m, s)
            if (run_dir / DONE_FILE).is_file():
                finished.append(record_from_run_dir(run_dir, (*CURVE_KEYS, metric)))
            elif path.exists():
                raise RecordError(
                    f"{path} already holds a record of {cfg['alg']} on {m} seed {s}, and this sweep is about "
                    "to train that run; choose another --records folder, or move that file away"
                )
        write_records(finished, out)
    except RecordError as err:
        raise SystemExit(f"sweep.py: --records {folder}: {err}") from None
    return out
