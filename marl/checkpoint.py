"""Atomic, pruned, pickle-free checkpoints of NumPy payloads (no MindSpore here: learners hand over NumPy).

A checkpoint is a folder ``run_dir/models/<t_env>/`` (and ``models/best/``) holding

* ``arrays.npz`` – every ``np.ndarray`` leaf and every NumPy scalar of the payload, keyed by its path
  (``"agent/fc1.weight"``), read back with ``allow_pickle=False``;
* ``agent.ckpt``  – (written by the trainer) the acting network's weights as a MindSpore checkpoint, for
  ``mindspore.load_checkpoint``; not part of the payload (a resume reads ``arrays.npz``);
* ``meta.json``  – everything else (counters, the config dict, RNG states, ...) as JSON, with tags for
  the values plain JSON cannot hold exactly (tuples, non-finite floats), plus ``_checkpoint``
  bookkeeping: ``t_env``, ``metric``, ``saved_at``, the format version and the SHA-256 of ``arrays.npz``;
* ``manifest.json`` – written last: the SHA-256 of every other file (:mod:`marl.checkpoint_verify`).

A checkpoint is data, never code: no pickle is written or read (a folder from an older version holding
``objects.pkl`` is refused with a message). :func:`load` checks every digest before it parses a file and
reads ``meta.json`` by a strict schema, so a truncated or altered file is reported instead of loaded (a
folder written before manifests existed is still read, its ``arrays.npz`` checked against ``meta.json``).
:func:`load_latest` walks back to the newest intact checkpoint, naming every one it rejects and why. A
save writes into a hidden temporary folder, fsyncs every file and the folder, then renames it into place,
so a crash mid-save leaves the previous checkpoint intact; leftovers of a crashed save are removed by the
next :class:`Checkpointer`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from marl.checkpoint_verify import (  # CheckpointError and FORMAT re-exported
    ARRAY,
    ARRAYS,
    FLOAT,
    FORMAT,
    MANIFEST,
    META,
    SCALAR,
    TUPLE,
    CheckpointError,
    decode_tree,
    parse_meta,
    read_metric,
    sha256,
    verify_files,
    write_manifest,
)

MODELS = "models"
AGENT_CKPT = "agent.ckpt"  # the acting network in MindSpore's checkpoint format (written by the trainer)
BEST = "best"
_TMP_PREFIX = ".tmp-"
_OLD_PREFIX = ".old-"
_SEP = "/"


# --------------------------------------------------------------------------------------------- codec
def _encode(payload: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split a nested payload into (arrays by path, JSON tree): arrays and NumPy scalars become
    references into ``arrays.npz``; tuples and non-finite floats become tagged JSON objects."""
    arrays: dict[str, np.ndarray] = {}

    def enc(v: Any, path: str) -> Any:
        if isinstance(v, (np.ndarray, np.generic)):
            arr = np.asarray(v)
            if arr.dtype == object:
                raise CheckpointError(f"{path}: object arrays cannot be saved (they would need a pickle)")
            arrays[path] = arr
            return {SCALAR if isinstance(v, np.generic) else ARRAY: path}
        if isinstance(v, Mapping):
            out = {}
            for key, x in v.items():
                if not isinstance(key, str) or _SEP in key or not key or key.startswith("__"):
                    raise CheckpointError(f"payload keys must be non-empty strings without '/', got {key!r}")
                out[key] = enc(x, f"{path}{_SEP}{key}" if path else key)
            return out
        if isinstance(v, float) and not math.isfinite(v):
            return {FLOAT: repr(v)}
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)):
            items = [enc(x, f"{path}{_SEP}{i}") for i, x in enumerate(v)]
            return {TUPLE: items} if isinstance(v, tuple) else items
        raise CheckpointError(f"{path}: a {type(v).__name__} cannot be saved in a checkpoint (data only)")

    return arrays, enc(payload, "")


