"""Host arrays a learner fills again on every train call, instead of allocating them afresh.

A whole-episode learner step hands its graph the batch's arrays cut to the trained rows and slots: the
agent inputs ``(B, T, N, obs + actions + agents)`` are by far the largest (218 MB at 27m_vs_30m sizes, batch
32 x 181 slots). Built afresh on every call, such arrays are new memory every time, and every page of it is
faulted in (and zeroed by the kernel) before it is written: NumPy asks for transparent huge pages on large
arrays, and on a busy 2-core machine that fault path took 0.4-0.7 s of system time per 27m_vs_30m call
against 0.05-0.2 s of copying (``benchmarks/results/learner_step_levers.md``). Filled into arrays kept from
the last call, the same inputs cost only the copy (system time per call 0.4-0.7 s -> 0).

:class:`HostBuffers` hands out such arrays by key: the first ``size`` elements of one flat array per key,
grown when a call needs more, so that any shorter cut (fewer slots, fewer rows) reuses it, still contiguous.
A key names one part of one call (``(part, name)``): parts that are alive together must have different keys.
The arrays are overwritten by the next call with the same key: a learner only uses them within a call.

:func:`agent_inputs_into` writes what :func:`marl.controllers.mac.build_agent_inputs` returns (the readable
reference; ``tests/test_host_buffers.py`` holds them equal) for the episodes ``rows`` over ``t`` slots
straight from the batch, without the intermediate copies.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np


class HostBuffers:
    """Reusable host arrays, one flat array per key (see the module docstring)."""

    def __init__(self) -> None:
        self._flat: dict[Hashable, np.ndarray] = {}

    def take(self, key: Hashable, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """A C-contiguous array of ``shape`` and ``dtype`` for ``key``; its contents are left from an earlier
        call (the caller overwrites all of it)."""
        dtype, size = np.dtype(dtype), math.prod(shape)
        flat = self._flat.get(key)
        if flat is None or flat.dtype != dtype or flat.size < size:
            flat = self._flat[key] = np.empty(size, dtype)
        return flat[:size].reshape(shape)

    def nbytes(self) -> int:
        """Bytes held by all buffers."""
        return sum(x.nbytes for x in self._flat.values())


def copy_rows(out: np.ndarray, src: np.ndarray, rows: np.ndarray | None, t: int) -> np.ndarray:
    """``out[:] = src[rows, :t]`` (``rows`` None: all episodes), cast to ``out``'s dtype, without the
    temporary copy that fancy indexing makes; returns ``out``."""
    if rows is None:
        np.copyto(out, src[:, :t], casting="unsafe")
    else:
        for j, r in enumerate(rows):
            np.copyto(out[j], src[r, :t], casting="unsafe")
    return out


def agent_inputs_into(
    out: np.ndarray,
    obs_BTNO: np.ndarray,
    actions_onehot_BTNA: np.ndarray,
    rows: np.ndarray | None,
    obs_last_action: bool,
    obs_agent_id: bool,
) -> np.ndarray:
    """``build_agent_inputs(obs[rows, :t], actions_onehot[rows, :t], ...)`` written into ``out`` (shape
    ``(len(rows), t, N, I)``, float32): the observation, then the previous slot's action one-hot (zeros at
    ``t = 0``), then the agent id one-hot, as the reference concatenates them; returns ``out``."""
    b, t, n, width = out.shape
    o = obs_BTNO.shape[3]
    copy_rows(out[..., :o], obs_BTNO, rows, t)
    col = o
    if obs_last_action:
        a = actions_onehot_BTNA.shape[3]
        out[:, 0, :, col : col + a] = 0.0
        copy_rows(out[:, 1:, :, col : col + a], actions_onehot_BTNA, rows, t - 1)
        col += a
    if obs_agent_id:
        out[..., col : col + n] = np.eye(n, dtype=np.float32)
        col += n
    if col != width:
        raise ValueError(f"agent inputs have {col} features, the buffer {width}")
    return out
