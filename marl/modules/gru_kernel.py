"""The GRU recurrence as three compiled CPU kernels (MindSpore AOT custom operators).

Both sequence cells here take ``(gi (T, M, 3H), h0 (M, H), W_hh (3H, H), b_ih (3H,), b_hh (3H,))`` with
``gi = x W_ih^T`` for every step (no bias) and return the hidden states ``(T, M, H)`` first:

* :class:`GRUSequenceKernel`: the whole ``T``-step recurrence is one kernel forward and one backward
  (``marl/kernels/gru_seq.cc``), biases and their gradients included, instead of about ten MindSpore kernels
  per step, each paying launch overhead on CPU (``benchmarks/results/learner_step_levers.md``). It also
  keeps the compiled graph small: nothing is unrolled at compile time.
* :class:`GRUSequenceReference`: the readable form, the bias additions in MindSpore followed by
  :class:`marl.modules.gru_bptt.GRUSequence` (hand-written BPTT). Tests hold the two equal, forward and
  backward, to 1e-5.

:func:`gru_cells` picks the kernels where they build (:mod:`marl.kernels`) and the reference otherwise.

The RNN agent runs the same recurrence with its input layer's bias and ReLU and the GRU's input projection
inside (:func:`gru_proj_cells`): the cells take ``(z (T*M, I), b_z, h0, W_ih (3H, I), W_hh, b_ih, b_hh)``,
``z`` the time-major rows of ``fc1``'s product without its bias, and the GRU's input is ``x = relu(z + b_z)``.
The kernels (:class:`GRUProjSequenceKernel`, :class:`GRUProjForwardKernel`) compute ``x_t`` and ``x_t W_ih^T``
step by step while the step's rows are in cache, and the backward ``d z_t = relu'(.) (d gi_t W_ih)`` likewise,
with ``d W_ih = d gi^T x`` and ``d b_z`` after the loop: no ``(T, M, 3H)`` array goes through the graph, and a
train step has ten kernels fewer (MatMul, BiasAdd, ReLU per net; the backward's MatMuls, ReluGrad and bias
sum). Their readable reference, :class:`GRUProjSequenceReference`, computes those as MindSpore ops and then
runs :class:`GRUSequenceReference`; tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Callable

from marl.kernels import library
from marl.modules.gru_bptt import GRUSequence, gru_forward
from marl.utils.ms import ms, nn, ops


def _custom(lib: str, func: str, out_shape: Callable, out_dtype: Callable) -> ops.Custom:
    return ops.Custom(f"{lib}:{func}", out_shape=out_shape, out_dtype=out_dtype, func_type="aot")


def _fwd_shapes(gi, h0, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN202
    return [gi[0], gi[1], h0[1]]  # h (T, M, H)


def _fwd_save_shapes(gi, h0, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN202
    return [gi[0], gi[1], h0[1]], [gi[0], gi[1], 4 * h0[1]]  # h, saved [r | z | n | W_hn h + b_hn]


def _bwd_shapes(dh, h, saved, h0, w_hh):  # noqa: ANN001, ANN202
    g3 = [3 * dh[2]]
    return [dh[0], dh[1], 3 * dh[2]], h0, w_hh, g3, g3  # d gi, d h0, d W_hh, d b_ih, d b_hh


class GRUSequenceKernel(nn.Cell):
    """``(gi_TMG, h0_MH, W_hh, b_ih, b_hh)`` -> ``(h_TMH, saved)``; only ``h_TMH`` may be used by the caller
    (``saved`` holds the activations the backward kernel needs)."""

    def __init__(self, lib: str) -> None:
        super().__init__()
        self.fwd = _custom(lib, "GruSeqForwardSave", _fwd_save_shapes, lambda *dt: (dt[0], dt[0]))
        self.bwd = _custom(lib, "GruSeqBackward", _bwd_shapes, lambda *dt: (dt[0],) * 5)

    def construct(self, gi_TMG, h0_MH, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN201, D102
        return self.fwd(gi_TMG, h0_MH, w_hh, b_ih, b_hh)

    def bprop(self, gi_TMG, h0_MH, w_hh, b_ih, b_hh, out, dout):  # noqa: ANN001, ANN201, D102
        return self.bwd(dout[0], out[0], out[1], h0_MH, w_hh)


class GRUForwardKernel(nn.Cell):
    """Hidden states ``(T, M, H)`` only, for passes that take no gradient (target networks)."""

    def __init__(self, lib: str) -> None:
        super().__init__()
        self.fwd = _custom(lib, "GruSeqForward", _fwd_shapes, lambda *dt: dt[0])

    def construct(self, gi_TMG, h0_MH, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN201, D102
        return self.fwd(gi_TMG, h0_MH, w_hh, b_ih, b_hh)


def _biased(gi_TMG: ms.Tensor, b_ih: ms.Tensor, b_hh: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor, ms.Tensor]:
    """``(gi_rz + b_ih[:2H] + b_hh[:2H], gi_n + b_ih[2H:], b_hh[2H:])``: the reference recurrence's inputs
    (BiasAdd on 2-D views: measured ~7x faster than a broadcast Add on CPU for these sizes)."""
    t, m, g3 = gi_TMG.shape
    hd = g3 // 3
    gi = gi_TMG.reshape(t * m, g3)
    gi_rz = ops.bias_add(gi[:, : 2 * hd], b_ih[: 2 * hd] + b_hh[: 2 * hd]).reshape(t, m, 2 * hd)
    gi_n = ops.bias_add(gi[:, 2 * hd :], b_ih[2 * hd :]).reshape(t, m, hd)
    return gi_rz, gi_n, b_hh[2 * hd :]


class GRUSequenceReference(nn.Cell):
    """The readable reference of :class:`GRUSequenceKernel` (same inputs; returns ``h_TMH`` first)."""

    def __init__(self) -> None:
        super().__init__()
        self.sequence = GRUSequence()

    def construct(self, gi_TMG, h0_MH, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN201, D102
        gi_rz, gi_n, b_n = _biased(gi_TMG, b_ih, b_hh)
        return self.sequence(gi_rz, gi_n, h0_MH, w_hh, b_n)


def gru_forward_reference(
    gi_TMG: ms.Tensor, h0_MH: ms.Tensor, w_hh: ms.Tensor, b_ih: ms.Tensor, b_hh: ms.Tensor
) -> ms.Tensor:
    """Hidden states ``(T, M, H)`` by the reference, for passes that need no gradient."""
    gi_rz, gi_n, b_n = _biased(gi_TMG, b_ih, b_hh)
    return gru_forward(gi_rz, gi_n, h0_MH, w_hh, b_n)


def gru_cells(use_kernels: bool = True) -> tuple[nn.Cell, Callable[..., ms.Tensor]]:
    """``(sequence, forward_only)``: the compiled kernels where available, else the MindSpore reference
    (:class:`GRUSequenceReference` and :func:`gru_forward_reference`).

    ``sequence(...)[0]`` and ``forward_only(...)`` are the hidden states ``(T, M, H)``."""
    lib = library("gru_seq") if use_kernels else None
    if lib is None:
        return GRUSequenceReference(), gru_forward_reference
    return GRUSequenceKernel(lib), GRUForwardKernel(lib)


# ------------------------------------------------ with the GRU's input layer and projection inside
def _proj_steps(z, h0):  # noqa: ANN001, ANN202
    return z[0] // h0[0]  # z holds T*M rows, h0 M


def _fwd_x_shapes(z, b_z, h0, w_ih, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN202
    return [_proj_steps(z, h0), h0[0], h0[1]]  # h (T, M, H)


def _fwd_x_save_shapes(z, b_z, h0, w_ih, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN202
    t = _proj_steps(z, h0)
    return [t, h0[0], h0[1]], [t, h0[0], 4 * h0[1]]  # h, saved


def _bwd_x_shapes(dh, h, saved, h0, w_hh, z, b_z, w_ih):  # noqa: ANN001, ANN202
    g3 = [3 * dh[2]]
    return z, b_z, h0, w_ih, w_hh, g3, g3  # d z, d b_z, d h0, d W_ih, d W_hh, d b_ih, d b_hh


class GRUProjSequenceKernel(nn.Cell):
    """``(z_RI, b_z, h0_MH, W_ih, W_hh, b_ih, b_hh)`` -> ``(h_TMH, saved)``: the GRU over the inputs
    ``x = relu(z + b_z)``, ``z_RI`` the time-major rows ``(T*M, I)`` of the layer before it without its bias.
    Only ``h_TMH`` may be used by the caller."""

    def __init__(self, lib: str) -> None:
        super().__init__()
        self.fwd = _custom(lib, "GruSeqForwardSaveX", _fwd_x_save_shapes, lambda *dt: (dt[0], dt[0]))
        self.bwd = _custom(lib, "GruSeqBackwardX", _bwd_x_shapes, lambda *dt: (dt[0],) * 7)

    def construct(self, z_RI, b_z, h0_MH, w_ih, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN201, D102
        return self.fwd(z_RI, b_z, h0_MH, w_ih, w_hh, b_ih, b_hh)

    def bprop(self, z_RI, b_z, h0_MH, w_ih, w_hh, b_ih, b_hh, out, dout):  # noqa: ANN001, ANN201, D102
        return self.bwd(dout[0], out[0], out[1], h0_MH, w_hh, z_RI, b_z, w_ih)


class GRUProjForwardKernel(nn.Cell):
    """Hidden states ``(T, M, H)`` of :class:`GRUProjSequenceKernel`'s inputs (passes without a gradient)."""

    def __init__(self, lib: str) -> None:
        super().__init__()
        self.fwd = _custom(lib, "GruSeqForwardX", _fwd_x_shapes, lambda *dt: dt[0])

    def construct(self, z_RI, b_z, h0_MH, w_ih, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN201, D102
        return self.fwd(z_RI, b_z, h0_MH, w_ih, w_hh, b_ih, b_hh)


_matmul_t = ops.MatMul(transpose_b=True)


def _projected(z_RI: ms.Tensor, b_z: ms.Tensor, h0_MH: ms.Tensor, w_ih: ms.Tensor) -> ms.Tensor:
    """``gi (T, M, 3H) = relu(z + b_z) W_ih^T`` of all steps, as MindSpore ops."""
    m = h0_MH.shape[0]
    x_RI = ops.relu(ops.bias_add(z_RI, b_z))
    return _matmul_t(x_RI, w_ih).reshape(z_RI.shape[0] // m, m, w_ih.shape[0])


class GRUProjSequenceReference(nn.Cell):
    """The readable reference of :class:`GRUProjSequenceKernel`: the input layer's bias and ReLU and the
    projection as MindSpore ops, then :class:`GRUSequenceReference` (same inputs; returns ``h_TMH`` first)."""

    def __init__(self) -> None:
        super().__init__()
        self.sequence = GRUSequenceReference()

    def construct(self, z_RI, b_z, h0_MH, w_ih, w_hh, b_ih, b_hh):  # noqa: ANN001, ANN201, D102
        return self.sequence(_projected(z_RI, b_z, h0_MH, w_ih), h0_MH, w_hh, b_ih, b_hh)


def gru_proj_forward_reference(
    z_RI: ms.Tensor,
    b_z: ms.Tensor,
    h0_MH: ms.Tensor,
    w_ih: ms.Tensor,
    w_hh: ms.Tensor,
    b_ih: ms.Tensor,
    b_hh: ms.Tensor,
) -> ms.Tensor:
    """Hidden states ``(T, M, H)`` by the reference, for passes that need no gradient."""
    return gru_forward_reference(_projected(z_RI, b_z, h0_MH, w_ih), h0_MH, w_hh, b_ih, b_hh)


def gru_proj_cells(use_kernels: bool = True) -> tuple[nn.Cell, Callable[..., ms.Tensor]]:
    """``(sequence, forward_only)`` taking ``(z_RI, b_z, h0_MH, W_ih, W_hh, b_ih, b_hh)``: the compiled
    kernels where available, else the MindSpore reference (:class:`GRUProjSequenceReference`,
    :func:`gru_proj_forward_reference`). ``sequence(...)[0]`` and ``forward_only(...)`` are ``(T, M, H)``."""
    lib = library("gru_seq") if use_kernels else None
    if lib is None:
        return GRUProjSequenceReference(), gru_proj_forward_reference
    return GRUProjSequenceKernel(lib), GRUProjForwardKernel(lib)
