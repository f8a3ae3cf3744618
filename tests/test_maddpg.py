"""MADDPG / DDPG: Gumbel-softmax gradients, soft updates, the critic target, controllers, Trainer runs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from marl.buffers.episode import EpisodeBatch, Scheme
from marl.config import load_config
from marl.config.schema import AgentConfig, Config, MADDPGConfig, NoiseExplorationConfig
from marl.controllers.deterministic_controller import DeterministicController, squash
from marl.envs.base import EnvInfo
from marl.learners.dqn_learner import make_target_update
from marl.learners.maddpg_learner import MADDPGLearner, gumbel_softmax_st, soft_update_reference
from marl.learners.transitions import RNG_KEY
from marl.trainer import Trainer
from marl.utils.ms import Parameter, Tensor, ms, params_to_numpy, setup

setup(1, seed=0)

DISC = EnvInfo(n_agents=3, n_actions=4, obs_shape=5, state_shape=7, episode_limit=5)
CONT = EnvInfo(n_agents=2, n_actions=2, obs_shape=3, state_shape=4, episode_limit=5, discrete=False)


def make_batch(info: EnvInfo, seed: int, b: int = 4) -> EpisodeBatch:
    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(info), b)
    n, a = info.n_agents, info.n_actions
    for row in range(b):
        ep_len = int(rng.integers(2, info.episode_limit + 1))
        for t in range(ep_len + 1):
            avail = np.ones((n, a), np.int32)
            if info.discrete:
                avail[:, 0] = rng.random(n) < 0.5
            vals = {
                "obs": rng.normal(size=(n, info.obs_shape)),
                "state": rng.normal(size=info.state_shape),
                "avail_actions": avail,
            }
            if t < ep_len:
                if info.discrete:
                    act = np.array([rng.choice(np.flatnonzero(m)) for m in avail])[:, None]
                else:
                    act = rng.uniform(-1, 1, size=(n, a))
                vals.update(actions=act, reward=[rng.normal()], terminated=[float(t == ep_len - 1)])
            eb.update(vals, t, rows=np.array([row]))
    return eb


def _cfg(**learner: object) -> Config:
    lc = {
        "name": "maddpg",
        "use_jit": True,
        "transition_batch_size": 8,
        "updates_per_step": 1.0,
        "target_update_tau": 0.1,
        "critic_hidden_dim": 16,
    }
    lc.update(learner)
    agent = AgentConfig(name="mlp", hidden_dim=16, obs_last_action=False, obs_agent_id=True)
    return Config(learner=MADDPGConfig(**lc), agent=agent, exploration=NoiseExplorationConfig())


def test_gumbel_softmax_straight_through_value_and_gradient():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 2, 4)).astype(np.float32)
    g = rng.gumbel(size=logits.shape).astype(np.float32)
    avail = np.ones_like(logits, dtype=np.int32)
    avail[:, :, 1] = 0
    w = rng.normal(size=logits.shape).astype(np.float32)
    tau = 0.7
    y = gumbel_softmax_st(Tensor(logits), Tensor(avail), Tensor(g), tau).asnumpy()
    best = np.where(avail > 0, logits + g, -np.inf).argmax(-1)
    np.testing.assert_allclose(y, np.eye(4)[best], atol=1e-6)  # forward: a one-hot of an available action

    def f(z):  # noqa: ANN001, ANN202
        return (gumbel_softmax_st(z, Tensor(avail), Tensor(g), tau) * Tensor(w)).sum()

    grad = ms.grad(f)(Tensor(logits)).asnumpy()
    # backward: the gradient of the soft sample softmax((logits + g) / tau) over available actions
    z = np.where(avail > 0, logits + g, -1e10) / tau
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref = p * (w - (p * w).sum(-1, keepdims=True)) / tau
    assert np.abs(grad).sum() > 1e-3
    np.testing.assert_allclose(grad, ref, atol=1e-5)
    assert np.abs(grad[:, :, 1]).max() < 1e-6  # nothing flows to unavailable actions


def test_soft_update_arithmetic():
    rng = np.random.default_rng(1)
    t0, p0 = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    tp, p = Parameter(Tensor(t0), name="t"), Parameter(Tensor(p0), name="p")
    make_target_update([(tp, p)], 0.25, use_jit=True)()
    np.testing.assert_allclose(tp.asnumpy(), 0.25 * p0 + 0.75 * t0, atol=1e-6)
    np.testing.assert_allclose(soft_update_reference(t0, p0, 0.25), 0.25 * p0 + 0.75 * t0)
    # in the learner: targets move by tau towards the online nets as they are after the gradient step
    learner = MADDPGLearner(DISC, _cfg())
    before = params_to_numpy(learner.nets)
    learner.train(make_batch(DISC, 2), t_env=10, episode=1)  # first call: exactly one update
    after = params_to_numpy(learner.nets)
    for part in ("actor", "critic"):
        for k, v in after.items():
            if k.startswith(f"target_{part}."):
                online = after[k[len("target_") :]]
                np.testing.assert_allclose(v, 0.1 * online + 0.9 * before[k], atol=1e-6)
    assert any(not np.allclose(after[k], before[k]) for k in after if k.startswith("actor."))


def test_critic_target_against_naive():
    """The reported target mean is r + gamma (1 - term) Q'(s', target actions), computed in NumPy."""
    learner = MADDPGLearner(CONT, _cfg(gamma=0.9))
    batch = make_batch(CONT, 3)
    from marl.controllers.mac import build_agent_inputs
    from marl.controllers.numpy_actor import NumpyMLPAgent
    from marl.learners.dqn_learner import sample_transitions

    inputs = build_agent_inputs(batch["obs"], None, False, True)
    b, t = sample_transitions(batch, 8, np.random.default_rng(4))
    arrays = learner.minibatch(batch, inputs, b, t)
    w = params_to_numpy(learner.nets)
    actor = NumpyMLPAgent(
        {k[len("target_actor.") :]: v for k, v in w.items() if k.startswith("target_actor.")}
    )
    z, _ = actor.step(arrays[1].reshape(16, -1), None)
    a_next = squash(z, -1.0, 1.0).reshape(8, 4)
    c = {k[len("target_critic.") :]: v for k, v in w.items() if k.startswith("target_critic.")}
    ys = []
    for i in range(2):
        x = np.concatenate([arrays[5], a_next, np.tile(np.eye(2)[i], (8, 1))], 1)
        h = np.maximum(x @ c["fc1.weight"].T + c["fc1.bias"], 0)
        h = np.maximum(h @ c["fc2.weight"].T + c["fc2.bias"], 0)
        q = h @ c["fc3.weight"].T + c["fc3.bias"]
        ys.append(arrays[7] + 0.9 * (1 - arrays[8]) * q)
    out = learner._step(*[Tensor(np.ascontiguousarray(x)) for x in arrays]).asnumpy()
    assert out[3] == pytest.approx(np.mean(ys), rel=1e-4, abs=1e-5)


def test_state_dict_resume_draws_the_same_minibatches_and_noise():
    # discrete: each step draws transitions, then Gumbel noise, from the learner's RNG
    batch = make_batch(DISC, 2)
    first = MADDPGLearner(DISC, _cfg())
    for i in range(2):
        first.train(batch, t_env=10 + 3 * i, episode=i)
    sd = first.state_dict()
    resumed = MADDPGLearner(DISC, _cfg())
    resumed.load_state_dict(sd)
    for i in range(2, 4):
        expected = first.train(batch, t_env=10 + 3 * i, episode=i)
        assert resumed.train(batch, t_env=10 + 3 * i, episode=i) == expected and expected["updates"] == 3.0
    for k, v in first.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[k], v, err_msg=k)
    # an older checkpoint without the RNG still loads; the generator keeps its seed state
    old = MADDPGLearner(DISC, _cfg())
    seeded = old.rng.bit_generator.state
    old.load_state_dict({k: v for k, v in sd.items() if k != RNG_KEY})
    assert old.rng.bit_generator.state == seeded and (old.train_steps, old.last_t_env) == (2, 13)


def test_deterministic_controller_actions():
    weights = params_to_numpy(MADDPGLearner(CONT, _cfg()).nets.actor)
    expl = NoiseExplorationConfig(noise_start=0.5, noise_finish=0.1, noise_anneal_time=100)
    ctl = DeterministicController(CONT, _cfg().agent, expl, seed=0, weights=weights)
    ctl.init_hidden(64)
    obs = np.random.default_rng(5).normal(size=(64, 2, 3)).astype(np.float32)
    avail = np.ones((64, 2, 2), np.int32)
    greedy = ctl.select_actions(obs, avail, 0, test_mode=True)
    np.testing.assert_allclose(greedy, squash(ctl.forward(obs), -1, 1), atol=1e-6)
    noisy = ctl.select_actions(obs, avail, 0)
    assert noisy.dtype == np.float32 and noisy.shape == (64, 2, 2) and np.abs(noisy).max() <= 1.0
    assert 0.3 < np.std(noisy - greedy) < 0.6  # std 0.5 of the half-range 1 (a little less after clipping)
    assert ctl.epsilon(50) == pytest.approx(0.3) and ctl.epsilon(1000) == pytest.approx(0.1)
    dctl = DeterministicController(
        DISC, _cfg().agent, expl, seed=0, weights=params_to_numpy(MADDPGLearner(DISC, _cfg()).nets.actor)
    )
    dctl.init_hidden(8)
    avail = np.ones((8, 3, 4), np.int32)
    avail[:, :, 2] = 0
    obs = np.random.default_rng(6).normal(size=(8, 3, 5))
    logits = dctl.forward(obs)
    test = dctl.select_actions(obs, avail, 0, test_mode=True)
    np.testing.assert_array_equal(test, np.where(avail > 0, logits, -np.inf).argmax(2))
    samples = np.stack([dctl.select_actions(obs, avail, 0) for _ in range(50)])
    assert not (samples == 2).any() and len(np.unique(samples)) > 1
    with pytest.raises(ValueError, match="obs_last_action"):
        MADDPGLearner(DISC, replace(_cfg(), agent=AgentConfig(name="mlp", obs_last_action=True)))


def _run(tmp_path, alg: str, env: str, map_name: str, t_max: int, extra: list[str]) -> Trainer:  # noqa: ANN001
    cfg = load_config(
        alg,
        env=env,
        map_name=map_name,
        overrides=[
            f"t_max={t_max}",
            "log.test_interval=400",
            "log.log_interval=400",
            "log.test_nepisode=2",
            "log.mindinsight=false",
            f"results_dir={tmp_path}",
            f"run_name={alg}_{env}",
            "checkpoint.save_interval=0",
            *extra,
        ],
    )
    trainer = Trainer(cfg)
    trainer.run()
    return trainer


def test_maddpg_trainer_fake_env_discrete(tmp_path):
    tr = _run(
        tmp_path,
        "maddpg",
        "fake",
        "fake",
        600,
        [
            "learner.batch_size=4",
            "learner.transition_batch_size=32",
            "learner.updates_per_step=0.1",
            "runner.batch_size_run=2",
        ],
    )
    assert tr.learner.cfg.learner.use_jit and tr.train_steps > 0
    assert (tr.run_dir / "models").is_dir()


def test_ddpg_trainer_pendulum_continuous(tmp_path):
    tr = _run(
        tmp_path,
        "ddpg",
        "gym",
        "Pendulum-v1",
        600,
        [
            "learner.batch_size=2",
            "learner.updates_per_step=0.1",
            "learner.transition_batch_size=32",
            "agent.hidden_dim=32",
            "learner.critic_hidden_dim=32",
        ],
    )
    assert tr.info.discrete is False and tr.train_steps > 0 and tr.learner.grad_steps >= 20
