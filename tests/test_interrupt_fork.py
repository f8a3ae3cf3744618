"""Signal handlers of a command-line run act in its own process only: a process forked from it (a
multiprocessing pool's worker, which its pool ends with SIGTERM) dies quietly by the default action."""

from __future__ import annotations

import multiprocessing
import signal
import time

import pytest

from marl import interrupt
from marl.signals import StopSignals

pytestmark = pytest.mark.unit


@pytest.fixture
def restore_handlers():
    saved = {sig: signal.getsignal(sig) for sig in interrupt.HANDLED}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _terminated_child_exitcode() -> int:
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    child.start()
    time.sleep(0.2)
    child.terminate()
    child.join(10)
    return child.exitcode


@pytest.mark.parametrize("where", ["exit_on_interrupt", "raise_on_interrupt", "StopSignals"])
def test_a_forked_child_takes_sigterm_s_default_action(where, restore_handlers, capfd):
    interrupt.exit_on_interrupt()
    if where == "exit_on_interrupt":
        code = _terminated_child_exitcode()
    elif where == "raise_on_interrupt":
        with interrupt.raise_on_interrupt():
            code = _terminated_child_exitcode()
    else:
        with StopSignals() as stop:
            code = _terminated_child_exitcode()
        assert not stop.requested  # the parent saw nothing
    assert code == -signal.SIGTERM
    err = capfd.readouterr()
    assert "Traceback" not in err.err and "SIGTERM" not in err.err + err.out
