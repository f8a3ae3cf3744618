"""DQN learner: transition sampling, double-Q targets, dueling heads, the jitted step, a Trainer run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from marl.buffers.episode import EpisodeBatch, Scheme
from marl.config import load_config
from marl.config.schema import AgentConfig, Config, DQNConfig
from marl.controllers.numpy_actor import NumpyMLPAgent
from marl.envs.base import EnvInfo
from marl.learners.dqn_learner import (
    DQNLearner,
    dqn_targets,
    n_updates,
    sample_transitions,
    valid_transitions,
)
from marl.learners.transitions import RNG_KEY, rng_from_array, rng_to_array
from marl.modules.dueling import DuelingHead, plain_agent_weights
from marl.registry import build
from marl.trainer import Trainer, flatten_arrays, nest_arrays
from marl.utils.ms import Tensor, ms, params_to_numpy, setup

setup(1, seed=0)

INFO = EnvInfo(n_agents=2, n_actions=4, obs_shape=5, state_shape=6, episode_limit=6)


def make_batch(seed: int, lengths: list[int], timeouts: list[bool]) -> EpisodeBatch:
    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(INFO), len(lengths))
    n, a = INFO.n_agents, INFO.n_actions
    for row, (ep_len, timeout) in enumerate(zip(lengths, timeouts, strict=True)):
        for t in range(ep_len + 1):
            avail = (rng.random((n, a)) < 0.6).astype(np.int32)
            avail[:, 1] = 1
            vals = {
                "obs": rng.normal(size=(n, INFO.obs_shape)),
                "state": rng.normal(size=INFO.state_shape),
                "avail_actions": avail,
            }
            if t < ep_len:
                act = np.array([rng.choice(np.flatnonzero(m)) for m in avail])[:, None]
                vals.update(
                    actions=act, reward=[rng.normal()], terminated=[float(t == ep_len - 1 and not timeout)]
                )
            eb.update(vals, t, rows=np.array([row]))
    return eb


def test_transitions_match_a_naive_loop():
    # row 3 is cut by a time limit before episode_limit: its final slot is filled but is no transition
    batch = make_batch(0, [3, 6, 1, 4], [False, True, False, True])
    naive = set()
    for b in range(batch.batch_size):
        for t in range(batch.max_seq_length - 1):
            if batch["filled"][b, t, 0] and batch["filled"][b, t + 1, 0]:  # a real step has a next slot
                naive.add((b, t))
            if batch["terminated"][b, t, 0]:
                break
    b_idx, t_idx = valid_transitions(batch)
    assert set(zip(b_idx.tolist(), t_idx.tolist(), strict=True)) == naive and len(naive) == 3 + 6 + 1 + 4
    sb, st = sample_transitions(batch, 5000, np.random.default_rng(1))
    assert set(zip(sb.tolist(), st.tolist(), strict=True)) == naive  # only real transitions, all of them
    counts = np.bincount(sb, minlength=4) / 5000
    np.testing.assert_allclose(counts, np.array([3, 6, 1, 4]) / 14, atol=0.03)  # uniform over transitions
    assert n_updates(0, 0.5) == 1 and n_updates(37, 0.5) == 18 and n_updates(10, 2.0) == 20


@pytest.mark.parametrize("double_q", [True, False])
def test_double_q_targets_against_naive(double_q: bool):
    rng = np.random.default_rng(2)
    m, n, a, gamma = 7, 2, 4, 0.9
    q_on, q_tg = rng.normal(size=(m, n, a)).astype(np.float32), rng.normal(size=(m, n, a)).astype(np.float32)
    avail = (rng.random((m, n, a)) < 0.5).astype(np.int32)
    avail[..., 2] = 1
    r, term = rng.normal(size=(m, 1)).astype(np.float32), (rng.random((m, 1)) < 0.3).astype(np.float32)
    y = dqn_targets(*(Tensor(x) for x in (q_on, q_tg, avail, r, term)), gamma, double_q).asnumpy()
    ref = np.zeros((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            ok = np.flatnonzero(avail[i, j])
            if double_q:
                best = ok[np.argmax(q_on[i, j, ok])]
                nxt = q_tg[i, j, best]
            else:
                nxt = q_tg[i, j, ok].max()
            ref[i, j] = r[i, 0] + gamma * (1 - term[i, 0]) * nxt
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_dueling_head_mean_subtracted_and_folded_to_plain_mlp():
    head = DuelingHead(8, 5)
    h = np.random.default_rng(3).normal(size=(6, 8)).astype(np.float32)
    w = params_to_numpy(head)
    v = h @ w["value.weight"].T + w["value.bias"]
    adv = h @ w["advantage.weight"].T + w["advantage.bias"]
    np.testing.assert_allclose(head(Tensor(h)).asnumpy(), v + adv - adv.mean(1, keepdims=True), atol=1e-5)
    agent = build("agent", "dueling_mlp", input_dim=3, hidden_dim=8, n_actions=5)
    x = np.random.default_rng(4).normal(size=(1, 1, 6, 3)).astype(np.float32)
    q_ms = agent.unroll(Tensor(x)).asnumpy().reshape(6, 5)
    name, plain = plain_agent_weights("dueling_mlp", params_to_numpy(agent))
    q_np, _ = NumpyMLPAgent(plain).step(x.reshape(6, 3), np.zeros((6, 8), np.float32))
    assert name == "mlp"
    np.testing.assert_allclose(q_np, q_ms, atol=1e-5)


def _cfg(**learner: object) -> Config:
    lc = {
        "name": "dqn",
        "use_jit": True,
        "transition_batch_size": 16,
        "updates_per_step": 0.5,
        "target_update_tau": 0.0,
        "target_update_interval": 1,
    }
    lc.update(learner)
    agent = AgentConfig(name="dueling_mlp", hidden_dim=16, obs_last_action=True, obs_agent_id=True)
    return Config(learner=DQNConfig(**lc), agent=agent)


def test_step_reports_the_naive_target_and_learns():
    learner = DQNLearner(INFO, _cfg())
    batch = make_batch(5, [6, 3, 5, 6], [True, False, False, False])
    from marl.controllers.mac import build_agent_inputs

    inputs = build_agent_inputs(batch["obs"], batch["actions_onehot"], True, True)
    b, t = sample_transitions(batch, 16, np.random.default_rng(6))
    arrays = learner.minibatch(batch, inputs, b, t)
    _, w_on = plain_agent_weights("dueling_mlp", params_to_numpy(learner.nets.agent))
    _, w_tg = plain_agent_weights("dueling_mlp", params_to_numpy(learner.nets.target_agent))
    flat = arrays[1].reshape(-1, arrays[1].shape[-1])
    q_on = NumpyMLPAgent(w_on).step(flat, flat)[0].reshape(16, 2, 4)
    q_tg = NumpyMLPAgent(w_tg).step(flat, flat)[0].reshape(16, 2, 4)
    best = np.where(arrays[2] > 0, q_on, -np.inf).argmax(2)
    y = arrays[4] + 0.99 * (1 - arrays[5]) * np.take_along_axis(q_tg, best[..., None], 2)[..., 0]
    out = learner._step(*[Tensor(np.ascontiguousarray(x)) for x in arrays]).asnumpy()
    assert out[3] == pytest.approx(y.mean(), rel=1e-4, abs=1e-5)  # target_mean
    losses = [learner.train(batch, t_env=100 + 20 * i, episode=i)["loss"] for i in range(40)]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    # hard target updates every episode (target_update_interval=1): target == online after train
    for tp, p in learner._pairs:
        np.testing.assert_array_equal(tp.asnumpy(), p.asnumpy())


def test_resume_from_checkpoint_draws_the_same_minibatches(tmp_path):
    from marl.checkpoint import Checkpointer

    cfg = _cfg(target_update_tau=0.05)
    batch = make_batch(5, [6, 3, 5, 6], [True, False, False, False])
    first = DQNLearner(INFO, cfg)
    for i in range(3):  # the sampling RNG moves away from its seed state
        first.train(batch, t_env=10 + 9 * i, episode=i)
    # through the checkpoint files, as the trainer saves learner state (NumPy arrays only)
    ckpt = Checkpointer(tmp_path).save(28, {"arrays": nest_arrays(first.state_dict())})
    sd = flatten_arrays(Checkpointer(tmp_path).load(ckpt)["arrays"])
    assert sd[RNG_KEY].dtype == np.uint8
    resumed = DQNLearner(INFO, cfg)
    resumed.load_state_dict(sd)
    assert resumed.rng.bit_generator.state == first.rng.bit_generator.state
    for i in range(3, 5):  # several updates per call, identical minibatches and results
        expected = first.train(batch, t_env=10 + 9 * i, episode=i)
        assert resumed.train(batch, t_env=10 + 9 * i, episode=i) == expected and expected["updates"] == 4.0
    # an older checkpoint without the RNG still loads; the generator keeps its seed state
    old = DQNLearner(INFO, cfg)
    seeded = old.rng.bit_generator.state
    old.load_state_dict({k: v for k, v in sd.items() if k != RNG_KEY})
    assert old.rng.bit_generator.state == seeded and old.grad_steps == resumed.grad_steps - 8


def test_rng_array_round_trip_and_mismatch():
    rng = np.random.default_rng(3)
    rng.normal(size=5)
    saved = rng_to_array(rng)
    expected = rng.integers(0, 1 << 40, size=4)
    other = np.random.default_rng(99)
    rng_from_array(other, saved)
    np.testing.assert_array_equal(other.integers(0, 1 << 40, size=4), expected)
    with pytest.raises(ValueError, match="PCG64.*MT19937"):
        rng_from_array(np.random.Generator(np.random.MT19937(0)), saved)


def test_bad_config_fails_early():
    with pytest.raises(ValueError, match="agent.name must be one of"):
        DQNLearner(INFO, replace(_cfg(), agent=AgentConfig(name="rnn")))
    with pytest.raises(ValueError, match="td_loss"):
        DQNLearner(INFO, _cfg(td_loss="l1"))
    cont = replace(INFO, discrete=False)
    with pytest.raises(ValueError, match="discrete"):
        DQNLearner(cont, _cfg())


def test_trainer_cartpole_short_run(tmp_path):
    cfg = load_config(
        "dqn",
        env="gym",
        map_name="CartPole-v1",
        overrides=[
            "t_max=1000",
            "learner.batch_size=8",
            "learner.transition_batch_size=32",
            "learner.updates_per_step=0.1",
            "agent.hidden_dim=32",
            "log.test_interval=400",
            "log.log_interval=400",
            "log.test_nepisode=2",
            "log.mindinsight=false",
            f"results_dir={tmp_path}",
            "run_name=dqn",
            "checkpoint.save_interval=0",
        ],
    )
    assert cfg.learner.name == "dqn" and cfg.learner.use_jit
    trainer = Trainer(cfg)
    run_dir = trainer.run()
    assert trainer.train_steps > 0 and trainer.learner.grad_steps > trainer.train_steps
    assert (run_dir / "models").is_dir() and (run_dir / "curves.png").is_file()
    assert ms.get_context("device_target") == "CPU"
