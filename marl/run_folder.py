"""A run folder's life: a unique name, an exclusive lock while a run writes to it, and rewinding its logs
to a checkpoint on resume.

* :func:`create_run_dir` makes a fresh folder whose default name cannot collide (microsecond time stamp,
  and a numbered suffix should two launches still meet); an explicit ``run_name`` that already holds a
  run is refused (continue it with ``--resume``).
* :class:`RunLock` holds ``fcntl.flock`` on ``<run>/.lock`` for the writer's lifetime: a second writer
  fails at once with the holder's pid. The kernel drops the lock when the holder dies, so a crashed
  run never leaves a stale lock behind.
* :func:`rewind_logs` cuts ``log.jsonl`` back to the checkpoint's ``t_env`` and moves the MindInsight
  event files aside (into ``superseded/``, which MindInsight does not read), so every series stays
  monotonic; the logger then replays the kept scalars into a fresh event file.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

LOCK_FILE = ".lock"
LOG_FILE = "log.jsonl"
SUMMARY_GLOB = "events.out.events.summary.*"
SUPERSEDED = "superseded"


class RunFolderError(RuntimeError):
    """The run folder cannot be used (busy, exists already, not writable)."""


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` already holds (part of) a training run."""
    return any((folder / name).exists() for name in ("config.yaml", LOG_FILE, "models"))


def create_run_dir(results_dir: str | Path, name: str, explicit: bool) -> Path:
    """Create and return ``results_dir/name`` (suffixed ``-2``, ``-3``... for a default name that is taken).

    An explicit name that already holds a run is an error, never shared with a second run.
    """
    base = Path(results_dir)
    if base.exists() and not base.is_dir():
        raise RunFolderError(f"results_dir {base} is a file; it must be a folder (or not exist yet)")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunFolderError(f"cannot create results_dir {base}: {exc.strerror}") from exc
    if not os.access(base, os.W_OK | os.X_OK):
        raise RunFolderError(f"results_dir {base} is not writable")
    for attempt in range(1, 1000):
        folder = base / (name if attempt == 1 else f"{name}-{attempt}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            if explicit and holds_run(folder):
                raise RunFolderError(
                    f"run folder {folder} already holds a run; continue it with --resume {folder} "
                    "or choose another run_name"
                ) from None
            if explicit:
                return folder
    raise RunFolderError(f"no free run folder name for {base / name}")


def default_run_name(alg: str, map_name: str, seed: int) -> str:
    """``<alg>_<map>_seed<seed>_<YYYYmmdd-HHMMSS>-<microseconds>`` (safe for folder names)."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1e6) % 1_000_000:06d}"
    safe_map = "".join(c if c.isalnum() or c in "-_." else "_" for c in map_name)
    return f"{alg}_{safe_map}_seed{seed}_{stamp}"


class RunLock:
    """An exclusive, process-lifetime lock on a run folder (see the module docstring)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise :class:`RunFolderError` naming the process that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise RunFolderError(
                f"run folder {self.path.parent} is in use by another run ({holder}); wait for it to finish "
                "or stop it (Ctrl-C, or create a file named 'stop' in the folder)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.ctime()}".encode(), 0)
        self._fd = fd
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


def rewind_logs(run_dir: str | Path, t_env: int) -> list[dict[str, Any]]:
    """Cut ``log.jsonl`` to the records at ``t <= t_env`` (text records stay) and move the MindInsight
    event files to ``superseded/<time>/``. Returns the kept scalar records, oldest first, for replay."""
    run_dir = Path(run_dir)
    log = run_dir / LOG_FILE
    kept_lines: list[str] = []
    scalars: list[dict[str, Any]] = []
    if log.is_file():
        with open(log, encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
                if "t" in rec and int(rec["t"]) > t_env:
                    continue
                kept_lines.append(json.dumps(rec, allow_nan=False))
                if "t" in rec and isinstance(rec.get("value"), (int, float)):
                    scalars.append(rec)
        tmp = log.with_name(LOG_FILE + ".tmp")
        tmp.write_text("".join(line + "\n" for line in kept_lines), encoding="utf-8")
        os.replace(tmp, log)
    events = sorted(run_dir.glob(SUMMARY_GLOB))
    if events:
        dest = run_dir / SUPERSEDED / time.strftime("%Y%m%d-%H%M%S")
        dest.mkdir(parents=True, exist_ok=True)
        for f in events:
            os.replace(f, dest / f.name)
    return sorted(scalars, key=lambda r: int(r["t"]))
