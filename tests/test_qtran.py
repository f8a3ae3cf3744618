"""QTRAN-base (Son et al. 2019): the joint network and the agents' hidden states against plain NumPy and
step-by-step recomputations, the three losses against the readable reference on a tiny batch, the update,
configs, bad settings and a short run on the fake env."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from learner_batches import INFO, make_batch  # tests/ is on sys.path under pytest

from marl.config import load_config
from marl.config.schema import AgentConfig, Config, QTRANConfig
from marl.learners.qtran_learner import QTRANLearner, qtran_losses_reference
from marl.learners.targets import td_lambda_targets_reference
from marl.modules.qtran import QTranJoint
from marl.trainer import Trainer
from marl.utils.ms import Tensor, ms, nn, ops, setup

setup(1, seed=0)


def _cfg(**learner: object) -> Config:
    base = {"name": "qtran", "use_jit": False, "qtran_embed_dim": 16}
    base.update(learner)
    return Config(learner=QTRANConfig(**base), agent=AgentConfig(hidden_dim=8))


def _mlp(seq: nn.Cell, x: np.ndarray) -> np.ndarray:
    """A Dense-ReLU-...-Dense stack in NumPy from its parameters."""
    dense = [c for c in seq.cells() if isinstance(c, nn.Dense)]
    for k, d in enumerate(dense):
        x = x @ d.weight.asnumpy().T + d.bias.asnumpy()
        if k < len(dense) - 1:
            x = np.maximum(x, 0.0)
    return x


def _joint_np(net: QTranJoint, s_BTS: np.ndarray, h_BTNH: np.ndarray, a_BTN: np.ndarray) -> tuple:
    """``Q_jt`` and ``V_jt`` in NumPy: encode ``[h_i, onehot(u_i)]`` per agent, sum, MLP of ``[s, sum]``."""
    onehot = np.eye(net.n_actions, dtype=np.float32)[a_BTN]
    enc = _mlp(net.action_encoding, np.concatenate([h_BTNH, onehot], axis=3)).sum(axis=2)
    return _mlp(net.Q, np.concatenate([s_BTS, enc], axis=2)), _mlp(net.V, s_BTS)


def _stepwise(agent: nn.Cell, inputs_BTNI: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q-values and hidden states one slot at a time through the agent's ``construct``."""
    b, t, n, i = inputs_BTNI.shape
    h = Tensor(np.zeros((b * n, agent.hidden_dim), np.float32))
    qs, hs = [], []
    for j in range(t):
        q, h = agent(Tensor(inputs_BTNI[:, j].reshape(b * n, i)), h)
        qs.append(q.asnumpy().reshape(b, n, -1))
        hs.append(h.asnumpy().reshape(b, n, -1))
    return np.stack(qs, 1), np.stack(hs, 1)


def test_joint_network_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    net = QTranJoint(n_agents=3, n_actions=4, state_dim=5, hidden_dim=6, embed_dim=7)
    s, h = rng.normal(size=(2, 3, 5)).astype(np.float32), rng.normal(size=(2, 3, 3, 6)).astype(np.float32)
    a = rng.integers(0, 4, size=(2, 3, 3))
    q, v = net(Tensor(s), Tensor(h), ops.one_hot(Tensor(a), 4, 1.0, 0.0))
    q_np, v_np = _joint_np(net, s, h, a)
    np.testing.assert_allclose(q.asnumpy(), q_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v.asnumpy(), v_np, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="embed_dim must be a positive int"):
        QTranJoint(3, 4, 5, 6, embed_dim=0)


@pytest.mark.parametrize(("double_q", "lam"), [(True, 0.0), (False, 0.6)])
def test_losses_equal_the_numpy_reference(double_q: bool, lam: float) -> None:
    gamma, c_opt, c_nopt = 0.99, 0.7, 0.3
    cfg = _cfg(double_q=double_q, td_lambda=lam, gamma=gamma, opt_loss=c_opt, nopt_min_loss=c_nopt)
    ms.set_seed(3)  # the initial weights, whatever ran before in this process (the branches checked below)
    learner = QTRANLearner(INFO, cfg)
    nets = learner.nets
    for p in nets.target_agent.trainable_params() + nets.target_mixer.trainable_params():
        p.set_data(p + 0.05)  # targets differ from the online nets, so the choice of nets matters
    tensors = learner._tensors(make_batch(3, b=4))
    loss, stats = learner.loss_fn(*tensors)
    inputs, avail, actions, reward, term, mask, state = (x.asnumpy() for x in tensors[:7])
    a_BTN = actions[..., 0]
    q, h = _stepwise(nets.agent, inputs)
    tq, th = _stepwise(nets.target_agent, inputs)
    greedy = np.where(avail > 0, q, -np.inf).argmax(axis=3)
    boot = greedy if double_q else np.where(avail > 0, tq, -np.inf).argmax(axis=3)
    target_q_jt = _joint_np(nets.target_mixer, state, th, boot)[0]
    targets = td_lambda_targets_reference(reward, term, mask, target_q_jt, gamma, lam)
    q_jt, v = _joint_np(nets.mixer, state[:, :-1], h[:, :-1], a_BTN)
    max_q_jt = _joint_np(nets.mixer, state[:, :-1], h[:, :-1], greedy[:, :-1])[0]
    chosen = np.take_along_axis(q[:, :-1], actions, axis=3)[..., 0]
    max_q = np.where(avail > 0, q, -np.inf).max(axis=3)[:, :-1]
    td, opt, nopt = qtran_losses_reference(q_jt, v, max_q_jt, targets, chosen, max_q, mask)
    assert nopt > 0.0  # the min(., 0) branch is exercised
    np.testing.assert_allclose(float(loss.asnumpy()), td + c_opt * opt + c_nopt * nopt, rtol=1e-4)
    np.testing.assert_allclose(stats.asnumpy()[:3], [td, opt, nopt], rtol=1e-4)
    np.testing.assert_allclose(stats.asnumpy()[5], (v * mask).sum() / mask.sum(), rtol=1e-4, atol=1e-6)


