"""Weighted QMIX (Rashid et al. 2020): the CW / OW weights against a readable loop, the whole loss recomputed
readably in NumPy from the networks' outputs, configs, bad settings and a short run on the fake env."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from learner_batches import INFO, make_batch  # tests/ is on sys.path under pytest

from marl.config import load_config
from marl.config.schema import Config, MixerConfig, WQMIXConfig
from marl.learners.targets import td_lambda_targets_reference, transition_mask
from marl.learners.wqmix_learner import WQMIXLearner, wqmix_weights, wqmix_weights_reference
from marl.trainer import Trainer
from marl.utils.ms import Tensor, setup

setup(1, seed=0)


def _cfg(**learner: object) -> Config:
    base = {"name": "wqmix", "use_jit": False, "central_embed_dim": 16}
    base.update(learner)
    return Config(learner=WQMIXConfig(**base), mixer=MixerConfig(name="qmix", embed_dim=8, hypernet_dim=16))


@pytest.mark.parametrize("weighting", ["cw", "ow"])
def test_weights_match_the_readable_loop(weighting: str) -> None:
    rng = np.random.default_rng(1)
    b, t, n, a = 4, 6, 3, 3
    q_tot, targets, greedy_q = (rng.normal(size=(b, t, 1)).astype(np.float32) for _ in range(3))
    actions = rng.integers(0, a, size=(b, t, n, 1))
    greedy = np.where(rng.random((b, t, n, 1)) < 0.7, actions, rng.integers(0, a, size=(b, t, n, 1)))
    got = wqmix_weights(
        weighting, 0.1, *(Tensor(x) for x in (q_tot, targets, greedy_q)), Tensor(actions), Tensor(greedy)
    ).asnumpy()
    want = wqmix_weights_reference(weighting, 0.1, q_tot, targets, greedy_q, actions[..., 0], greedy[..., 0])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (want == 1.0).any() and (want == np.float32(0.1)).any()  # both branches are exercised


def _masked_argmax(q_BTNA: np.ndarray, avail_BTNA: np.ndarray) -> np.ndarray:
    return np.where(avail_BTNA > 0, q_BTNA, -np.inf).argmax(axis=3)


@pytest.mark.parametrize("weighting", ["cw", "ow"])
def test_loss_equals_a_readable_recomputation(weighting: str) -> None:
    gamma, lam, alpha = 0.99, 0.6, 0.3
    cfg = _cfg(weighting=weighting, w=alpha, gamma=gamma, td_lambda=lam, central_loss=0.7)
    learner = WQMIXLearner(INFO, cfg)
    batch = make_batch(3, b=4)
    nets = learner.nets
    # make the targets differ from the online nets, so that double Q matters
    for p in nets.target_central_agent.trainable_params() + nets.target_central_mixer.trainable_params():
        p.set_data(p + 0.05)
    tensors = learner._tensors(batch)
    loss, stats = learner.loss_fn(*tensors)
    inputs, avail, actions, reward, term, mask, state = (x.asnumpy() for x in tensors[:7])
    t = inputs.shape[1]
    q = nets.agent.unroll(Tensor(inputs)).asnumpy()
    cq = nets.central_agent.unroll(Tensor(inputs)).asnumpy()
    tcq = nets.target_central_agent.unroll(Tensor(inputs)).asnumpy()
    greedy = _masked_argmax(q, avail)  # (B, T, N): the QMIX agents pick, the target Q* values
    tq_greedy = np.take_along_axis(tcq, greedy[..., None], axis=3)[..., 0]
    greedy_q_star = nets.target_central_mixer(Tensor(tq_greedy), Tensor(state)).asnumpy()
    targets = td_lambda_targets_reference(reward, term, mask, greedy_q_star, gamma, lam)
    chosen = np.take_along_axis(q[:, :-1], actions, axis=3)[..., 0]
    c_chosen = np.take_along_axis(cq[:, :-1], actions, axis=3)[..., 0]
    s = Tensor(state[:, :-1])
    q_tot = nets.mixer(Tensor(chosen), s).asnumpy()
    q_star = nets.central_mixer(Tensor(c_chosen), s).asnumpy()
    w = wqmix_weights_reference(
        weighting, alpha, q_tot, targets, greedy_q_star[:, :-1], actions[..., 0], greedy[:, :-1]
    )
    n = mask.sum()
    qmix_loss = 0.5 * (w * mask * (q_tot - targets) ** 2).sum() / n
    central_loss = 0.5 * (mask * (q_star - targets) ** 2).sum() / n
    np.testing.assert_allclose(float(loss.asnumpy()), qmix_loss + 0.7 * central_loss, rtol=1e-4)
    np.testing.assert_allclose(stats.asnumpy()[3], central_loss, rtol=1e-4)
    np.testing.assert_allclose(stats.asnumpy()[4], (w * mask).sum() / n, rtol=1e-5)
    assert np.array_equal(mask, transition_mask(batch["filled"], batch["terminated"])[:, : t - 1])


def test_train_step_updates_both_q_and_q_star_and_round_trips() -> None:
    learner = WQMIXLearner(INFO, _cfg())
    sd0 = learner.state_dict()
    stats = learner.train(make_batch(4, b=4), 0, 0)
    assert set(stats) == set(WQMIXLearner.stat_names) and all(np.isfinite(list(stats.values())))
    sd1 = learner.state_dict()
    for prefix in ("nets/agent.", "nets/mixer.", "nets/central_agent.", "nets/central_mixer."):
        keys = [k for k in sd1 if k.startswith(prefix)]
        assert keys and any(not np.array_equal(sd0[k], sd1[k]) for k in keys), prefix
    fresh = WQMIXLearner(INFO, _cfg())
    fresh.load_state_dict(sd1)
    for k, v in learner.actor_weights().items():
        np.testing.assert_array_equal(fresh.actor_weights()[k], v)


def test_bad_settings_fail_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="weighting='xw'; allowed: cw, ow"):
        WQMIXLearner(INFO, _cfg(weighting="xw"))
    with pytest.raises(ValueError, match=r"learner.w \(alpha\) must be in \(0, 1\]"):
        WQMIXLearner(INFO, _cfg(w=0.0))
    bad = Config(learner=WQMIXConfig(name="wqmix", use_jit=False), mixer=MixerConfig(name="none"))
    with pytest.raises(ValueError, match="allowed: qmix, vdn"):
        WQMIXLearner(INFO, bad)


@pytest.mark.parametrize("alg", ["cw_qmix", "ow_qmix"])
def test_configs_and_a_short_run_on_the_fake_env(tmp_path: Path, alg: str) -> None:
    cfg = load_config(
        alg,
        env="fake",
        overrides=[
            "t_max=60",
            "learner.use_jit=false",
            "learner.batch_size=4",
            "runner.batch_size_run=2",
            "agent.hidden_dim=16",
            "learner.central_embed_dim=16",
            "log.mindinsight=false",
            "log.progress=false",
            "log.test_interval=100",
            "log.test_nepisode=2",
            "checkpoint.save_interval=0",
            f"results_dir={tmp_path}",
        ],
    )
    assert cfg.learner.name == "wqmix" and cfg.learner.weighting == alg[:2] and cfg.learner.w == 0.1
    trainer = Trainer(cfg)
    trainer.run()
    assert trainer.train_steps >= 3
