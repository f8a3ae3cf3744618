"""The GRU kernels with the input layer's bias and ReLU and the input projection inside (``GruSeq*X`` in
marl/kernels/gru_seq.cc) against float64 NumPy and the MindSpore reference, on several sizes and thread
counts."""

from __future__ import annotations

import numpy as np
import pytest

from marl import kernels
from marl.modules.gru_kernel import (
    GRUProjForwardKernel,
    GRUProjSequenceKernel,
    GRUProjSequenceReference,
    gru_proj_cells,
    gru_proj_forward_reference,
)
from marl.utils.ms import jit, ms, setup

setup(1, seed=0)


def _inputs(t: int, m: int, i: int, hd: int, seed: int) -> list[ms.Tensor]:
    """z (T*M, I), b_z, h0, W_ih, W_hh, b_ih, b_hh at nn.GRUCell's init scale (about half of relu(z + b_z)
    is zero)."""
    rng = np.random.default_rng(seed)

    def f(*shape: int, s: float = 1.0) -> ms.Tensor:
        return ms.Tensor(rng.normal(scale=s, size=shape).astype(np.float32))

    k = 1.0 / np.sqrt(hd)
    weights = [f(3 * hd, i, s=k), f(3 * hd, hd, s=k), f(3 * hd, s=0.1), f(3 * hd, s=0.1)]
    return [f(t * m, i), f(i, s=0.1), f(m, hd, s=0.5), *weights]


def _float64_truth(args: list[ms.Tensor], w_out: np.ndarray) -> list[np.ndarray]:
    """h and the gradients of ``sum(h * w_out)`` w.r.t. every input, by float64 NumPy BPTT."""
    z, b_z, h0, w_ih, w_hh, b_ih, b_hh = (a.asnumpy().astype(np.float64) for a in args)
    x = np.maximum(z + b_z, 0.0)
    m, hd = h0.shape
    t_len = x.shape[0] // m
    gi = (x @ w_ih.T).reshape(t_len, m, 3 * hd) + b_ih
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    hs, saved, h = [], [], h0
    for t in range(t_len):
        g = h @ w_hh.T + b_hh
        r, z = sig(gi[t, :, :hd] + g[:, :hd]), sig(gi[t, :, hd : 2 * hd] + g[:, hd : 2 * hd])
        hn = g[:, 2 * hd :]
        n = np.tanh(gi[t, :, 2 * hd :] + r * hn)
        saved.append((h, r, z, n, hn))
        h = n + z * (h - n)
        hs.append(h)
    d_gi, d_w_hh, d_b_hh = np.zeros_like(gi), np.zeros_like(w_hh), np.zeros_like(b_hh)
    carry = np.zeros_like(h0)
    for t in range(t_len - 1, -1, -1):
        hp, r, z, n, hn = saved[t]
        dh = w_out[t] + carry
        d_npre = dh * (1 - z) * (1 - n * n)
        dg = np.concatenate([d_npre * hn * r * (1 - r), dh * (hp - n) * z * (1 - z), d_npre * r], 1)
        d_gi[t] = np.concatenate([dg[:, : 2 * hd], d_npre], 1)
        carry = dh * z + dg @ w_hh
        d_w_hh += dg.T @ hp
        d_b_hh += dg.sum(0)
    d_gi_rows = d_gi.reshape(t_len * m, 3 * hd)
    d_z = (d_gi_rows @ w_ih) * (x > 0)
    return [np.stack(hs), d_z, d_z.sum(0), carry, d_gi_rows.T @ x, d_w_hh, d_gi_rows.sum(0), d_b_hh]


def _results(seq, args: list[ms.Tensor], w_out: ms.Tensor, use_jit: bool) -> list[np.ndarray]:  # noqa: ANN001
    def loss(*a: ms.Tensor) -> ms.Tensor:
        return (seq(*a)[0] * w_out).sum()

    grad_fn = ms.value_and_grad(loss, grad_position=(0, 1, 2, 3, 4, 5, 6))
    _, grads = (jit(grad_fn) if use_jit else grad_fn)(*args)
    return [seq(*args)[0].asnumpy(), *(g.asnumpy() for g in grads)]


# (T, M, I, H): the 3m learner's GRU, and sizes on the kernels' unblocked paths (widths not multiples of 16)
@pytest.mark.parametrize(("t", "m", "i", "hd"), [(61, 96, 64, 64), (9, 7, 5, 6), (5, 13, 24, 24)])
@pytest.mark.parametrize("use_jit", [True, False])
def test_proj_kernel_equals_float64_and_reference(t: int, m: int, i: int, hd: int, use_jit: bool) -> None:
    """Hidden states and the gradient of every input (z, b_z, h0, W_ih, W_hh, b_ih, b_hh): the kernels agree
    with float64 NumPy to 1e-5 of each array's largest value and with the MindSpore reference to 1e-4."""
    lib = kernels.library("gru_seq")
    args = _inputs(t, m, i, hd, seed=t + m)
    w_out = ms.Tensor(np.random.default_rng(1).normal(size=(t, m, hd)).astype(np.float32))
    new = _results(GRUProjSequenceKernel(lib), args, w_out, use_jit)
    ref = _results(GRUProjSequenceReference(), args, w_out, use_jit)
    truth = _float64_truth(args, w_out.asnumpy().astype(np.float64))
    names = ["h", "z", "b_z", "h0", "w_ih", "w_hh", "b_ih", "b_hh"]
    for name, a, b, exact in zip(names, new, ref, truth, strict=True):
        scale = np.abs(exact).max()
        assert a.shape == exact.shape and scale > 1e-3, name  # not vacuous
        np.testing.assert_allclose(a, exact, rtol=1e-5, atol=1e-5 * scale, err_msg=f"{name} vs float64")
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4 * scale, err_msg=f"{name} vs reference")
    np.testing.assert_array_equal(GRUProjForwardKernel(lib)(*args).asnumpy(), new[0])
    np.testing.assert_allclose(gru_proj_forward_reference(*args).asnumpy(), ref[0], atol=1e-6)


def test_proj_kernel_threads_give_bitwise_identical_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of the recurrence and of d W_ih / d W_hh / d b_z split across kernel threads: every output
    bitwise the same as on one thread, also when the rows do not divide evenly."""
    lib = kernels.library("gru_seq")
    args = _inputs(20, 50, 40, 32, seed=5)
    w_out = ms.Tensor(np.random.default_rng(6).normal(size=(20, 50, 32)).astype(np.float32))
    outs = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("MARL_KERNEL_THREADS", threads)
        outs[threads] = _results(GRUProjSequenceKernel(lib), args, w_out, use_jit=True)
    for threads in ("2", "3"):
        for one, many in zip(outs["1"], outs[threads], strict=True):
            np.testing.assert_array_equal(one, many)


def test_proj_cells_fall_back_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """MARL_KERNELS=0: the agent's cells are the MindSpore reference."""
    monkeypatch.setenv("MARL_KERNELS", "0")
    kernels.library.cache_clear()
    try:
        seq, fwd = gru_proj_cells()
        assert isinstance(seq, GRUProjSequenceReference) and fwd is gru_proj_forward_reference
    finally:
        kernels.library.cache_clear()
