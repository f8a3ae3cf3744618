"""How many threads the compiled env kernels use (the ``threads`` option of the batched engine and env).

``threads=1`` (the default) runs every kernel serially. ``threads=k > 1`` runs the loop over envs of the
step and observation kernels on ``k`` Numba threads (never more than Numba's pool, ``NUMBA_NUM_THREADS``,
which defaults to the machine's cores); ``threads=0`` means all of them. Results do not depend on it: each
env owns its random stream and scratch memory (tested bit for bit).

Use ``threads > 1`` only on idle cores: the threads come from OpenMP and spin at the end of every parallel
loop, so one busy core slows each step many times (measured figures in ``docs/smac.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba


def resolve_threads(threads: int) -> int:
    """The number of threads ``threads`` stands for (0 = all of Numba's pool); a clear error otherwise."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0 = all cores, 1 = serial), got {threads!r}")
    pool = numba.config.NUMBA_NUM_THREADS
    return pool if threads == 0 else min(threads, pool)


def with_threads(threads: int, kernel: Callable[..., Any], *args: Any) -> Any:
    """Call a ``parallel=True`` kernel on ``threads`` threads (then restore the caller's setting)."""
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(before)
