"""Runs as the report sees them: who ran what (``config.yaml``), its greedy test curve (``log.jsonl``)
and its absolute metric (the best checkpoint re-evaluated, cached in ``absolute_metric.json``), read from a
run folder or from its run record (:mod:`marl.report.records`), with the same numbers either way.

The absolute metric follows Gorsane et al. (2022, sec. 4): the best policy of a run, chosen on the usual
test phases, is evaluated again over ten times their number of episodes, which removes the optimistic bias
of picking the maximum of noisy test scores.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marl.logging.plots import read_scalars
from marl.provenance import engine_label, engines_of
from marl.report.records import ABSOLUTE_FILE, RECORD_NAME, RecordError, read_record, record_from_run_dir
from marl.run_folder import LOG_FILE

ABSOLUTE_FACTOR = 10  # Gorsane et al. (2022): 10x the test episodes of one evaluation
RETURN_KEY = "test_return_mean"


@dataclass
class RunResult:
    """One (map, seed) run: its curve of ``metric`` and what the summary needs."""

    map_name: str
    seed: int
    run_dir: str
    curve: list[tuple[int, float]] = field(default_factory=list)
    final: float = math.nan  # last logged value of the metric
    steps_to: int | None = None  # first t with metric >= threshold
    error: str = ""  # non-empty when the run failed
    started: float = math.nan  # wall-clock (time.time()) start and end of the run's task
    finished: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize_curve(
    map_name: str, seed: int, source: str | Path, curve: list[tuple[int, float]], threshold: float = 0.95
) -> RunResult:
    """A metric curve's summary: its finite points, its last value, the first t at or over ``threshold``."""
    curve = [(t, v) for t, v in curve if math.isfinite(v)]
    res = RunResult(map_name, seed, str(source), curve)
    if curve:
        res.final = curve[-1][1]
        res.steps_to = next((t for t, v in curve if v >= threshold), None)
    return res


def summarize_run(
    map_name: str, seed: int, run_dir: str | Path, metric: str = "test_win_rate", threshold: float = 0.95
) -> RunResult:
    """From ``run_dir/log.jsonl``: the metric curve, its last value, the first t at or over ``threshold``."""
    log = Path(run_dir) / LOG_FILE
    res = summarize_curve(map_name, seed, run_dir, read_scalars(log).get(metric, []), threshold)
    if not res.curve:
        res.error = f"no {metric!r} in {log}"
    return res


@dataclass
class Run:
    """One training run: ``env`` / ``task`` (map) / ``alg`` / ``seed``, and what it logged."""

    env: str
    task: str
    alg: str
    seed: int
    run_dir: Path  # where it was read from: its run folder or its record file
    test_nepisode: int
    curve: list[tuple[int, float]]  # (t_env, metric) of every test phase
    final: float  # last value of the metric
    steps_to: int | None  # first t_env at or over the target; None: never reached
    budget: int  # last logged t_env (the steps the run covered)
    extra: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # RETURN_KEY
    absolute: dict[str, Any] | None = None  # the cached ABSOLUTE_FILE, when there is one
    started: float = math.nan  # wall-clock start and end of the sweep's task (its result.json), if any
    finished: float = math.nan
    code: tuple[str, ...] = ()  # the code of each launch and resume (provenance): short commit, "+" if dirty
    engine: str = "unknown"  # engine_of: its engine version and backend; "unknown" before engine versions


def code_of(provenance: list[dict[str, Any]] | None) -> tuple[str, ...]:
    """The distinct code versions a run's provenance names, in launch order: the commit's first 7 characters,
    ``+`` when tracked files had changed, ``?`` for a launch outside a git checkout."""
    out: list[str] = []
    for entry in provenance or ():
        commit = entry.get("commit")
        name = (commit[:7] + ("+" if entry.get("dirty") else "")) if commit else "?"
        if name not in out:
            out.append(name)
    return tuple(out)


def engine_of(record: dict[str, Any]) -> str:
    """The engine label of a run record (:func:`marl.provenance.engine_label`): ``sim 0.9.0`` ...; several
    joined by `` -> `` when the run was resumed on another engine (not one a release renamed), or its
    absolute metric was evaluated on another one; ``unknown`` when it recorded none."""
    engines = record.get("engine")
    if not isinstance(engines, list):
        engines = engines_of(record.get("provenance"))
    labels = list(dict.fromkeys(engine_label(e) for e in engines if isinstance(e, dict)))
    absolute = (record.get("absolute") or {}).get("engine")
    if labels and isinstance(absolute, dict) and engine_label(absolute) not in labels:
        labels.append(engine_label(absolute) + " (absolute metric)")
    return " -> ".join(labels) or "unknown"


def is_run_dir(folder: Path) -> bool:
    """Whether ``folder`` holds a run the report can read (``config.yaml`` and ``log.jsonl``)."""
    return (folder / "config.yaml").is_file() and (folder / LOG_FILE).is_file()


def _in_run_dir(path: Path, root: Path) -> bool:
    """Whether ``path`` lies in a run folder at or below ``root``."""
    return any(is_run_dir(folder) for folder in path.parents if folder == root or root in folder.parents)


def find_run_dirs(roots: list[Path]) -> list[Path]:
    """Every run folder and run record at or below ``roots`` (sorted). Below a root, a record is a file named
    ``<alg>_<map>_seed<k>.json`` outside any run folder; a root that is a file must be a record. A root that
    does not exist is an error."""
    found: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(
                f"{root}: no such folder (give run folders, run records or folders that hold them)"
            )
        if root.is_file():
            if root.suffix != ".json":
                raise RecordError(
                    f"{root} is a file but not a run record (.json); give run folders, run records "
                    "(<alg>_<map>_seed<k>.json) or folders that hold them"
                )
            found.add(root)
            continue
        if is_run_dir(root):
            found.add(root)
        found.update(p.parent for p in root.rglob("config.yaml") if is_run_dir(p.parent))
        found.update(
            p for p in root.rglob("*.json") if RECORD_NAME.fullmatch(p.name) and not _in_run_dir(p, root)
        )
    return sorted(found)


