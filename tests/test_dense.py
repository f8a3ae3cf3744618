"""marl.modules.dense: the forward and gradients of nn.Dense, with the column-sum bias gradient."""

from __future__ import annotations

import numpy as np
import pytest

from marl.modules.dense import Dense
from marl.utils.ms import jit, ms, nn, setup

setup(1, seed=0)


def _value_and_grads(cell: nn.Cell, x: ms.Tensor, w: ms.Tensor) -> list[np.ndarray]:
    def loss(x_: ms.Tensor) -> ms.Tensor:
        return (cell(x_) * w).sum()

    value, (g_x, g_params) = jit(ms.value_and_grad(loss, 0, cell.trainable_params()))(x)
    return [value.asnumpy(), g_x.asnumpy(), *(g.asnumpy() for g in g_params)]


@pytest.mark.parametrize("shape", [(37, 11), (4, 9, 11)])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_dense_equals_nn_dense_forward_and_gradients(shape: tuple[int, ...], activation: str | None) -> None:
    rng = np.random.default_rng(0)
    ours, theirs = Dense(11, 7, activation=activation), nn.Dense(11, 7, activation=activation)
    for p, q in zip(ours.trainable_params(), theirs.trainable_params(), strict=True):
        q.set_data(p.data.copy())
        assert p.name == q.name  # checkpoints stay compatible
    x = ms.Tensor(rng.normal(size=shape).astype(np.float32))
    w = ms.Tensor(rng.normal(size=(*shape[:-1], 7)).astype(np.float32))
    results = [_value_and_grads(cell, x, w) for cell in (ours, theirs)]
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    assert np.abs(results[0][-1]).max() > 1e-2  # the bias gradient is not vacuous
