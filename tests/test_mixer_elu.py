"""The QMIX mixer's ELU (gradient from its output) against autodiff of ``ops.elu``."""

from __future__ import annotations

import numpy as np
import pytest

from marl.modules.mixers import Elu
from marl.utils.ms import ms, ops, setup

setup(1, seed=0)


@pytest.mark.parametrize("use_jit", [False, True])
def test_elu_cell_equals_autodiff_of_elu(use_jit: bool) -> None:
    """Values and gradient equal ``ops.elu``'s on negative, zero and positive inputs, within float32 rounding
    of ``exp`` (the gradient there is ``elu(x) + 1`` instead of ``exp(x)``)."""
    x_np = np.concatenate([np.linspace(-6.0, 4.0, 41), [0.0, -0.0, 1e-7, -1e-7]]).astype(np.float32)
    x = ms.Tensor(x_np.reshape(5, 9))
    w = ms.Tensor(np.random.default_rng(0).normal(size=(5, 9)).astype(np.float32))
    cell = Elu()

    def fast(v):  # noqa: ANN001, ANN202
        return (cell(v) * w).sum()

    def autodiff(v):  # noqa: ANN001, ANN202
        return (ops.elu(v) * w).sum()

    grad_fast = ms.jit(ms.grad(fast)) if use_jit else ms.grad(fast)
    np.testing.assert_array_equal(cell(x).asnumpy(), ops.elu(x).asnumpy())
    g, want = grad_fast(x).asnumpy(), ms.grad(autodiff)(x).asnumpy()
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
    x64 = x_np.reshape(5, 9).astype(np.float64)
    exact = np.where(x64 > 0, 1.0, np.exp(x64)) * w.asnumpy()
    np.testing.assert_allclose(g, exact, rtol=1e-6, atol=1e-7)
