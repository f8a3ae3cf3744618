"""Stopping a sweep cleanly.

The first SIGINT (Ctrl-C) or SIGTERM that the sweep's driver receives asks every running run to stop with a
checkpoint, through the run's own stop file (:data:`marl.trainer_state.STOP_FILE`, checked after every
batch of episodes), and a marker in the sweep folder keeps the runs not yet begun from starting. The
driver waits for the running runs to save and return, then exits 130 / 143; ``--resume`` continues every
run from the checkpoint it just wrote. A second signal aborts at once (the runs then keep only their
periodic checkpoints, as when a machine dies).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from marl.trainer_state import STOP_FILE

STOP_MARKER = "stopping"  # in a sweep folder: the sweep was asked to stop; no run begins while it is there


class SweepStopped(RuntimeError):
    """A run of a sweep that did not finish because the sweep was stopped (``--resume`` continues it)."""


def request_stop(out: Path, running: Iterable[Path]) -> None:
    """Mark the sweep folder ``out`` as stopping, then ask each run folder of ``running`` to stop."""
    (out / STOP_MARKER).write_text("the sweep was asked to stop; scripts/sweep.py --resume removes this\n")
    for run_dir in running:
        if run_dir.is_dir():  # a run not begun yet has no folder: the marker keeps it from starting
            (run_dir / STOP_FILE).write_text("")


def clear(out: Path) -> None:
    """Forget an earlier stop request (a resumed sweep runs)."""
    (out / STOP_MARKER).unlink(missing_ok=True)


def check_not_stopping(run_dir: Path) -> None:
    """Raise :class:`SweepStopped` if the sweep holding ``run_dir`` is stopping."""
    if (run_dir.parent / STOP_MARKER).exists():
        raise SweepStopped(f"{run_dir.name}: not started, the sweep was stopping; --resume runs it")


def check_finished(run_dir: Path, t_env: int, t_max: int) -> None:
    """Raise :class:`SweepStopped` if a run returned before ``t_max`` (a stop file ended it)."""
    if t_env < t_max:
        raise SweepStopped(
            f"{run_dir.name}: stopped at t_env={t_env:,} of {t_max:,} (checkpoint saved); --resume goes on"
        )
