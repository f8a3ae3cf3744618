"""A fix for MindSpore 2.10's summary writer process, which busy-waits.

``mindspore.train.summary._writer_pool.WriterPool.run`` loops on ``queue.get(block=False)`` (and a
``psutil.pid_exists`` heartbeat) without ever blocking, so the writer process that every ``SummaryRecord``
forks takes 20–40 % of a core even when nothing is logged (measured on the 2-core machine: 1.9 s of CPU in
10 idle seconds, and as much CPU as the training process itself during a run). :func:`install` replaces that
loop with the same steps around a blocking ``queue.get(timeout=...)``. It applies only to the pinned version
(2.10.0) and only when the class still has the members the loop uses; otherwise MindSpore's own loop runs.
The writer is forked, so patching the class in the parent before ``SummaryRecord`` is created is enough.
"""

from __future__ import annotations

import queue
import signal
import time
from collections import deque
from typing import Any

_MEMBERS = ("_queue", "_check_heartbeat", "_write", "_write_data_in_deq", "_flush", "_close")
_installed = False


def _blocking_run(self: Any) -> None:
    """``WriterPool.run`` of MindSpore 2.10 with a blocking read of the command queue."""
    from mindspore.train.summary import _writer_pool as wp

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as MindSpore: Ctrl-C is the training process's
    with wp.ctx.Pool(min(wp.ctx.cpu_count(), self._num_process)) as pool:
        pending: deque = deque()
        while True:
            if self._check_heartbeat():
                self._close()
                return
            while pending and pending[0].ready():
                for plugin, data in pending.popleft().get():
                    self._write(plugin, data)
            try:  # short waits while packed data is outstanding, else wake twice a second for the heartbeat
                action, data = self._queue.get(timeout=0.01 if pending else 0.5)
            except queue.Empty:
                continue
            if action == "WRITE":
                pending.append(pool.apply_async(wp._pack_data, (data, time.time())))
            elif action == "FLUSH":
                self._write_data_in_deq(pending)
                self._flush()
            elif action == "END":
                break
        self._write_data_in_deq(pending)
        self._close()


def install(mindspore: Any) -> bool:
    """Patch ``WriterPool.run`` when it is MindSpore 2.10.0's; returns whether the patch is active."""
    global _installed
    if _installed:
        return True
    if getattr(mindspore, "__version__", "") != "2.10.0":
        return False
    try:
        from mindspore.train.summary import _writer_pool as wp
    except ImportError:
        return False
    cls = getattr(wp, "WriterPool", None)
    if cls is None or not hasattr(wp, "_pack_data") or not hasattr(wp, "ctx"):
        return False
    probe = cls.__init__.__code__.co_names + cls.run.__code__.co_names
    if not all(m in probe or hasattr(cls, m) for m in _MEMBERS):
        return False
    cls.run = _blocking_run
    _installed = True
    return True
