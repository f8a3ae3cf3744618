"""Agent networks and mixers: unroll == step loop, QMIX monotonicity, VDN sum, registry."""

from __future__ import annotations

import numpy as np
import pytest

from marl.modules import MLPAgent, QMixer, RNNAgent, VDNMixer
from marl.modules.mixers import qmix_reference
from marl.registry import build
from marl.utils.ms import ms, ops, setup

setup(1, seed=0)


def _t(x: np.ndarray) -> ms.Tensor:
    return ms.Tensor(np.asarray(x, np.float32))


@pytest.mark.parametrize("cls", [RNNAgent, MLPAgent])
@pytest.mark.parametrize("i", [7, 12])  # fewer / more inputs than hidden units (the RNN's two layouts)
def test_unroll_matches_step_by_step(cls: type, i: int) -> None:
    b, t, n, h, a = 2, 5, 3, 8, 4
    agent = cls(i, h, a)
    x = np.random.default_rng(1).normal(size=(b, t, n, i)).astype(np.float32)
    q_unrolled = agent.unroll(_t(x)).asnumpy()
    hid = _t(np.zeros((b * n, h)))
    for step in range(t):
        q, hid = agent(_t(x[:, step].reshape(b * n, i)), hid)
        np.testing.assert_allclose(q_unrolled[:, step], q.asnumpy().reshape(b, n, a), atol=1e-5)
    assert q_unrolled.shape == (b, t, n, a)


def test_rnn_agent_uses_memory() -> None:
    agent = RNNAgent(4, 8, 3)
    x = np.zeros((1, 3, 2, 4), np.float32)
    x2 = x.copy()
    x2[:, 0] = 5.0  # a different first input must change later Q-values through the hidden state
    q1, q2 = agent.unroll(_t(x)).asnumpy(), agent.unroll(_t(x2)).asnumpy()
    assert np.abs(q1[:, 2] - q2[:, 2]).max() > 1e-4


@pytest.mark.parametrize("layers", [1, 2])
def test_qmix_monotonic_in_every_agent_q(layers: int) -> None:
    b, t, n, s = 3, 4, 5, 6
    mixer = QMixer(n, s, embed_dim=8, hypernet_layers=layers, hypernet_dim=16)
    rng = np.random.default_rng(layers)
    for _ in range(3):
        q = _t(rng.normal(scale=3.0, size=(b, t, n)))
        state = _t(rng.normal(scale=2.0, size=(b, t, s)))

        def total(q_in: ms.Tensor, st: ms.Tensor) -> ms.Tensor:
            return mixer(q_in, st).sum()

        grad = ms.grad(total, grad_position=0)(q, state).asnumpy()
        assert grad.shape == (b, t, n)
        assert (grad >= 0).all(), grad.min()
        assert (grad > 0).any()
    assert mixer(q, state).shape == (b, t, 1)


@pytest.mark.parametrize("layers", [1, 2])
def test_fast_qmix_equals_the_bmm_reference_values_and_gradients(layers: int) -> None:
    b, t, n, s = 4, 6, 5, 7
    mixer = QMixer(n, s, embed_dim=8, hypernet_layers=layers, hypernet_dim=16)
    rng = np.random.default_rng(10 + layers)
    q, state = _t(rng.normal(size=(b, t, n))), _t(rng.normal(size=(b, t, s)))
    np.testing.assert_allclose(
        mixer(q, state).asnumpy(), qmix_reference(mixer, q, state).asnumpy(), atol=1e-5
    )
    params = mixer.trainable_params()
    fast = ms.grad(lambda x, y: mixer(x, y).sum(), grad_position=0, weights=params)(q, state)
    slow = ms.grad(lambda x, y: qmix_reference(mixer, x, y).sum(), grad_position=0, weights=params)(q, state)
    np.testing.assert_allclose(fast[0].asnumpy(), slow[0].asnumpy(), atol=1e-5)  # d/dq
    for g_fast, g_slow in zip(fast[1], slow[1], strict=True):  # d/dweights
        np.testing.assert_allclose(g_fast.asnumpy(), g_slow.asnumpy(), atol=1e-4)


def test_qmix_depends_on_state_and_rejects_bad_sizes() -> None:
    mixer = QMixer(2, 3, embed_dim=4, hypernet_layers=2, hypernet_dim=8)
    q = _t(np.ones((1, 1, 2)))
    y1 = mixer(q, _t(np.zeros((1, 1, 3)))).asnumpy()
    y2 = mixer(q, _t(np.ones((1, 1, 3)))).asnumpy()
    assert not np.allclose(y1, y2)
    with pytest.raises(ValueError, match="hypernet_layers"):
        QMixer(2, 3, 4, hypernet_layers=3, hypernet_dim=8)
    with pytest.raises(ValueError, match="state_dim"):
        QMixer(2, 0, 4, 2, 8)


