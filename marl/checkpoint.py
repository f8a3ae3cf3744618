"""Atomic, pruned checkpoints of NumPy payloads (no MindSpore here: learners hand over NumPy arrays).

A checkpoint is a folder ``run_dir/models/<t_env>/`` (and ``models/best/``) holding

* ``arrays.npz``  – every ``np.ndarray`` leaf of the payload, keyed by its path (``"agent/fc1.weight"``);
* ``meta.json``   – every JSON-able leaf (counters, the config dict, ...) plus ``_checkpoint`` bookkeeping;
* ``objects.pkl`` – every other leaf (RNG states, tuples, NumPy scalars) and everything under ``"rng"``.

:func:`load` merges the three back into the nested dict that was saved. A save writes into a hidden
temporary folder, fsyncs every file and the folder, then renames it into place, so a crash mid-save
leaves the previous checkpoint intact; leftovers of a crashed save are removed by the next Checkpointer.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

MODELS = "models"
BEST = "best"
_TMP_PREFIX = ".tmp-"
_OLD_PREFIX = ".old-"
_ARRAYS, _META, _OBJECTS = "arrays.npz", "meta.json", "objects.pkl"
_PICKLED_KEYS = ("rng",)  # top-level payload keys that are always pickled whole (exact types matter)
_SEP = "/"


class CheckpointError(RuntimeError):
    """A checkpoint folder is missing or unreadable."""


def _split(payload: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, Any]]:
    """Split a nested payload into (arrays by path, JSON tree, pickled objects by path)."""
    arrays: dict[str, np.ndarray] = {}
    objects: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str) or _SEP in key or not key:
                raise CheckpointError(f"payload keys must be non-empty strings without '/', got {key!r}")
            path = prefix + key
            if not prefix and key in _PICKLED_KEYS:
                objects[path] = value
            elif isinstance(value, np.ndarray):
                arrays[path] = value
            elif isinstance(value, Mapping):
                tree[key] = walk(value, path + _SEP)
            elif _json_exact(value):
                tree[key] = value
            else:
                objects[path] = value
        return tree

    return arrays, walk(payload, ""), objects


def _json_exact(value: Any) -> bool:
    """True when ``value`` survives a JSON round trip unchanged (tuples and NumPy scalars do not)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json_exact(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    return False


def _insert(tree: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(_SEP)
    for p in parts[:-1]:
        tree = tree.setdefault(p, {})
    tree[parts[-1]] = value


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(folder: Path, payload: Mapping[str, Any], t_env: int, metric: float | None) -> None:
    """Write the three payload files into ``folder`` (which must exist) and fsync them."""
    arrays, tree, objects = _split(payload)
    np.savez(folder / _ARRAYS, **arrays)
    with open(folder / _OBJECTS, "wb") as fh:
        pickle.dump(objects, fh, protocol=pickle.HIGHEST_PROTOCOL)
    meta = {"_checkpoint": {"t_env": int(t_env), "metric": metric, "saved_at": time.time()}, "tree": tree}
    with open(folder / _META, "w", encoding="utf-8") as fh:
        json.dump(meta, fh)
    for name in (_ARRAYS, _OBJECTS, _META):
        _fsync_file(folder / name)
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

    The result also holds ``"_checkpoint"``: ``{"t_env", "metric", "saved_at", "path"}``.
    """
    folder = Path(path)
    if not (folder / _META).is_file():
        raise CheckpointError(
            f"{folder} is not a checkpoint folder (no {_META}); use latest(run_dir) to find one"
        )
    with open(folder / _META, encoding="utf-8") as fh:
        meta = json.load(fh)
    payload: dict[str, Any] = meta["tree"]
    with np.load(folder / _ARRAYS, allow_pickle=False) as npz:
        for name in npz.files:
            _insert(payload, name, npz[name])
    with open(folder / _OBJECTS, "rb") as fh:
        for name, value in pickle.load(fh).items():
            _insert(payload, name, value)
    payload["_checkpoint"] = {**meta["_checkpoint"], "path": str(folder)}
    return payload


def periodic(run_dir: str | Path) -> list[Path]:
    """The periodic checkpoint folders of a run, oldest first."""
    models = Path(run_dir) / MODELS
    if not models.is_dir():
        return []
    found = [p for p in models.iterdir() if p.is_dir() and p.name.isdigit() and (p / _META).is_file()]
    return sorted(found, key=lambda p: int(p.name))


def latest(run_dir: str | Path) -> Path | None:
    """The newest complete periodic checkpoint of ``run_dir`` (``None`` when there is none)."""
    found = periodic(run_dir)
    return found[-1] if found else None


def best(run_dir: str | Path) -> Path | None:
    """The best-metric checkpoint of ``run_dir`` (``None`` when there is none)."""
    folder = Path(run_dir) / MODELS / BEST
    return folder if (folder / _META).is_file() else None


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
        best_dir = best(self.run_dir)
        self.best_metric: float | None = None
        if best_dir is not None:
            with open(best_dir / _META, encoding="utf-8") as fh:
                self.best_metric = json.load(fh)["_checkpoint"]["metric"]

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

    def save(self, t_env: int, payload: Mapping[str, Any], metric: float | None = None) -> Path:
        """Atomically write ``models/<t_env>/``; prune old periodic saves; update ``models/best/``."""
        if int(t_env) < 0:
            raise ValueError(f"t_env must be >= 0, got {t_env}")
        if metric is not None and not math.isfinite(float(metric)):
            metric = None  # a NaN test score never becomes "best"
        final = self.models / str(int(t_env))
        self._write_atomic(final, payload, t_env, metric)
        self._prune()
        if self.save_best and metric is not None and (self.best_metric is None or metric > self.best_metric):
            self._write_atomic(self.models / BEST, payload, t_env, float(metric))
            self.best_metric = float(metric)
        return final

    def _write_atomic(
        self, final: Path, payload: Mapping[str, Any], t_env: int, metric: float | None
    ) -> None:
        tmp = self.models / f"{_TMP_PREFIX}{final.name}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        try:
            write_checkpoint(tmp, payload, t_env, metric)
            _replace_dir(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _prune(self) -> None:
        for old in periodic(self.run_dir)[: -self.keep_last]:
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
