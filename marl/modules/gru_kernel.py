"""The GRU recurrence as three compiled CPU kernels (MindSpore AOT custom operators).

Same inputs, outputs and gradient as :class:`marl.modules.gru_bptt.GRUSequence`, the readable reference
(tests compare the two, forward and backward, to 1e-5): the whole ``T``-step recurrence is one kernel
forward and one backward (``marl/kernels/gru_seq.cc``), instead of about ten MindSpore kernels per step,
each paying launch overhead on CPU (``benchmarks/results/learner_step_levers.md``). It also makes the
compiled graph small: nothing is unrolled at compile time.

:func:`gru_cells` picks the kernels where they build (:mod:`marl.kernels`) and the reference otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from marl.kernels import library
from marl.modules.gru_bptt import GRUSequence, gru_forward
from marl.utils.ms import ms, nn, ops


def _custom(lib: str, func: str, out_shape: Callable, out_dtype: Callable) -> ops.Custom:
    return ops.Custom(f"{lib}:{func}", out_shape=out_shape, out_dtype=out_dtype, func_type="aot")


def _fwd_shapes(gi_rz, gi_n, h0, w_hh, b_n):  # noqa: ANN001, ANN202
    return gi_n  # h (T, M, H)


def _fwd_save_shapes(gi_rz, gi_n, h0, w_hh, b_n):  # noqa: ANN001, ANN202
    return gi_n, [gi_n[0], gi_n[1], 4 * gi_n[2]]  # h, saved [r | z | n | W_hn h + b_hn]


def _bwd_shapes(dh, h, saved, h0, w_hh):  # noqa: ANN001, ANN202
    return [dh[0], dh[1], 2 * dh[2]], dh, h0, w_hh, [dh[2]]  # d gi_rz, d gi_n, d h0, d W_hh, d b_hn


class GRUSequenceKernel(nn.Cell):
    """``(gi_rz (T, M, 2H), gi_n (T, M, H), h0 (M, H), W_hh (3H, H), b_hn (H,))`` -> ``(h_TMH, saved)``.

    Only ``h_TMH`` may be used by the caller; ``saved`` holds the activations the backward kernel needs."""

    def __init__(self, lib: str) -> None:
        super().__init__()
        self.fwd = _custom(lib, "GruSeqForwardSave", _fwd_save_shapes, lambda *dt: (dt[1], dt[1]))
        self.bwd = _custom(lib, "GruSeqBackward", _bwd_shapes, lambda *dt: (dt[0],) * 5)

    def construct(self, gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n):  # noqa: ANN001, ANN201, D102
        return self.fwd(gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n)

    def bprop(self, gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n, out, dout):  # noqa: ANN001, ANN201, D102
        return self.bwd(dout[0], out[0], out[1], h0_MH, w_hh)


class GRUForwardKernel(nn.Cell):
    """Hidden states ``(T, M, H)`` only, for passes that take no gradient (target networks)."""

    def __init__(self, lib: str) -> None:
        super().__init__()
        self.fwd = _custom(lib, "GruSeqForward", _fwd_shapes, lambda *dt: dt[1])

    def construct(self, gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n):  # noqa: ANN001, ANN201, D102
        return self.fwd(gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n)


def gru_cells(use_kernels: bool = True) -> tuple[nn.Cell, Callable[..., ms.Tensor]]:
    """``(sequence, forward_only)``: the compiled kernels where available, else the MindSpore reference
    (:class:`~marl.modules.gru_bptt.GRUSequence` and :func:`~marl.modules.gru_bptt.gru_forward`).

    ``sequence(...)[0]`` and ``forward_only(...)`` are the hidden states ``(T, M, H)``."""
    lib = library("gru_seq") if use_kernels else None
    if lib is None:
        return GRUSequence(), gru_forward
    return GRUSequenceKernel(lib), GRUForwardKernel(lib)
