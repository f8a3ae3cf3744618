"""Reading what a user or a run folder hands over as untrusted input: names that become paths, JSON files
and lines, and the OS errors of writing (full disk, read-only file system, ...).

* :func:`check_name` — a name that becomes a folder or file name (``run_name``, sweep runs, replays) is
  one path component of ``[A-Za-z0-9._-]``, not ``.`` or ``..``, at most :data:`MAX_NAME` characters.
* :func:`check_inside` — a folder built from such a name lies inside its base after resolving links.
* :func:`loads_strict` — JSON without ``NaN``/``Infinity`` literals, overflowing numbers or nesting deeper
  than :data:`MAX_DEPTH`; every failure is a :class:`BadFileError` naming the file (and line) and why.
* :func:`os_error_line` — one line naming the path and what to do, for any ``OSError``.
"""

from __future__ import annotations

import errno
import json
import math
import re
from pathlib import Path
from typing import Any

MAX_NAME = 100
MAX_DEPTH = 64
NAME_CHARS = "letters, digits, '.', '_' and '-'"
_NAME = re.compile(r"[A-Za-z0-9._-]+")


class BadFileError(ValueError):
    """A file (or a line of one) does not hold what it must; the message names the file and the reason."""


def check_name(value: Any, what: str) -> str:
    """Return ``value`` if it is a safe single path component, else raise ``ValueError`` naming ``what``."""
    allowed = f"one folder name of {NAME_CHARS}, at most {MAX_NAME} characters, not '.' or '..'"
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be {allowed}; got {value!r}")
    if value in (".", "..") or len(value) > MAX_NAME or not _NAME.fullmatch(value):
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise ValueError(f"{what} {shown!r} is not allowed: it must be {allowed}")
    return value


def safe_name(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9._-]`` replaced by ``_`` (for names built from a
    map or algorithm name); the result passes :func:`check_name` when it is short enough."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def check_inside(base: str | Path, path: str | Path, what: str) -> Path:
    """``path`` resolved; raise ``ValueError`` unless it lies inside ``base`` (links resolved too)."""
    root, full = Path(base).resolve(), Path(path).resolve()
    if full == root or root not in full.parents:
        raise ValueError(f"{what} {path} resolves to {full}, outside {root}; choose a name inside it")
    return full


def _no_constant(name: str) -> Any:
    raise ValueError(f"the literal {name} is not JSON (non-finite numbers are written as null or a tag)")


def _check_tree(node: Any, where: str) -> None:
    """Depth limit and finite numbers, without recursing deeper than :data:`MAX_DEPTH`."""
    stack = [(node, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadFileError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, float) and not math.isfinite(item):
            raise BadFileError(f"{where}: a number overflows to {item}")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def loads_strict(text: str | bytes, where: str) -> Any:
    """Parse JSON ``text`` strictly (see the module docstring); ``where`` names the file (and line)."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BadFileError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the literals, huge integers
        raise BadFileError(f"{where}: not valid JSON ({exc})") from None
    _check_tree(value, where)
    return value


def read_json(path: str | Path) -> Any:
    """Read and :func:`loads_strict` the file at ``path`` (an unreadable file is a :class:`BadFileError`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise BadFileError(f"{path}: unreadable ({exc.strerror or exc})") from None
    return loads_strict(data, str(path))


_ADVICE = {
    errno.ENOSPC: "the disk is full: free space (or choose another results_dir) and try again",
    errno.EDQUOT: "the disk quota is used up: free space (or choose another results_dir) and try again",
    errno.EROFS: "the file system is read-only: choose a writable results_dir (or copy the run folder)",
    errno.EACCES: "permission denied: choose a folder you may write to, or fix its permissions",
    errno.EPERM: "operation not permitted: choose a folder you may write to, or fix its permissions",
    errno.ENAMETOOLONG: "the name is too long for the file system: choose a shorter run_name or results_dir",
    errno.ENOENT: "it does not exist: check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.EISDIR: "it is a folder where a file was expected: check the path",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) and try again",
}


def os_error_line(exc: OSError, doing: str = "", path: str | Path | None = None) -> str:
    """One line for ``exc``: what failed, on which path (``exc.filename``, else ``path``), and what to do."""
    path = exc.filename if exc.filename is not None else (path if path is not None else "?")
    advice = _ADVICE.get(exc.errno or 0, "check the path and try again")
    what = f"{doing}: " if doing else ""
    reason = exc.strerror or type(exc).__name__
    return f"{what}{path}: {reason}; {advice}"
