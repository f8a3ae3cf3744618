"""Ctrl-C at any moment of a command-line run: one line and exit 130 (143 for SIGTERM), never a traceback.

The scripts call :func:`exit_on_interrupt` before their heavy imports (MindSpore, Numba, Ray): until a
run installs its own handlers (:class:`marl.signals.StopSignals`), SIGINT and SIGTERM print one line and
end the process at once (``os._exit``), also while MindSpore starts up, where a ``KeyboardInterrupt``
raised inside its initialisation could abort the interpreter. Where a half-done step must be undone (a
run folder being created or resumed), :func:`raise_on_interrupt` turns the signal into a
``KeyboardInterrupt`` that the step's cleanup sees; the command line reports it in one line.

The handlers act in the process that installed them only: a process forked from it (a multiprocessing
pool's worker, which its pool ends with SIGTERM) gets the signal's default action, silently.

No heavy imports here: this module must load in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM)
_owner = 0  # the pid that installed the handlers


def default_if_forked(owner: int, signum: int) -> bool:
    """In a process other than ``owner`` (one forked after a handler was installed, e.g. a multiprocessing
    pool's worker, which its pool ends with SIGTERM): take the signal's default action; True if so."""
    if os.getpid() == owner:
        return False
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return True


def _exit_now(signum: int, frame: FrameType | None) -> None:
    if default_if_forked(_owner, signum):
        return
    name = signal.Signals(signum).name
    try:
        os.write(2, f"\n[marl] {name} received: stopped (nothing half-written is left)\n".encode())
    finally:
        os._exit(128 + int(signum))


def _raise(signum: int, frame: FrameType | None) -> None:
    if default_if_forked(_owner, signum):
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def exit_on_interrupt() -> None:
    """Make SIGINT and SIGTERM print one line and exit 128 + signal number (main thread only)."""
    global _owner
    if threading.current_thread() is threading.main_thread():
        _owner = os.getpid()
        for sig in HANDLED:
            signal.signal(sig, _exit_now)


def installed() -> bool:
    """Whether :func:`exit_on_interrupt` is in force (a command-line run, not a library caller)."""
    return signal.getsignal(signal.SIGTERM) is _exit_now


@contextlib.contextmanager
def raise_on_interrupt() -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM raise ``KeyboardInterrupt`` (so cleanup runs); afterwards the
    one-line exit is back. Does nothing for a library caller's own handlers (nor off the main thread)."""
    active = installed() and threading.current_thread() is threading.main_thread()
    if active:
        for sig in HANDLED:  # also after MindSpore replaced SIGINT's handler
            signal.signal(sig, _raise)
    try:
        yield
    finally:
        if active:
            exit_on_interrupt()
