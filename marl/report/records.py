"""Run records: the part of a finished run that the reports read, as one small JSON file that can be
committed (suggested: ``benchmarks/results/runs/<suite>/<alg>_<map>_seed<k>.json``), so that the multi-seed
tables can be regenerated and extended with new seeds once the run folders (checkpoints, logs) are gone.

A record holds what :func:`marl.report.runs.load_run` reads from a run folder (env, task, alg, seed,
``test_nepisode``, the test curves of ``CURVE_KEYS``, the cached absolute metric, the budget) and provenance:
the run folder's name, its resolved ``config.yaml`` as a dict (``results_dir`` cut to its last component, so
no machine path is committed), the wall-clock span of its ``log.jsonl``, the sweep task's start and end
(``result.json``) and the run's ``provenance.jsonl`` (git commit, versions and machine of each launch and
resume, :mod:`marl.provenance`; absent for runs that predate it), with the engine records found there
(``engine``: the version and resolved backend of each distinct engine the run was launched on; absent for
runs recorded before engine versions, which the report calls "unknown"). Checkpoints are not kept. The
reports read a record exactly as they read its run folder.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from marl.logging.plots import read_scalars
from marl.provenance import engines_of, read_provenance
from marl.run_folder import LOG_FILE
from marl.untrusted import BadFileError, loads_strict

RECORD_FORMAT = "marl-run-record"
RECORD_VERSION = 1
RECORD_NAME = re.compile(r".+_seed\d+\.json")  # <alg>_<map>_seed<k>.json: how a folder scan tells records
ABSOLUTE_FILE = "absolute_metric.json"  # in a run folder: its absolute metric (marl.report.runs)
DONE_FILE = "result.json"  # in a run folder: the sweep's run finished (marl.sweep)
CURVE_KEYS = ("test_win_rate", "test_return_mean")  # the test curves the reports read
WRITERS = "scripts/report.py --save-records DIR or scripts/sweep.py --records DIR"
_FIELDS = {"env": str, "task": str, "alg": str, "seed": int, "test_nepisode": int, "curves": dict}


class RecordError(ValueError):
    """A run record (or the folder meant to hold records) that cannot be used; the message says why."""


def env_name(cfg: dict[str, Any]) -> str:
    """The report's environment name of a run config: ``env.name``, with sc2 split into smac and smacv2."""
    name = str(cfg["env"]["name"])
    if name != "sc2":
        return name
    from marl.envs.smac.smacv2.scenarios import is_scenario  # SMAC and SMACv2 both use the sc2 env

    return "smacv2" if is_scenario(str(cfg["env"]["map_name"])) else "smac"


def _log_wall_clock(log: Path) -> dict[str, float] | None:
    """First and last ``time`` stamp of a ``log.jsonl`` and the seconds between (interruptions included)."""
    stamps = []
    with open(log, encoding="utf-8") as fh:
        for line in fh:
            try:
                stamp = json.loads(line).get("time")
            except (json.JSONDecodeError, AttributeError):
                continue  # a blank line, or one cut short by a crash
            if isinstance(stamp, (int, float)):
                stamps.append(float(stamp))
    if not stamps:
        return None
    return {"first": min(stamps), "last": max(stamps), "seconds": round(max(stamps) - min(stamps), 3)}


def record_from_run_dir(run_dir: Path, keys: Iterable[str] = CURVE_KEYS) -> dict[str, Any]:
    """The record of a run folder (``config.yaml``, ``log.jsonl``, ``absolute_metric.json``, ``result.json``)
    with the test curves of ``keys`` that it logged. A missing config key raises ``KeyError``."""
    run_dir = Path(run_dir)
    with open(run_dir / "config.yaml", encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    scalars = read_scalars(run_dir / LOG_FILE)
    curves = {k: [[t, v] for t, v in scalars[k]] for k in dict.fromkeys(keys) if k in scalars}
    record: dict[str, Any] = {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "env": env_name(cfg),
        "task": str(cfg["env"]["map_name"]),
        "alg": str(cfg["alg"]),
        "seed": int(cfg["seed"]),
        "test_nepisode": int(cfg["log"]["test_nepisode"]),
        "budget": max((c[-1][0] for c in curves.values() if c), default=None),  # the last test phase
        "curves": curves,
        "absolute": None,
        "source": run_dir.name,
    }
    if (run_dir / ABSOLUTE_FILE).is_file():
        record["absolute"] = json.loads((run_dir / ABSOLUTE_FILE).read_text(encoding="utf-8"))
    wall = _log_wall_clock(run_dir / LOG_FILE) if (run_dir / LOG_FILE).is_file() else None
    if wall is not None:
        record["wall_clock"] = wall
    if (run_dir / DONE_FILE).is_file():
        done = json.loads((run_dir / DONE_FILE).read_text(encoding="utf-8"))
        task = {k: done.get(k) for k in ("started", "finished")}
        if all(isinstance(v, (int, float)) and math.isfinite(v) for v in task.values()):
            record["sweep_task"] = task
    provenance = read_provenance(run_dir)
    if provenance:
        record["provenance"] = provenance
    engines = engines_of(provenance)
    if engines:
        record["engine"] = engines
    if "results_dir" in cfg:  # its last component only: a committed record holds no machine path
        cfg = {**cfg, "results_dir": Path(str(cfg["results_dir"])).name}
    record["config"] = cfg
    return record


def check_record(data: Any, where: str | Path) -> dict[str, Any]:
    """``data`` if it is a run record of this format version, else a :class:`RecordError` saying why not."""
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        raise RecordError(
            f'{where}: not a run record (a JSON object with "format": "{RECORD_FORMAT}", as {WRITERS} '
            "write them)"
        )
    if data.get("version") != RECORD_VERSION:
        raise RecordError(
            f"{where}: run record format version {data.get('version')!r}; this version of marl reads version "
            f"{RECORD_VERSION} only (write the record again with {WRITERS})"
        )
    bad = [k for k, kind in _FIELDS.items() if not isinstance(data.get(k), kind) or isinstance(data[k], bool)]
    for key, curve in (data["curves"] if isinstance(data.get("curves"), dict) else {}).items():
        pairs = curve if isinstance(curve, list) else [None]
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) for p in pairs):
            bad.append(f"curves.{key} (a list of [t_env, value] pairs)")
        elif not all(isinstance(v, (int, float)) for _, v in pairs):
            bad.append(f"curves.{key} (numeric values)")
    if data.get("absolute") is not None and not isinstance(data["absolute"], dict):
        bad.append("absolute (an object or null)")
    if bad:
        raise RecordError(
            f"{where}: run record with missing or malformed fields: {', '.join(bad)}; a record holds "
            f"{', '.join(_FIELDS)} (see marl/report/records.py)"
        )
    return data