def run_from_record(record: dict[str, Any], metric: str, target: float, source: Path) -> Run:
    """The :class:`Run` of a record (read from ``source``): its ``metric`` curve summarised as the sweep's
    summary does (:func:`summarize_curve`). A record without a ``metric`` test phase is a ``ValueError``."""
    curves = record["curves"]
    res = summarize_curve(record["task"], int(record["seed"]), source, _pairs(curves.get(metric, [])), target)
    if not res.curve:
        held = ", ".join(curves) or "none"
        raise ValueError(f"{source}: no {metric!r} test phase (the run logged none yet; test curves: {held})")
    task = record.get("sweep_task") or {}
    return Run(
        env=str(record["env"]),
        task=res.map_name,
        alg=str(record["alg"]),
        seed=res.seed,
        run_dir=Path(source),
        test_nepisode=int(record["test_nepisode"]),
        curve=res.curve,
        final=res.final,
        steps_to=res.steps_to,
        budget=res.curve[-1][0],
        extra={k: _pairs(curves.get(k, [])) for k in (RETURN_KEY,)},
        absolute=record.get("absolute"),
        started=float(task.get("started", math.nan)),
        finished=float(task.get("finished", math.nan)),
        code=code_of(record.get("provenance")),
        engine=engine_of(record),
    )


def _pairs(curve: list[Any]) -> list[tuple[int, float]]:
    return [(int(t), float(v)) for t, v in curve]


def load_run(run_dir: Path, metric: str, target: float) -> Run:
    """Read one run folder (its config, its ``metric`` curve and the cached absolute metric), or one run
    record file; both go through :func:`run_from_record`, so a folder and its record give the same Run."""
    run_dir = Path(run_dir)
    if run_dir.is_file():
        return run_from_record(read_record(run_dir), metric, target, run_dir)
    return run_from_record(record_from_run_dir(run_dir, (metric, RETURN_KEY)), metric, target, run_dir)


def compute_absolute(run_dir: Path, n_envs: int = 8, seed: int = 54321) -> dict[str, Any] | None:
    """Evaluate ``models/best`` (else the newest checkpoint) over ``ABSOLUTE_FACTOR x test_nepisode``
    greedy episodes and cache the result in ``run_dir/absolute_metric.json``; ``None`` without checkpoint."""
    from marl.checkpoint import best, latest, load
    from marl.evaluate import evaluate_payload

    run_dir = Path(run_dir)
    chosen = best(run_dir) or latest(run_dir)
    if chosen is None:
        return None
    payload = load(chosen)
    episodes = ABSOLUTE_FACTOR * int(payload["meta"]["config"]["log"]["test_nepisode"])
    result, _ = evaluate_payload(payload, episodes, n_envs=n_envs, seed=seed)
    meta = payload["_checkpoint"]
    out = {
        "checkpoint": Path(chosen).name,
        "checkpoint_t_env": int(payload["meta"]["t_env"]),
        "checkpoint_metric": meta.get("metric"),
        "episodes": episodes,
        "eval_seed": seed,
        **result,
    }
    (run_dir / ABSOLUTE_FILE).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def load_runs(
    roots: list[Path],
    metric: str,
    target: float,
    absolute: bool = False,
    n_envs: int = 8,
    min_steps: int = 0,
) -> tuple[list[Run], list[str]]:
    """Every readable run below ``roots`` (run folders and run records) and a list of notes on those skipped.
    With ``absolute``, runs without a cached absolute metric are evaluated now (MindSpore, the env: minutes on
    SMAC; a record has no checkpoint to evaluate). ``min_steps`` leaves out runs whose last test phase came
    before it (runs still going, or cut short). A record that cannot be read is an error (``RecordError``),
    and a run found twice (a run folder and its record) is counted once, the run folder first."""
    runs, skipped = [], []
    seen: dict[tuple[Any, ...], Path] = {}
    for d in sorted(find_run_dirs(roots), key=lambda d: (d.is_file(), d)):
        try:
            run = load_run(d, metric, target)
        except RecordError:
            raise
        except (ValueError, KeyError, OSError) as err:
            skipped.append(f"{d}: {err}")
            continue
        key = (run.env, run.task, run.alg, run.seed, tuple(run.curve))
        if key in seen:
            skipped.append(f"{d}: the same run as {seen[key]}, counted once")
            continue
        seen[key] = d
        if run.budget < min_steps:
            skipped.append(f"{d}: left out, its last test phase is at {run.budget:,} steps (< {min_steps:,})")
            continue
        runs.append(run)
    runs = sorted(runs, key=lambda r: r.run_dir)
    if absolute:
        skipped += add_absolute(runs, n_envs)
    return runs, skipped


def add_absolute(runs: list[Run], n_envs: int = 8) -> list[str]:
    """Evaluate the absolute metric of every run folder among ``runs`` that has none cached
    (:func:`compute_absolute`; minutes on SMAC); returns notes on the runs left without one."""
    notes = []
    for run in runs:
        if run.absolute is None:
            d = run.run_dir
            run.absolute = None if d.is_file() else compute_absolute(d, n_envs=n_envs)
            if run.absolute is None:
                why = "a run record keeps no checkpoint" if d.is_file() else "no checkpoint"
                notes.append(f"{d}: {why}, so no absolute metric")
    return notes
