"""The hand-written GRU BPTT (marl.modules.gru_bptt) against MindSpore autodiff of ``nn.GRUCell``."""

from __future__ import annotations

import numpy as np
import pytest

from marl.modules import RNNAgent
from marl.utils.ms import jit, ms, nn, ops, setup

setup(1, seed=0)


def _reference_unroll(agent: RNNAgent, x_BTNI: ms.Tensor, h0_MH: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
    """pymarl's loop: fc1 -> relu -> nn.GRUCell -> fc2, one step at a time (autodiff through it all)."""
    b, t, n, i = x_BTNI.shape
    h, qs = h0_MH, []
    for step in range(t):
        h = agent.rnn(agent.relu(agent.fc1(x_BTNI[:, step].reshape(b * n, i))), h)
        qs.append(agent.fc2(h).reshape(b, n, -1))
    return ops.stack(qs, 1), h


@pytest.mark.parametrize("use_jit", [True, False])
def test_gradients_equal_autodiff_of_grucell(use_jit: bool) -> None:
    """Loss, every parameter gradient and the gradient of the initial hidden state agree with autodiff of
    the step-by-step nn.GRUCell loop, with the final hidden state also in the loss."""
    b, t, n, i, hd, a = 3, 7, 2, 5, 6, 4
    rng = np.random.default_rng(3)
    agent = RNNAgent(i, hd, a)
    for p in agent.trainable_params():  # larger weights than the default init: saturating gates too
        p.set_data(ms.Tensor(rng.normal(scale=0.8, size=p.shape).astype(np.float32)))
    x = ms.Tensor(rng.normal(size=(b, t, n, i)).astype(np.float32))
    h0 = ms.Tensor(rng.normal(size=(b * n, hd)).astype(np.float32))
    w_q = ms.Tensor(rng.normal(size=(b, t, n, a)).astype(np.float32))
    w_h = ms.Tensor(rng.normal(size=(b * n, hd)).astype(np.float32))
    params = agent.trainable_params()

    def loss_new(h0_MH):
        q, h = agent.unroll_from(x, h0_MH)
        return (q * w_q).sum() + (h * w_h).sum()

    def loss_ref(h0_MH):
        q, h = _reference_unroll(agent, x, h0_MH)
        return (q * w_q).sum() + (h * w_h).sum()

    results = []
    for fn in (loss_new, loss_ref):
        grad_fn = ms.value_and_grad(fn, 0, params)
        loss, (g_h0, grads) = (jit(grad_fn) if use_jit else grad_fn)(h0)
        results.append((float(loss.asnumpy()), [g.asnumpy() for g in (*grads, g_h0)]))
    (l_new, g_new), (l_ref, g_ref) = results
    assert l_new == pytest.approx(l_ref, rel=1e-5)
    names = [p.name for p in params] + ["h0"]
    for name, gn, gr in zip(names, g_new, g_ref, strict=True):
        assert np.abs(gr).max() > 1e-3, name  # the check is not vacuous
        np.testing.assert_allclose(gn, gr, rtol=1e-4, atol=1e-4 * np.abs(gr).max(), err_msg=name)


def test_no_grad_forward_equals_the_training_forward() -> None:
    agent = RNNAgent(5, 6, 4)
    x = ms.Tensor(np.random.default_rng(4).normal(size=(2, 9, 3, 5)).astype(np.float32))
    with_grad, without = agent.unroll(x).asnumpy(), agent.unroll(x, need_grad=False).asnumpy()
    np.testing.assert_array_equal(with_grad, without)
    assert isinstance(agent.rnn, nn.GRUCell)
