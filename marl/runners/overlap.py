"""Acting beside learning: the runner plays the next episodes on a second thread during a learner update.

A jitted MindSpore step releases Python's GIL while its graph runs, and acting is NumPy (the controller's
copy of the agent network and the embedded engine), so on a machine with a second core the two run at once
(``benchmarks/research/flag_ab.py --flag runner.overlap`` measures what a run gains). The schedule is fixed,
so a seed still gives one run: the update on the stored episodes and the acting of the next batch start
together, the acting uses the weights the controller already holds (those of the update before: one update of
policy lag, as the actors of distributed off-policy methods have, e.g. Ape-X, Horgan et al. 2018), and the new
weights reach the controller only after both are done. On-policy learners never overlap: PPO's ratios assume
that the fresh batch was played by the policy being updated.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

A = TypeVar("A")
W = TypeVar("W")


def run_beside(act: Callable[[], A], work: Callable[[], W]) -> tuple[A, W]:
    """Run ``act`` on a second thread while ``work`` runs on this one; return both results.

    The thread is always waited for, also when ``work`` raises (so nothing still steps the envs when the
    caller closes them); an exception of ``act`` is raised here after ``work`` is done. The thread is a
    daemon: a second Ctrl-C that abandons the run does not wait for the episodes in flight.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = act()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=target, name="marl-acting", daemon=True)
    thread.start()
    try:
        out = work()
    finally:
        thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"], out
