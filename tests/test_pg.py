"""REINFORCE with a baseline: Monte Carlo returns, the score-function loss and a run through the Trainer."""

from __future__ import annotations

import numpy as np
import pytest
from learner_batches import AC_TINY  # tests/ is on sys.path under pytest

import marl.learners.pg_learner  # noqa: F401  (registers "pg")
from marl.buffers import EpisodeBatch, Scheme
from marl.config import load_config
from marl.envs.base import EnvInfo
from marl.learners.pg_learner import PGLearner
from marl.learners.returns import discounted_returns, gae
from marl.learners.targets import transition_mask
from marl.trainer import Trainer
from marl.utils.ms import Tensor, setup

setup(1, seed=0)

TINY = AC_TINY  # the tiny actor-critic run settings


def _padded(b: int, t_slots: int, lengths: list[int], terminal: list[bool]):  # noqa: ANN202
    filled = np.zeros((b, t_slots, 1), np.float32)
    term = np.zeros((b, t_slots, 1), np.float32)
    for e, (length, end) in enumerate(zip(lengths, terminal, strict=True)):
        filled[e, : length + 1] = 1
        term[e, length - 1] = float(end)
    return transition_mask(filled, term), term[:, :-1]


def test_discounted_returns_match_naive_loop_and_gae_lambda_one():
    rng = np.random.default_rng(0)
    b, t_slots, n, gamma = 3, 7, 2, 0.9
    mask, term = _padded(b, t_slots, [6, 3, 4], [False, True, True])  # cut at the limit, terminated x2
    r = rng.normal(size=(b, t_slots - 1, 1)).astype(np.float32)
    v = rng.normal(size=(b, t_slots, n)).astype(np.float32)
    got = discounted_returns(r, term, mask, v, gamma)
    for e, (length, end) in enumerate([(6, False), (3, True), (4, True)]):
        for i in range(n):
            g = 0.0 if end else float(v[e, length, i])  # bootstrap only where the time limit cut it
            for t in reversed(range(length)):
                g = r[e, t, 0] + gamma * g
                assert got[e, t, i] == pytest.approx(g, rel=1e-5, abs=1e-5)
            assert not got[e, length:, i].any()
    _, ret_gae = gae(r, term, mask, v, gamma, 1.0)
    np.testing.assert_allclose(got, ret_gae, atol=1e-5)


def test_pg_loss_is_the_score_function_objective(tmp_path):
    info = EnvInfo(n_agents=1, n_actions=3, obs_shape=4, state_shape=4, episode_limit=5)
    cfg = load_config(
        "pg",
        env="fake",
        overrides=[
            *TINY,
            f"results_dir={tmp_path}",
            "learner.entropy_coef=0",
            "learner.value_coef=0",
            "learner.ppo_epochs=7",
        ],
    )
    learner = PGLearner(info, cfg)
    assert learner.cfg.learner.ppo_epochs == 1 and learner.cfg.learner.value_clip == 0.0  # forced
    rng = np.random.default_rng(1)
    batch = EpisodeBatch(Scheme(info), 4)
    for t in range(6):
        vals = {
            "obs": rng.normal(size=(4, 1, 4)),
            "state": rng.normal(size=(4, 4)),
            "avail_actions": np.ones((4, 1, 3)),
        }
        if t < 5:
            vals.update(
                actions=rng.integers(0, 3, (4, 1)),
                reward=rng.normal(size=(4, 1)),
                terminated=np.zeros((4, 1)),
            )
        batch.update(vals, t)
    arr = learner._arrays(batch)
    ins = [Tensor(np.ascontiguousarray(arr[k])) for k in ("actor_in", "critic_in", "avail", "actions")]
    logp = learner._eval(*ins)[0]
    adv = rng.normal(size=logp.shape).astype(np.float32)
    old = Tensor(logp.asnumpy() + 0.3)  # the old log-probs do not enter the REINFORCE loss
    zeros = Tensor(np.zeros(logp.shape, np.float32))
    loss, stats = learner.loss_fn(*ins, old, Tensor(adv), zeros, zeros, Tensor(arr["mask"]))
    assert float(loss.asnumpy()) == pytest.approx(-(logp.asnumpy() * adv).mean(), rel=1e-5)


def test_pg_trains_on_gym_cartpole_with_jit(tmp_path):
    pytest.importorskip("gymnasium")
    cfg = load_config(
        "pg",
        env="gym",
        map_name="CartPole-v1",
        overrides=[*TINY, f"results_dir={tmp_path}", "run_name=r", "t_max=300", "env.args.episode_limit=30"],
    )
    trainer = Trainer(cfg)
    before = trainer.learner.actor_weights()
    trainer.run()
    assert trainer.info.n_agents == 1 and trainer.info.episode_limit == 30 and trainer.train_steps >= 3
    after = trainer.learner.actor_weights()
    assert any(not np.allclose(before[k], after[k]) for k in before)
    assert (trainer.run_dir / "models").is_dir()
