"""QPLEX (Wang et al. 2021) through the mixer interface: shape, positivity, the IGM property over every
joint action, the bootstrap's advantage term, and a few training steps on the Q-learner."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from learner_batches import INFO, cfg, make_batch  # tests/ is on sys.path under pytest

from marl.learners import QLearner
from marl.learners.targets import make_bootstrap, mix, mixer_uses_actions
from marl.modules.qplex import QPLEXMixer
from marl.registry import build, get
from marl.utils.ms import Tensor, setup

setup(1, seed=0)

N, A, S = 3, 4, 5


def _mixer(seed: int = 0) -> QPLEXMixer:
    setup(1, seed=seed)
    return build("mixer", "qplex", n_agents=N, state_dim=S, n_actions=A, embed_dim=8, hypernet_dim=16)


def _q_tot(mixer: QPLEXMixer, q_MNA: np.ndarray, state_MS: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Q_tot ``(M,)`` of the joint action ``joint`` (N,) in every row, given the agents' Q tables."""
    m = q_MNA.shape[0]
    chosen = q_MNA[:, np.arange(N), joint]  # (M, N)
    onehot = np.broadcast_to(np.eye(A, dtype=np.float32)[joint], (m, N, A))
    args = (chosen, state_MS, onehot, q_MNA.max(axis=2))
    out = mixer(*(Tensor(np.ascontiguousarray(x[:, None], np.float32)) for x in args))
    return out.asnumpy().reshape(m)


def test_registered_and_declares_actions() -> None:
    assert get("mixer", "qplex") is QPLEXMixer
    assert mixer_uses_actions(QPLEXMixer) and not mixer_uses_actions(get("mixer", "qmix"))
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        build("mixer", "qplex", n_agents=N, state_dim=S, n_actions=A, n_heads=0)


def test_output_shape_and_positive_importance() -> None:
    mixer, rng = _mixer(), np.random.default_rng(0)
    b, t = 2, 7
    q = rng.normal(size=(b, t, N)).astype(np.float32)
    state = rng.normal(size=(b, t, S)).astype(np.float32)
    acts = np.eye(A, dtype=np.float32)[rng.integers(0, A, size=(b, t, N))]
    out = mix(mixer, True, Tensor(q), Tensor(state), Tensor(acts), Tensor(q + 1.0))
    assert out.shape == (b, t, 1)
    lam = mixer.importance(Tensor(state.reshape(-1, S)), Tensor(acts.reshape(-1, N, A))).asnumpy()
    assert lam.shape == (b * t, N) and (lam > 0).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_igm_greedy_joint_action_maximises_q_tot(seed: int) -> None:
    """Over all A^N joint actions, Q_tot is largest at the agents' own greedy actions, where it equals
    sum_i V'_i; every other joint action is strictly lower (random Q tables have unique maxima)."""
    mixer, rng = _mixer(seed), np.random.default_rng(seed)
    m = 16
    q_MNA = rng.normal(scale=3.0, size=(m, N, A)).astype(np.float32)
    state = rng.normal(size=(m, S)).astype(np.float32)
    joints = np.array(list(itertools.product(range(A), repeat=N)))
    q_tot = np.stack([_q_tot(mixer, q_MNA, state, j) for j in joints], axis=1)  # (M, A^N)
    greedy = q_MNA.argmax(axis=2)  # (M, N)
    best = joints[q_tot.argmax(axis=1)]
    np.testing.assert_array_equal(best, greedy)
    s = Tensor(state)
    value = (np.abs(mixer.hyper_w(s).asnumpy()) + 1e-10) * q_MNA.max(axis=2) + mixer.hyper_b(s).asnumpy()
    np.testing.assert_allclose(q_tot.max(axis=1), value.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_bootstrap_uses_the_greedy_action_and_max_q() -> None:
    """Without double Q the target mixer sees each agent's greedy action: its advantage term is 0, so
    the bootstrap equals the mixer's value sum_i (w_i V_i + b_i); with double Q and another online argmax
    the advantage is negative, so the bootstrap is lower."""
    mixer, rng = _mixer(3), np.random.default_rng(3)
    b, t = 2, 4
    target_q = rng.normal(size=(b, t, N, A)).astype(np.float32)
    avail = np.ones((b, t, N, A), np.int32)
    state = rng.normal(size=(b, t, S)).astype(np.float32)
    online_q = -target_q  # online argmax = target argmin: a different action for every agent
    args = [Tensor(x) for x in (online_q, target_q, avail, state)]
    plain = make_bootstrap(mixer, double_q=False)(*args).asnumpy()
    double = make_bootstrap(mixer, double_q=True)(*args).asnumpy()
    s = Tensor(state.reshape(-1, S))
    w = np.abs(mixer.hyper_w(s).asnumpy()) + 1e-10
    value = (w * target_q.max(axis=3).reshape(-1, N) + mixer.hyper_b(s).asnumpy()).sum(axis=1)
    np.testing.assert_allclose(plain.reshape(-1), value, rtol=1e-5, atol=1e-5)
    assert (double < plain).all()


@pytest.mark.parametrize("bptt_chunk", [-1, 2])
def test_qplex_q_learner_trains(bptt_chunk: int) -> None:
    """A few Q-learner steps with the QPLEX mixer (whole-episode and chunked): finite stats, the mixer's
    weights move, and the loss on a fixed batch falls (target nets held fixed)."""
    learner = QLearner(INFO, cfg(mixer="qplex", lr=1e-2, target_update_interval=1000, bptt_chunk=bptt_chunk))
    before = {p.name: p.asnumpy().copy() for p in learner.nets.mixer.trainable_params()}
    batch = make_batch(21, b=4)
    losses = [learner.train(batch, 0, 0)["loss"] for _ in range(10)]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0], losses
    moved = [not np.allclose(p.asnumpy(), before[p.name]) for p in learner.nets.mixer.trainable_params()]
    assert all(moved)
