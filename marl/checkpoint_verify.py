"""Verifying a checkpoint folder before anything in it is used (see :mod:`marl.checkpoint`).

* ``manifest.json`` (written last, format 3 on) holds the SHA-256 of every other file of the folder,
  ``meta.json`` included; :func:`verify_files` checks them all before a byte of them is parsed. A folder
  of format 2 (no manifest) is still read: its ``meta.json`` holds the digest of ``arrays.npz``.
* :func:`parse_meta` reads ``meta.json`` with :func:`marl.untrusted.loads_strict` and checks its
  bookkeeping by a strict schema (types, ranges, ``t_env`` equal to the folder's name).
* :func:`decode_tree` rebuilds the payload, refusing any malformed tag.

Every failure is a :class:`CheckpointError` naming the file and the reason.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from marl.untrusted import BadFileError, check_name, read_json

ARRAYS, META, MANIFEST, LEGACY_PICKLE = "arrays.npz", "meta.json", "manifest.json", "objects.pkl"
FORMAT = (
    3  # 3: manifest.json; 2: no manifest (still read); 1: the pickle-holding layout of marl 0.1 (refused)
)
ARRAY, SCALAR, TUPLE, FLOAT = "__array__", "__numpy_scalar__", "__tuple__", "__float__"
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_BOOK_KEYS = {"t_env", "metric", "saved_at", "format", "arrays_sha256"}


class CheckpointError(RuntimeError):
    """A checkpoint folder is missing, unreadable, corrupt or holds something a checkpoint may not."""


def sha256(path: Path) -> str:
    """Hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path) -> None:
    """Write ``manifest.json``: the SHA-256 of every other plain file of ``folder``; fsynced."""
    import json

    files = {p.name: sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != MANIFEST}
    with open(folder / MANIFEST, "w", encoding="utf-8") as fh:
        json.dump({"format": 1, "files": files}, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())


def _read(path: Path) -> Any:
    try:
        return read_json(path)
    except BadFileError as exc:
        raise CheckpointError(str(exc)) from None


def verify_files(folder: Path, only: str | None = None) -> bool:
    """Check every file ``manifest.json`` lists (or just ``only``) against its digest; ``False`` when there
    is no manifest.

    A manifest that is malformed, misses ``arrays.npz`` or ``meta.json``, or names a path instead of a
    file name is refused; so is any listed file that is missing or differs."""
    where = folder / MANIFEST
    if not where.is_file():
        return False
    data = _read(where)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or data.get("format") != 1:
        raise CheckpointError(f"{where}: malformed (it must be {{'format': 1, 'files': {{name: sha256}}}})")
    for name in (META, ARRAYS):
        if name not in files:
            raise CheckpointError(f"{where}: does not list {name}")
    for name, digest in files.items():
        try:
            check_name(name, "file name")
        except ValueError as exc:
            raise CheckpointError(f"{where}: {exc}") from None
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise CheckpointError(f"{where}: the digest of {name} is not a SHA-256 hex string")
        path = folder / name
        if only is not None and name != only:
            continue
        if not path.is_file():
            raise CheckpointError(f"{path}: missing (listed in {MANIFEST})")
        if sha256(path) != digest:
            raise CheckpointError(f"{path}: corrupt (its SHA-256 differs from the one in {MANIFEST})")
    return True


def read_metric(folder: Path) -> float | None:
    """The ``metric`` of a checkpoint folder, checking only ``meta.json`` (not its possibly large arrays)."""
    book, _ = parse_meta(folder, verify_files(folder, only=META))
    return book.get("metric")


def _number(book: Mapping[str, Any], key: str, where: Path, none_ok: bool) -> None:
    v = book.get(key)
    if v is None and none_ok:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise CheckpointError(f"{where}: _checkpoint.{key} must be a finite number, got {v!r}")


