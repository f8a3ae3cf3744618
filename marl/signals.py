"""How a run stops early: on SIGINT (Ctrl-C) and SIGTERM (schedulers), also after MindSpore has compiled a
graph, and on a non-finite update (``learner.on_nonfinite``).

MindSpore 2.10 installs its own SIGINT handler whenever it compiles or runs a graph (measured: after an
``ms.jit`` compile, after running an already compiled graph, after an eager op), and that handler turns
Ctrl-C into SIGTERM, so Python's ``KeyboardInterrupt`` is never raised. :class:`StopSignals` therefore owns
both signals and re-installs its handlers after each phase that calls MindSpore (:meth:`reassert`): a
Ctrl-C is seen as SIGINT (exit 130) unless it arrives while MindSpore is running, where it is seen as
SIGTERM (exit 143). Either way the run stops cleanly.

The first signal only sets :attr:`signum`; the training loop checks it between phases and stops with a
checkpoint. A second signal raises :class:`KeyboardInterrupt` at once: a checkpoint write in progress
is abandoned, and because writes are atomic the previous checkpoint stays intact.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from types import FrameType
from typing import Any

import numpy as np

from marl.interrupt import HANDLED, default_if_forked


def exit_code(signum: int) -> int:
    """The shell's exit status for a process stopped by ``signum`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum)


class StopSignals:
    """Context manager that turns SIGINT/SIGTERM into a stop request (see the module docstring)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self._previous: dict[int, Any] = {}
        self._owner = os.getpid()
        self._active = False

    @property
    def requested(self) -> bool:
        """True once a stop signal has arrived."""
        return self.signum is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if default_if_forked(self._owner, signum):
            return
        self.count += 1
        if self.signum is None:
            self.signum = signum
            name = signal.Signals(signum).name
            why = " (also how a Ctrl-C arrives while MindSpore runs)" if signum == signal.SIGTERM else ""
            print(
                f"\n[run] {name} received{why}: stopping after this phase (again to abort at once)",
                flush=True,
            )
            return
        raise KeyboardInterrupt(f"second stop signal ({signal.Signals(signum).name})")

    def reassert(self) -> None:
        """Re-install the handlers (MindSpore replaces SIGINT's on every graph compile). Cheap."""
        if self._active:
            for sig in HANDLED:
                signal.signal(sig, self._handle)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # signals only reach the main thread
            self._previous = {sig: signal.getsignal(sig) for sig in HANDLED}
            self._owner = os.getpid()
            self._active = True
            self.reassert()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._active:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            self._active = False


class RunStopped(RuntimeError):
    """The run ended early: by a signal (exit 130/143, checkpoint saved) or a non-finite step (exit 1)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        # pickled with both arguments: a sweep's Ray worker sends it back to the driver whole
        return type(self), (str(self), self.exit_code)


class NonFiniteError(RuntimeError):
    """A train step produced a NaN/inf loss or gradient and ``learner.on_nonfinite`` is ``stop``."""


def nonfinite_report(
    stats: dict[str, float], weights: dict[str, np.ndarray], policy: str, step: int, t_env: int
) -> str | None:
    """Check one train step. The learners never apply a non-finite gradient (``clip_and_apply``), so a
    non-finite statistic means the update was skipped: with ``policy == "stop"`` (or non-finite weights,
    which no skip can mend) raise :class:`NonFiniteError`; with ``"skip"`` return what was non-finite
    (``None`` when the step was healthy)."""
    bad = {k: v for k, v in stats.items() if not math.isfinite(v)}
    bad_w = [k for k, w in weights.items() if not np.isfinite(w).all()]
    if not bad and not bad_w:
        return None
    what = ", ".join(f"{k}={v}" for k, v in bad.items()) or f"non-finite weights in {', '.join(bad_w)}"
    what = f"train step {step} (t_env={t_env}): {what}"
    if policy == "stop" or bad_w:
        raise NonFiniteError(
            f"non-finite values at {what}; the update was not applied. The run stops without saving, so "
            "models/ keeps its last good checkpoints. Lower learner.lr (or clip harder), or set "
            "learner.on_nonfinite=skip to skip such steps."
        )
    return what