def test_vdn_is_sum() -> None:
    q = np.random.default_rng(2).normal(size=(2, 3, 4)).astype(np.float32)
    out = VDNMixer(4, 5)(_t(q), _t(np.zeros((2, 3, 5)))).asnumpy()
    np.testing.assert_allclose(out, q.sum(axis=2, keepdims=True), atol=1e-6)


def test_registry_builds_modules() -> None:
    assert isinstance(build("agent", "rnn", input_dim=3, hidden_dim=4, n_actions=2), RNNAgent)
    assert isinstance(build("agent", "mlp", input_dim=3, hidden_dim=4, n_actions=2), MLPAgent)
    assert isinstance(
        build("mixer", "qmix", n_agents=2, state_dim=3, embed_dim=4, hypernet_layers=1, hypernet_dim=5),
        QMixer,
    )
    assert isinstance(build("mixer", "vdn", n_agents=2, state_dim=3), VDNMixer)
    with pytest.raises(ValueError, match="hidden_dim"):
        RNNAgent(3, 0, 2)


@pytest.mark.parametrize("agent_id", [True, False])
def test_central_value_net_is_the_value_net_on_state_and_id_rows(agent_id: bool) -> None:
    """MAPPO's critic from the state alone gives ValueNet's values on the rows [state; one-hot id] that it
    no longer builds, with the same parameters, and the same gradients."""
    from marl.modules.policies import CentralValueNet, ValueNet

    b, t, n, s, h = 3, 4, 5, 7, 16
    central = CentralValueNet(s, n, agent_id, h)
    plain = ValueNet(s + (n if agent_id else 0), h)
    for p, q in zip(plain.trainable_params(), central.trainable_params(), strict=True):
        assert p.shape == q.shape and p.name == q.name  # checkpoints load either way
        p.set_data(q.data.copy())
    state = np.random.default_rng(2).normal(size=(b, t, s)).astype(np.float32)
    rows = [np.broadcast_to(state[:, :, None], (b, t, n, s))]
    if agent_id:
        rows.append(np.broadcast_to(np.eye(n, dtype=np.float32), (b, t, n, n)))
    rows_BTNC = np.ascontiguousarray(np.concatenate(rows, axis=3))
    np.testing.assert_allclose(
        central(_t(state)).asnumpy(), plain(_t(rows_BTNC)).asnumpy(), rtol=1e-5, atol=1e-6
    )
    grad_c = ms.grad(lambda x: central(x).sum(), None, central.trainable_params())(_t(state))
    grad_p = ms.grad(lambda x: plain(x).sum(), None, plain.trainable_params())(_t(rows_BTNC))
    for gc, gp in zip(grad_c, grad_p, strict=True):
        np.testing.assert_allclose(gc.asnumpy(), gp.asnumpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("use_jit", [False, True])
def test_abs_cell_equals_autodiff_of_abs_values_and_gradient(use_jit: bool) -> None:
    """The mixer's |x| (``Abs``: the AbsGrad kernel as its gradient) against autodiff of ``ops.abs`` and of
    ``relu(x) + relu(-x)`` (its earlier form), zeros included (gradient 0 there)."""
    from marl.modules.mixers import Abs

    x = _t(np.array([[-2.0, -0.5, 0.0, 0.25, 3.0], [0.0, 1.0, -1.0, 7.0, -0.0]]))
    w = _t(np.arange(10, dtype=np.float32).reshape(2, 5) - 4.0)
    cell = Abs()

    def fast(v):  # noqa: ANN001, ANN202
        return (cell(v) * w).sum()

    def relu_form(v):  # noqa: ANN001, ANN202
        return ((ops.relu(v) + ops.relu(-v)) * w).sum()

    grad_fast = ms.grad(fast)
    if use_jit:
        grad_fast = ms.jit(grad_fast)
    np.testing.assert_array_equal(cell(x).asnumpy(), np.abs(x.asnumpy()))
    g = grad_fast(x).asnumpy()
    np.testing.assert_array_equal(g, ms.grad(relu_form)(x).asnumpy())
    np.testing.assert_array_equal(g, np.sign(x.asnumpy()) * w.asnumpy())