def read_record(path: Path) -> dict[str, Any]:
    """Read and check one record file (:class:`RecordError` when it does not parse or is not a record)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(f"{path}: cannot read the run record ({err})") from err
    try:
        data = loads_strict(text, str(path))
    except BadFileError as err:  # also NaN/Infinity literals and nesting past the depth limit
        why = str(err).removeprefix(f"{path}: ")
        raise RecordError(
            f"{path}: the run record does not parse as JSON ({why}); a record is the JSON object that "
            f"{WRITERS} write"
        ) from None
    return check_record(data, path)


def record_of(source: Path, keys: Iterable[str] = CURVE_KEYS) -> dict[str, Any]:
    """The record of a run source: a record file as read, or a run folder's :func:`record_from_run_dir`."""
    source = Path(source)
    return read_record(source) if source.is_file() else record_from_run_dir(source, keys)


def record_name(alg: str, task: str, seed: int) -> str:
    """``<alg>_<map>_seed<k>.json`` (characters other than letters, digits, ``-_.`` become ``_``)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{alg}_{task}")
    return f"{safe}_seed{seed}.json"


def records_folder(folder: Path) -> Path:
    """``folder``, created when missing; a :class:`RecordError` when it is a file."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise RecordError(
            f"{folder} is a file; records go into a folder (created when missing) that holds one "
            "<alg>_<map>_seed<k>.json per run, e.g. benchmarks/results/runs/<suite>/"
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _text(record: dict[str, Any]) -> str:
    """The file text: indented, with each ``[t_env, value]`` pair on one line (short diffs in git)."""
    text = json.dumps(record, indent=1)
    return re.sub(r"\[\s+(-?\d+),\s+([^\s\[\]{},]+)\s+\]", r"[\1, \2]", text) + "\n"


def _differ(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The top-level fields in which two records differ (compared as JSON text, so NaN equals NaN)."""
    keys = dict.fromkeys([*old, *new])
    return [
        k for k in keys if json.dumps(old.get(k), sort_keys=True) != json.dumps(new.get(k), sort_keys=True)
    ]


def _conflict(path: Path, new: dict[str, Any], force: bool) -> bool:
    """Whether ``path`` must be (re)written with ``new``: not there, or replaced with ``force``. A different
    record there without ``force`` is a :class:`RecordError` naming both."""
    if not path.exists():
        return True
    try:
        old = read_record(path)
    except RecordError:
        if force:
            return True
        raise
    differ = _differ(old, new)
    if differ and not force:
        raise RecordError(
            f"{path} already holds a different record of {new['alg']} on {new['task']} seed {new['seed']} "
            f"(from run {old.get('source')!r}; the new one is from run {new.get('source')!r}; they differ "
            f"in: {', '.join(differ)}); replace it (scripts/report.py --save-records DIR --force), remove "
            "it, or write the records into another folder"
        )
    return bool(differ)


def write_records(records: Sequence[dict[str, Any]], folder: Path, force: bool = False) -> list[Path]:
    """Write each record into ``folder`` as :func:`record_name`, after checking them all: two records for one
    alg/map/seed, or a different record already in the folder (without ``force``), write nothing and raise
    :class:`RecordError`. A file that already holds the same record is left as it is."""
    folder = records_folder(folder)
    paths, seen = [], {}
    for rec in records:
        rec = check_record(json.loads(json.dumps(rec)), f"the record of run {rec.get('source')!r}")
        path = folder / record_name(rec["alg"], rec["task"], rec["seed"])
        if path.name in seen and _differ(seen[path.name], rec):
            raise RecordError(
                f"two runs of {rec['alg']} on {rec['task']} seed {rec['seed']} would both be written to "
                f"{path}: {seen[path.name].get('source')!r} and {rec.get('source')!r}; give one at a time"
            )
        seen[path.name] = rec
        paths.append(path)
    todo = [(p, seen[p.name]) for p in dict.fromkeys(paths) if _conflict(p, seen[p.name], force)]
    for path, rec in todo:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(_text(rec), encoding="utf-8")
        os.replace(tmp, path)  # never a half-written record
    return paths


def write_record(record: dict[str, Any], folder: Path, force: bool = False) -> Path:
    """Write one record into ``folder`` (see :func:`write_records`); returns its path."""
    return write_records([record], folder, force)[0]


def write_run_record(run_dir: Path, folder: Path, metric: str = CURVE_KEYS[0], force: bool = False) -> Path:
    """Write the record of the run folder ``run_dir`` (its ``CURVE_KEYS`` and ``metric`` curves) into
    ``folder``; see :func:`write_records`."""
    return write_record(record_from_run_dir(run_dir, (*CURVE_KEYS, metric)), folder, force)
