"""MAA2C (``configs/algs/maa2c.yaml``) is the PPO learner with settings under which its loss is A2C's.

A readable A2C loss (``-log pi(a|s) A + value_coef (V - G)^2 / 2 - entropy_coef H``, no ratio, no clipping) is
written here; the PPO learner's loss with the MAA2C settings and the behaviour log-probs of the weights that
collected the batch (what one epoch of one minibatch sees) must give the same gradient, value loss and
entropy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from learner_batches import random_ppo_batch  # tests/ is on sys.path under pytest

import marl.learners.ppo_learner  # noqa: F401  (registers "ppo")
from marl.buffers import EpisodeBatch
from marl.config import load_config
from marl.envs.base import EnvInfo
from marl.learners.ppo_learner import PPOLearner
from marl.trainer import Trainer
from marl.utils.ms import Tensor, ms, ops, setup

setup(1, seed=0)

INFO = EnvInfo(n_agents=3, n_actions=4, obs_shape=6, state_shape=7, episode_limit=5)
SMALL = ["agent.hidden_dim=16", "learner.critic_hidden_dim=16", "log.mindinsight=false"]


def _learner(tmp_path: Path, *extra: str) -> PPOLearner:
    cfg = load_config(
        "maa2c",
        env="fake",
        overrides=[*SMALL, "learner.batch_size=4", "runner.batch_size_run=2", f"results_dir={tmp_path}"]
        + list(extra),
    )
    return PPOLearner(INFO, cfg)


def _batch(b: int, seed: int) -> EpisodeBatch:
    return random_ppo_batch(INFO, b, seed)


def test_maa2c_settings() -> None:
    lc = load_config("maa2c", env="sc2").learner
    assert lc.name == "ppo" and lc.critic == "central"
    assert (lc.ppo_epochs, lc.num_minibatches, lc.value_clip, lc.adv_norm) == (1, 1, 0.0, False)


def test_maa2c_loss_and_gradient_equal_the_a2c_loss(tmp_path: Path) -> None:
    learner = _learner(tmp_path, "use_jit=false", "learner.entropy_coef=0.03", "learner.value_coef=0.7")
    arr = learner._arrays(_batch(4, 3))
    ins = [Tensor(np.ascontiguousarray(arr[k])) for k in ("actor_in", "critic_in", "avail", "actions")]
    old_logp, _, v_raw = learner._eval(*ins)  # the behaviour policy = the current weights
    rng = np.random.default_rng(0)
    shape = old_logp.shape
    adv, ret = (Tensor(rng.normal(size=shape).astype(np.float32)) for _ in range(2))
    old_v = Tensor(v_raw.asnumpy()[:, :-1])
    mask = Tensor(arr["mask"])
    nets, dist = learner.nets, learner._dist

    def a2c_loss(actor_in, critic_in, avail, actions, adv_, ret_, mask_BT1):
        logp, entropy = dist(nets.actor.unroll(actor_in)[:, :-1], avail[:, :-1], actions)
        v = nets.critic(critic_in)[:, :-1]
        m = ops.broadcast_to(mask_BT1, logp.shape)
        n = m.sum()
        policy = -(logp * adv_ * m).sum() / n
        value = 0.5 * (((v - ret_) ** 2) * m).sum() / n
        ent = (entropy * m).sum() / n
        return policy + 0.7 * value - 0.03 * ent, ops.stack([value, ent])

    params = learner.params
    ppo_val, ppo_grads = ms.value_and_grad(learner.loss_fn, None, weights=params, has_aux=True)(
        *ins, old_logp, adv, ret, old_v, mask
    )
    (_, ref_stats), ref_grads = ms.value_and_grad(a2c_loss, None, weights=params, has_aux=True)(
        *ins, adv, ret, mask
    )
    # the surrogate's value is -A (ratio = 1), A2C's -A log pi: the same gradient, not the same number;
    # the value loss and the entropy are the same numbers
    np.testing.assert_allclose(ppo_val[1].asnumpy()[1:3], ref_stats.asnumpy(), rtol=1e-5)
    assert sum(float(np.abs(g.asnumpy()).sum()) for g in ref_grads) > 1e-3  # a real gradient
    for g, r in zip(ppo_grads, ref_grads, strict=True):
        np.testing.assert_allclose(g.asnumpy(), r.asnumpy(), rtol=1e-4, atol=1e-6)


def test_maa2c_train_step_is_one_unclipped_update(tmp_path: Path) -> None:
    learner = _learner(tmp_path)
    before = learner.actor_weights()
    stats = learner.train(_batch(4, 5), 0, 0)
    assert stats["approx_kl"] == pytest.approx(0.0, abs=1e-6) and stats["clip_frac"] == 0.0  # ratio = 1
    assert any(not np.allclose(v, learner.actor_weights()[k]) for k, v in before.items())


def test_maa2c_trains_on_fake_env(tmp_path: Path) -> None:
    cfg = load_config(
        "maa2c",
        env="fake",
        overrides=[
            *SMALL,
            "t_max=150",
            "learner.batch_size=4",
            "runner.batch_size_run=2",
            "log.test_interval=100",
            "log.test_nepisode=2",
            "checkpoint.save_interval=0",
            f"results_dir={tmp_path}",
        ],
    )
    trainer = Trainer(cfg)
    trainer.run()
    assert trainer.train_steps >= 3