def test_train_step_updates_agents_and_joint_nets_and_round_trips() -> None:
    learner = QTRANLearner(INFO, _cfg(use_jit=True))
    sd0 = learner.state_dict()
    stats = learner.train(make_batch(4, b=4), 0, 0)
    assert set(stats) == set(QTRANLearner.stat_names) and all(np.isfinite(list(stats.values())))
    sd1 = learner.state_dict()
    for prefix in ("nets/agent.", "nets/mixer.Q.", "nets/mixer.V.", "nets/mixer.action_encoding."):
        keys = [k for k in sd1 if k.startswith(prefix)]
        assert keys and any(not np.array_equal(sd0[k], sd1[k]) for k in keys), prefix
    for k in (k for k in sd1 if k.startswith(("nets/target_agent.", "nets/target_mixer."))):
        np.testing.assert_array_equal(sd0[k], sd1[k])  # targets move only on schedule
    fresh = QTRANLearner(INFO, _cfg())
    fresh.load_state_dict(sd1)
    for k, v in learner.actor_weights().items():
        np.testing.assert_array_equal(fresh.actor_weights()[k], v)


def test_bad_settings_fail_with_the_allowed_values() -> None:
    mlp = Config(learner=QTRANConfig(name="qtran", use_jit=False), agent=AgentConfig(name="mlp"))
    with pytest.raises(ValueError, match="agent.name='mlp'; allowed: rnn, dueling_rnn"):
        QTRANLearner(INFO, mlp)
    with pytest.raises(ValueError, match="nopt_min_loss must be >= 0"):
        QTRANLearner(INFO, _cfg(nopt_min_loss=-1.0))
    with pytest.raises(ValueError, match="whole episodes only"):
        QTRANLearner(INFO, _cfg(bptt_chunk=2))


def test_config_and_a_short_run_on_the_fake_env(tmp_path: Path) -> None:
    overrides = [
        "t_max=60",
        "learner.use_jit=false",
        "learner.batch_size=4",
        "runner.batch_size_run=2",
        "agent.hidden_dim=16",
        "learner.qtran_embed_dim=16",
        "log.mindinsight=false",
        "log.progress=false",
        "log.test_interval=100",
        "log.test_nepisode=2",
        "checkpoint.save_interval=0",
        f"results_dir={tmp_path}",
    ]
    cfg = load_config("qtran", env="fake", overrides=overrides)
    assert cfg.learner.name == "qtran" and cfg.learner.opt_loss == 1.0 and cfg.learner.nopt_min_loss == 0.1
    trainer = Trainer(cfg)
    trainer.run()
    assert trainer.train_steps >= 3


def test_only_l_td_trains_q_jt_while_the_conditions_train_v_and_the_agents() -> None:
    """The stop-gradients: ``L_opt`` and ``L_nopt`` hold ``Q_jt`` fixed, so ``Q_jt``'s gradient is ``L_td``'s
    alone, while ``V_jt`` and the agents get more than ``L_td``'s."""
    batch = make_batch(7, b=4)
    with_conditions = QTRANLearner(INFO, _cfg(opt_loss=1.0, nopt_min_loss=1.0))
    td_only = QTRANLearner(INFO, _cfg(opt_loss=0.0, nopt_min_loss=0.0))
    td_only.load_state_dict(with_conditions.state_dict())
    names = [p.name for p in with_conditions.params]
    g_all = dict(zip(names, with_conditions.loss_and_grads(batch)[1], strict=True))
    g_td = dict(zip(names, td_only.loss_and_grads(batch)[1], strict=True))
    q_jt = [k for k in names if ".Q." in k or ".action_encoding." in k]
    v_jt = [k for k in names if ".V." in k]
    agent = [k for k in names if ".agent." in k or k.startswith("agent.")]
    assert q_jt and v_jt and agent, names
    for k in q_jt:
        np.testing.assert_allclose(g_all[k], g_td[k], rtol=1e-5, atol=1e-7)
    assert all(np.abs(g_td[k]).max() == 0.0 for k in v_jt)  # V_jt appears only in the conditions
    assert all(np.abs(g_all[k]).max() > 0.0 for k in v_jt)
    assert any(not np.allclose(g_all[k], g_td[k]) for k in agent)