# ---------------------------------------------------------------------------------------------- files
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(folder: Path, payload: Mapping[str, Any], t_env: int, metric: float | None) -> None:
    """Write ``arrays.npz`` and ``meta.json`` into ``folder`` (which must exist) and fsync them (the caller
    adds its extra files, then :func:`~marl.checkpoint_verify.write_manifest`)."""
    arrays, tree = _encode(payload)
    with open(folder / ARRAYS, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    book = {"t_env": int(t_env), "metric": metric, "saved_at": time.time(), "format": FORMAT}
    book["arrays_sha256"] = sha256(folder / ARRAYS)
    with open(folder / META, "w", encoding="utf-8") as fh:
        json.dump({"_checkpoint": book, "tree": tree}, fh, allow_nan=False)
        fh.flush()
        os.fsync(fh.fileno())
    _fsync_dir(folder)


def _replace_dir(tmp: Path, final: Path) -> None:
    """Move the finished ``tmp`` folder to ``final``; an existing ``final`` is swapped out, then removed."""
    old = None
    if final.exists():
        old = final.parent / f"{_OLD_PREFIX}{final.name}-{os.getpid()}"
        os.rename(final, old)
    os.rename(tmp, final)
    _fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def load(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint folder back into the nested payload dict that was saved.

    The result also holds ``"_checkpoint"``: ``{"t_env", "metric", "saved_at", "path", "nonfinite"}``,
    where ``nonfinite`` lists the float arrays holding NaN or inf (empty for a healthy checkpoint).
    Raises :class:`CheckpointError` naming the file and the reason when the folder is not intact.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a checkpoint folder (no such folder); see its models/")
    if not (folder / META).is_file():
        raise CheckpointError(f"{folder / META}: missing, so {folder} is not a checkpoint folder")
    try:
        manifest = verify_files(folder)  # every digest, before any file is parsed
        book, tree = parse_meta(folder, manifest)
        if not (folder / ARRAYS).is_file():
            raise CheckpointError(f"{folder / ARRAYS}: missing")
        if not manifest and sha256(folder / ARRAYS) != book["arrays_sha256"]:
            raise CheckpointError(f"{folder / ARRAYS}: corrupt (its SHA-256 differs from the one in {META})")
        with np.load(folder / ARRAYS, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except OSError as exc:  # unreadable file, or an npz that is no zip
        raise CheckpointError(
            f"{exc.filename or folder / ARRAYS}: unreadable ({exc.strerror or exc})"
        ) from None
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{folder / ARRAYS}: unreadable ({type(exc).__name__}: {exc})") from None
    payload: dict[str, Any] = decode_tree(tree, arrays, folder / META)
    if not isinstance(payload, dict):
        raise CheckpointError(f"{folder / META}: tree must be an object of named values, not a tagged value")
    nonfinite = [n for n, a in arrays.items() if a.dtype.kind == "f" and not np.isfinite(a).all()]
    payload["_checkpoint"] = {**book, "path": str(folder), "nonfinite": nonfinite}
    return payload


def periodic(run_dir: str | Path) -> list[Path]:
    """The periodic checkpoint folders of a run, oldest first."""
    models = Path(run_dir) / MODELS
    if not models.is_dir():
        return []
    found = [p for p in models.iterdir() if p.is_dir() and p.name.isdigit() and (p / META).is_file()]
    return sorted(found, key=lambda p: int(p.name))


def latest(run_dir: str | Path) -> Path | None:
    """The newest complete periodic checkpoint folder of ``run_dir`` (``None`` when there is none)."""
    found = periodic(run_dir)
    return found[-1] if found else None


def best(run_dir: str | Path) -> Path | None:
    """The best-metric checkpoint of ``run_dir`` (``None`` when there is none)."""
    folder = Path(run_dir) / MODELS / BEST
    return folder if (folder / META).is_file() else None


def load_checked(path: str | Path, check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """:func:`load`, then ``check(payload)`` (which raises :class:`CheckpointError` for a payload its
    reader cannot use, e.g. :func:`marl.trainer_state.check_payload`)."""
    payload = load(path)
    if check is not None:
        check(payload)
    return payload


def load_latest(
    run_dir: str | Path,
    report: Callable[[str], None] = print,
    check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The newest *intact* periodic checkpoint of ``run_dir``, walking back past corrupt ones.

    Every rejected folder is reported (path and reason), a numbered folder without ``meta.json`` too;
    ``check`` (see :func:`load_checked`) may reject more. A checkpoint with non-finite arrays is loaded
    but reported. Raises :class:`CheckpointError` when none is intact.
    """
    rejected = []
    models = Path(run_dir) / MODELS
    numbered = [p for p in models.iterdir() if p.name.isdigit() and p.is_dir()] if models.is_dir() else []
    for folder in sorted(numbered, key=lambda p: int(p.name), reverse=True):
        try:
            payload = load_checked(folder, check)
        except CheckpointError as exc:
            rejected.append(str(exc))
            report(f"[checkpoint] skipping {exc}")
            continue
        warn_nonfinite(payload, report)
        return payload
    where = Path(run_dir) / MODELS
    detail = ("; rejected: " + " | ".join(rejected)) if rejected else ""
    raise CheckpointError(f"no intact checkpoint under {where}{detail}")


def warn_nonfinite(payload: Mapping[str, Any], report: Callable[[str], None] = print) -> None:
    """Report a loaded checkpoint whose arrays hold NaN or inf (its weights are unusable)."""
    bad = payload["_checkpoint"].get("nonfinite") or []
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        report(f"[checkpoint] warning: {payload['_checkpoint']['path']} holds non-finite values in {shown}")


class Checkpointer:
    """Save periodic checkpoints of a run, keep the last ``keep_last``, and track the best one."""

    def __init__(self, run_dir: str | Path, keep_last: int = 3, save_best: bool = True) -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last}")
        self.run_dir = Path(run_dir)
        self.models = self.run_dir / MODELS
        self.keep_last = keep_last
        self.save_best = save_best
        self.models.mkdir(parents=True, exist_ok=True)
        self._recover()
        self.best_metric: float | None = None
        best_dir = best(self.run_dir)
        if best_dir is not None:
            try:
                self.best_metric = read_metric(best_dir)
            except CheckpointError as exc:  # a corrupt best/ is replaced by the next best
                print(f"[checkpoint] ignoring {exc}")

    def _recover(self) -> None:
        """Remove temp folders of crashed saves; restore a final folder a crash left swapped out."""
        for p in self.models.iterdir():
            if p.name.startswith(_TMP_PREFIX):
                shutil.rmtree(p, ignore_errors=True)
            elif p.name.startswith(_OLD_PREFIX):
                name = p.name[len(_OLD_PREFIX) :].rsplit("-", 1)[0]
                if not (self.models / name).exists():
                    os.rename(p, self.models / name)
                else:
                    shutil.rmtree(p, ignore_errors=True)

    def save(
        self,
        t_env: int,
        payload: Mapping[str, Any],
        metric: float | None = None,
        exports: Mapping[str, Callable[[Path], None]] | None = None,
    ) -> Path:
        """Atomically write ``models/<t_env>/``; prune old periodic saves; update ``models/best/``.

        ``exports`` maps an extra file name to a writer called with its path inside the folder before the
        folder is moved into place (e.g. ``agent.ckpt``, the agent weights in MindSpore's own format);
        :func:`load` reads only the payload, so an extra file never changes what a resume restores."""
        if int(t_env) < 0:
            raise ValueError(f"t_env must be >= 0, got {t_env}")
        if metric is not None and not math.isfinite(float(metric)):
            metric = None  # a NaN test score never becomes "best"
        final = self.models / str(int(t_env))
        self._write_atomic(final, payload, t_env, metric, exports)
        self._prune(int(t_env))
        if self.save_best and metric is not None and (self.best_metric is None or metric > self.best_metric):
            self._write_atomic(self.models / BEST, payload, t_env, float(metric), exports)
            self.best_metric = float(metric)
        return final

    def _write_atomic(
        self,
        final: Path,
        payload: Mapping[str, Any],
        t_env: int,
        metric: float | None,
        exports: Mapping[str, Callable[[Path], None]] | None = None,
    ) -> None:
        tmp = self.models / f"{_TMP_PREFIX}{final.name}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        try:
            write_checkpoint(tmp, payload, t_env, metric)
            for name, write in (exports or {}).items():
                if name in (ARRAYS, META, MANIFEST) or "/" in name:
                    raise ValueError(f"export name {name!r} is reserved or not a plain file name")
                write(tmp / name)
            write_manifest(tmp)
            _fsync_dir(tmp)
            _replace_dir(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _prune(self, t_env: int) -> None:
        """Keep the newest ``keep_last`` saves up to ``t_env``; a folder numbered beyond it (one a resume
        walked back past) never pushes out an intact older save."""
        for old in [p for p in periodic(self.run_dir) if int(p.name) <= t_env][: -self.keep_last]:
            shutil.rmtree(old, ignore_errors=True)

    def latest(self) -> Path | None:
        """Newest periodic checkpoint of this run."""
        return latest(self.run_dir)

    def load(self, path: str | Path | None = None) -> dict[str, Any]:
        """Load ``path`` (default: the latest periodic checkpoint of this run)."""
        path = path if path is not None else self.latest()
        if path is None:
            raise CheckpointError(f"no checkpoint under {self.models}")
        return load(path)
