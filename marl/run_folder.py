"""A run folder's life: a unique name, an exclusive lock while a run writes to it, and rewinding its logs
to a checkpoint on resume.

* :func:`create_run_dir` makes a fresh folder whose default name cannot collide (microsecond time stamp,
  and a numbered suffix should two launches still meet); an explicit ``run_name`` that already holds a
  run is refused (continue it with ``--resume``). A name is one folder name (:mod:`marl.untrusted`) and
  the folder must resolve inside ``results_dir``; OS errors (full disk, read-only) become one line.
* :class:`RunLock` holds ``fcntl.flock`` on ``<run>/.lock`` for the writer's lifetime: a second writer
  fails at once with the holder's pid. The kernel drops the lock when the holder dies, so a crashed
  run never leaves a stale lock behind.
* :func:`rewind_logs` cuts ``log.jsonl`` back to the checkpoint's ``t_env`` and moves the MindInsight
  event files aside (into ``superseded/``, which MindInsight does not read), so every series stays
  monotonic; the logger then replays the kept scalars into a fresh event file. :func:`read_log` checks
  every line first and names the first bad one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from marl.untrusted import BadFileError, check_inside, check_name, loads_strict, os_error_line, safe_name

LOCK_FILE = ".lock"
LOG_FILE = "log.jsonl"
SUMMARY_GLOB = "events.out.events.summary.*"
SUPERSEDED = "superseded"


class RunFolderError(RuntimeError):
    """The run folder cannot be used (busy, exists already, not writable)."""


class RunBusyError(RunFolderError):
    """Another process holds the run folder's lock."""


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` already holds (part of) a training run."""
    return any((folder / name).exists() for name in ("config.yaml", LOG_FILE, "models"))


def create_run_dir(results_dir: str | Path, name: str, explicit: bool) -> Path:
    """Create and return ``results_dir/name`` (suffixed ``-2``, ``-3``... for a default name that is taken).

    An explicit name that already holds a run is an error, never shared with a second run. ``name`` must
    be one folder name (:func:`marl.untrusted.check_name`), and the folder must resolve inside
    ``results_dir`` (a link there pointing elsewhere is refused).
    """
    try:
        check_name(name, "run_name")
    except ValueError as exc:
        raise RunFolderError(str(exc)) from None
    base = Path(results_dir)
    if base.exists() and not base.is_dir():
        raise RunFolderError(f"results_dir {base} is a file; it must be a folder (or not exist yet)")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunFolderError(os_error_line(exc, "cannot create results_dir")) from None
    if not os.access(base, os.W_OK | os.X_OK):
        raise RunFolderError(f"results_dir {base} is not writable")
    for attempt in range(1, 1000):
        folder = base / (name if attempt == 1 else f"{name}-{attempt}")
        try:
            check_inside(base, folder, "run folder")
            folder.mkdir()
            return folder
        except ValueError as exc:
            raise RunFolderError(str(exc)) from None
        except FileExistsError:
            if explicit and holds_run(folder):
                raise RunFolderError(
                    f"run folder {folder} already holds a run; continue it with --resume {folder} "
                    "or choose another run_name"
                ) from None
            if explicit:
                return folder
        except OSError as exc:
            raise RunFolderError(os_error_line(exc, "cannot create the run folder")) from None
    raise RunFolderError(f"no free run folder name for {base / name}")


def default_run_name(alg: str, map_name: str, seed: int) -> str:
    """``<alg>_<map>_seed<seed>_<YYYYmmdd-HHMMSS>-<microseconds>`` (safe for folder names)."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1e6) % 1_000_000:06d}"
    return safe_name(f"{alg}_{map_name}")[:60] + f"_seed{seed}_{stamp}"


def remove_failed_start(folder: Path) -> None:
    """Remove a fresh run folder that a failed start left holding nothing but (at most) ``.lock``.

    Not for a folder another run holds (:class:`RunBusyError`): its ``.lock`` is that run's."""
    try:
        names = {p.name for p in folder.iterdir()}
        if names <= {LOCK_FILE}:
            (folder / LOCK_FILE).unlink(missing_ok=True)
            folder.rmdir()
    except OSError:
        pass  # nothing to clean that the OS lets us clean


class RunLock:
    """An exclusive, process-lifetime lock on a run folder (see the module docstring)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise :class:`RunFolderError` naming the process that holds it (or the OS
        error: a read-only or full file system, no permission)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunFolderError(os_error_line(exc, "cannot lock the run folder", self.path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise RunBusyError(
                f"run folder {self.path.parent} is in use by another run ({holder}); wait for it to finish "
                "or stop it (Ctrl-C, or create a file named 'stop' in the folder)"
            ) from None
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.ctime()}".encode(), 0)
        except OSError as exc:
            self.release()
            raise RunFolderError(os_error_line(exc, "cannot lock the run folder", self.path)) from None
        return self

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_log(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/log.jsonl``, each checked: a JSON object without NaN/inf literals whose
    ``t`` is an int >= 0 and whose ``value`` is a number or null. A last line cut short by a crash is
    dropped; any other bad line is a :class:`RunFolderError` naming the file, the line and the reason."""
    log = Path(run_dir) / LOG_FILE
    if not log.is_file():
        return []
    try:
        lines = log.read_bytes().split(b"\n")
    except OSError as exc:
        raise RunFolderError(os_error_line(exc, "cannot read the log", log)) from None
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last = n == len(lines)  # no newline after it: a write a crash cut short
        try:
            rec = loads_strict(line, f"{log} line {n}")
        except BadFileError as exc:
            if last:
                continue
            raise RunFolderError(f"{exc}; fix or delete that line, then resume again") from None
        bad = _log_problem(rec)
        if bad:
            raise RunFolderError(
                f"{log} line {n}: {bad} ({line[:60].decode('utf-8', 'replace')!r}); fix or delete that line, "
                "then resume again"
            )
        records.append(rec)
    return records


def _log_problem(rec: Any) -> str | None:
    """What is wrong with one parsed ``log.jsonl`` record (``None`` when nothing)."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    t, value = rec.get("t", 0), rec.get("value")
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        return "t must be an int >= 0"
    if isinstance(value, bool) or not isinstance(value, (int, float, type(None))):
        return "value must be a number or null"
    return None


def rewind_logs(run_dir: str | Path, t_env: int) -> list[dict[str, Any]]:
    """Cut ``log.jsonl`` to the records at ``t <= t_env`` (text records stay) and move the MindInsight
    event files to ``superseded/<time>/``. Returns the kept scalar records, oldest first, for replay.
    A malformed line is a :class:`RunFolderError` (see :func:`read_log`)."""
    run_dir = Path(run_dir)
    log = run_dir / LOG_FILE
    if log.is_file():
        kept = [rec for rec in read_log(run_dir) if int(rec.get("t", 0)) <= t_env]
        scalars = [rec for rec in kept if "t" in rec and isinstance(rec.get("value"), (int, float))]
        tmp = log.with_name(LOG_FILE + ".tmp")
        try:
            tmp.write_text("".join(json.dumps(rec, allow_nan=False) + "\n" for rec in kept), encoding="utf-8")
            os.replace(tmp, log)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise RunFolderError(os_error_line(exc, "cannot rewrite the log", log)) from None
    else:
        scalars = []
    events = sorted(run_dir.glob(SUMMARY_GLOB))
    if events:
        dest = run_dir / SUPERSEDED / time.strftime("%Y%m%d-%H%M%S")
        dest.mkdir(parents=True, exist_ok=True)
        for f in events:
            os.replace(f, dest / f.name)
    return sorted(scalars, key=lambda r: int(r["t"]))