def parse_meta(folder: Path, manifest: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(bookkeeping, tree)`` of ``folder/meta.json``, checked by the strict schema."""
    where = folder / META
    if (folder / LEGACY_PICKLE).exists():
        raise CheckpointError(_legacy(folder))
    meta = _read(where)
    if not isinstance(meta, dict) or set(meta) != {"_checkpoint", "tree"}:
        raise CheckpointError(f"{where}: must be an object with exactly the keys _checkpoint and tree")
    book, tree = meta["_checkpoint"], meta["tree"]
    if not isinstance(book, dict) or not isinstance(tree, dict):
        raise CheckpointError(f"{where}: _checkpoint and tree must be objects")
    fmt = book.get("format", 1)
    if fmt == 1:
        raise CheckpointError(_legacy(folder))
    if isinstance(fmt, bool) or fmt not in (2, FORMAT):
        raise CheckpointError(f"{where}: _checkpoint.format {fmt!r} is not 2 or {FORMAT} (a newer marl?)")
    if fmt == FORMAT and not manifest:
        raise CheckpointError(f"{folder / MANIFEST}: missing (format {FORMAT} folders hold one)")
    unknown = sorted(set(book) - _BOOK_KEYS)
    if unknown:
        raise CheckpointError(f"{where}: unknown key _checkpoint.{unknown[0]}")
    t_env = book.get("t_env")
    if isinstance(t_env, bool) or not isinstance(t_env, int) or t_env < 0:
        raise CheckpointError(f"{where}: _checkpoint.t_env must be an int >= 0, got {t_env!r}")
    if folder.name.isdigit() and int(folder.name) != t_env:
        raise CheckpointError(f"{where}: _checkpoint.t_env {t_env} differs from the folder's name")
    _number(book, "metric", where, none_ok=True)
    _number(book, "saved_at", where, none_ok=True)
    digest = book.get("arrays_sha256")
    if not (isinstance(digest, str) and _HEX64.fullmatch(digest)) and not manifest:
        raise CheckpointError(f"{where}: _checkpoint.arrays_sha256 must be a SHA-256 hex string")
    return book, tree


def _legacy(folder: Path) -> str:
    return (
        f"{folder}: written by an older marl with a pickle ({LEGACY_PICKLE}); it is not loaded because "
        "unpickling can run code. Re-train, or load it with that older marl and save again."
    )


def decode_tree(node: Any, arrays: Mapping[str, np.ndarray], where: Path) -> Any:
    """Rebuild the payload from the JSON tree (the inverse of the checkpoint's encoder)."""
    if isinstance(node, list):
        return [decode_tree(x, arrays, where) for x in node]
    if not isinstance(node, dict):
        return node
    tags = [k for k in node if k.startswith("__")]
    if not tags:
        return {k: decode_tree(v, arrays, where) for k, v in node.items()}
    tag, val = tags[0], node[tags[0]]
    if len(node) != 1 or tag not in (ARRAY, SCALAR, TUPLE, FLOAT):
        raise CheckpointError(f"{where}: malformed tag {tag!r} (a tag is the only key of its object)")
    if tag in (ARRAY, SCALAR):
        if not isinstance(val, str) or val not in arrays:
            raise CheckpointError(f"{where}: {tag} {val!r} names no array in {ARRAYS}")
        if tag == SCALAR:
            if arrays[val].ndim != 0:
                raise CheckpointError(f"{where}: {tag} {val!r} names an array, not a scalar")
            return arrays[val][()]
        return arrays[val]
    if tag == TUPLE:
        if not isinstance(val, list):
            raise CheckpointError(f"{where}: {TUPLE} must hold a list, got {val!r}")
        return tuple(decode_tree(x, arrays, where) for x in val)
    if not isinstance(val, str) or val not in _FLOATS:
        raise CheckpointError(f"{where}: {FLOAT} must be one of {', '.join(_FLOATS)}, got {val!r}")
    return _FLOATS[val]
