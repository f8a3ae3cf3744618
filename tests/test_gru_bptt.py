"""The agent's GRU sequence (compiled kernels; the readable BPTT of marl.modules.gru_bptt) vs autodiff."""

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


def _float64_unroll(agent: RNNAgent, x_BTNI: ms.Tensor, h_MH: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
    """The same network with ``nn.GRUCell``'s equations (gate order r, z, n), for float64 inputs."""
    b, t, n, i = x_BTNI.shape
    p = {q.name: ops.cast(q, ms.float64) for q in agent.trainable_params()}
    hd = h_MH.shape[1]
    qs = []
    for step in range(t):
        e = ops.relu(ops.matmul(x_BTNI[:, step].reshape(b * n, i), p["fc1.weight"].T) + p["fc1.bias"])
        gi = ops.matmul(e, p["rnn.weight_ih"].T) + p["rnn.bias_ih"]
        gh = ops.matmul(h_MH, p["rnn.weight_hh"].T) + p["rnn.bias_hh"]
        r = ops.sigmoid(gi[:, :hd] + gh[:, :hd])
        z = ops.sigmoid(gi[:, hd : 2 * hd] + gh[:, hd : 2 * hd])
        n_ = ops.tanh(gi[:, 2 * hd :] + r * gh[:, 2 * hd :])
        h_MH = (1 - z) * n_ + z * h_MH
        qs.append((ops.matmul(h_MH, p["fc2.weight"].T) + p["fc2.bias"]).reshape(b, n, -1))
    return ops.stack(qs, 1), h_MH


def _problem(use_kernels: bool, i: int = 5) -> tuple[RNNAgent, list[np.ndarray]]:
    """A small agent with large weights (saturating gates) and the inputs and loss weights of the test
    (``i`` > 6: more inputs than hidden units, the layout where the agent transposes fc1's output)."""
    b, t, n, hd, a = 3, 7, 2, 6, 4
    rng = np.random.default_rng(3)
    agent = RNNAgent(i, hd, a, use_kernels=use_kernels)
    for p in agent.trainable_params():
        p.set_data(ms.Tensor(rng.normal(scale=0.8, size=p.shape).astype(np.float32)))
    shapes = [(b, t, n, i), (b * n, hd), (b, t, n, a), (b * n, hd)]
    return agent, [rng.normal(size=s).astype(np.float32) for s in shapes]


def _grads(agent: RNNAgent, arrays: list[np.ndarray], unroll, dtype, use_jit: bool) -> tuple[float, list]:  # noqa: ANN001
    """Loss ``sum(q * w_q) + sum(h_T * w_h)`` and its gradients w.r.t. every parameter and ``h0``."""
    x, h0, w_q, w_h = (ms.Tensor(a.astype(dtype)) for a in arrays)

    def loss(h0_MH: ms.Tensor) -> ms.Tensor:
        q, h = unroll(agent, x, h0_MH)
        return (q * w_q).sum() + (h * w_h).sum()

    grad_fn = ms.value_and_grad(loss, 0, agent.trainable_params())
    value, (g_h0, grads) = (jit(grad_fn) if use_jit else grad_fn)(h0)
    return float(value.asnumpy()), [g.asnumpy().astype(np.float64) for g in (*grads, g_h0)]


# Measured here against the float64 truth (max abs error / max |grad|): the compiled kernels 7e-7; any
# float32 path through MindSpore's own sigmoid/tanh (nn.GRUCell autodiff, marl.modules.gru_bptt) 2.1e-4.
TOLERANCE = {True: 1e-5, False: 5e-4}


@pytest.mark.parametrize("use_jit", [True, False])
@pytest.mark.parametrize("use_kernels", [True, False])
@pytest.mark.parametrize("n_inputs", [5, 9])
def test_gradients_equal_float64_autodiff(use_kernels: bool, use_jit: bool, n_inputs: int) -> None:
    """Loss, every parameter gradient and the gradient of the initial hidden state agree with float64
    autodiff of the same network, with the final hidden state also in the loss."""
    agent, arrays = _problem(use_kernels, n_inputs)
    l_new, g_new = _grads(agent, arrays, RNNAgent.unroll_from, np.float32, use_jit)
    l_64, g_64 = _grads(agent, arrays, _float64_unroll, np.float64, use_jit=False)
    assert l_new == pytest.approx(l_64, rel=1e-5)
    names = [p.name for p in agent.trainable_params()] + ["h0"]
    for name, gn, gt in zip(names, g_new, g_64, strict=True):
        assert np.abs(gt).max() > 1e-3, name  # the check is not vacuous
        np.testing.assert_allclose(
            gn, gt, rtol=0, atol=TOLERANCE[use_kernels] * np.abs(gt).max(), err_msg=name
        )


def test_float64_truth_is_grucell_and_the_reference_matches_its_autodiff() -> None:
    """The float64 network is nn.GRUCell's (same outputs in float32), and the readable BPTT reference
    (marl.modules.gru_bptt) equals MindSpore's autodiff of the step-by-step nn.GRUCell loop."""
    agent, arrays = _problem(use_kernels=False)
    q_cell, _ = _reference_unroll(agent, ms.Tensor(arrays[0]), ms.Tensor(arrays[1]))
    q_64, _ = _float64_unroll(
        agent, ms.Tensor(arrays[0].astype(np.float64)), ms.Tensor(arrays[1].astype(np.float64))
    )
    np.testing.assert_allclose(
        q_cell.asnumpy(), q_64.asnumpy(), rtol=0, atol=1e-4 * np.abs(q_64.asnumpy()).max()
    )
    l_ref, g_ref = _grads(agent, arrays, RNNAgent.unroll_from, np.float32, use_jit=True)
    l_cell, g_cell = _grads(agent, arrays, _reference_unroll, np.float32, use_jit=True)
    assert l_ref == pytest.approx(l_cell, rel=1e-5)
    for gn, gr in zip(g_ref, g_cell, strict=True):
        np.testing.assert_allclose(gn, gr, rtol=1e-4, atol=1e-4 * np.abs(gr).max())


def test_no_grad_forward_equals_the_training_forward() -> None:
    agent = RNNAgent(5, 6, 4)
    x = ms.Tensor(np.random.default_rng(4).normal(size=(2, 9, 3, 5)).astype(np.float32))
    with_grad, without = agent.unroll(x).asnumpy(), agent.unroll(x, need_grad=False).asnumpy()
    np.testing.assert_array_equal(with_grad, without)
    assert isinstance(agent.rnn, nn.GRUCell)
