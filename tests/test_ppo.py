"""PPO learner (MAPPO / IPPO / PPO): GAE, value normalisation, clipping, masking, jit parity, training."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from learner_batches import assert_same_update, cut_episodes, ppo_cfg, random_ppo_batch

import marl.learners.ppo_learner  # noqa: F401  (registers "ppo")
from marl.buffers import EpisodeBatch
from marl.checkpoint import latest, load
from marl.controllers.policy_controller import PolicyController
from marl.envs.base import EnvInfo
from marl.learners.ppo_learner import PPOLearner
from marl.learners.returns import RunningMeanStd, gae
from marl.trainer import Trainer, flatten_arrays, with_overrides
from marl.utils.ms import Tensor, ms, setup

setup(1, seed=0)  # before any MindSpore op (the device can be set only then)


# ------------------------------------------------------------------------------------------ GAE
def _naive_gae(r, term, mask, v, gamma, lam):  # noqa: ANN001,ANN202
    """Per episode, per agent, scalar loops: the textbook recursion."""
    b, t1, n = v.shape[0], r.shape[1], v.shape[2]
    adv = np.zeros((b, t1, n))
    for e in range(b):
        length = int(mask[e, :, 0].sum())
        for i in range(n):
            running = 0.0
            for t in reversed(range(length)):
                bootstrap = 0.0 if term[e, t, 0] else v[e, t + 1, i]
                delta = r[e, t, 0] + gamma * bootstrap - v[e, t, i]
                running = delta + (0.0 if term[e, t, 0] else gamma * lam * running)
                adv[e, t, i] = running
    return adv


def test_gae_matches_naive_loop():
    rng = np.random.default_rng(0)
    b, t_slots, n = 3, 8, 2
    r = rng.normal(size=(b, t_slots - 1, 1)).astype(np.float32)
    term = np.zeros((b, t_slots - 1, 1), np.float32)
    filled = np.zeros((b, t_slots, 1), np.float32)
    filled[0, :8] = 1  # a full-length episode cut by the time limit (bootstraps from slot 7)
    filled[1, :5] = 1  # 4 steps, terminated at step 3
    term[1, 3] = 1
    filled[2, :4] = 1  # 3 steps, terminated at the last one
    term[2, 2] = 1
    from marl.learners.targets import transition_mask

    mask = transition_mask(filled, np.concatenate([term, np.zeros((b, 1, 1), np.float32)], 1))
    v = rng.normal(size=(b, t_slots, n)).astype(np.float32)
    adv, ret = gae(r, term, mask, v, 0.97, 0.9)
    want = _naive_gae(r, term, mask, v, 0.97, 0.9)
    np.testing.assert_allclose(adv, want, atol=1e-5)
    np.testing.assert_allclose(ret, (want + v[:, :-1]) * mask, atol=1e-5)
    assert not adv[1, 4:].any() and not adv[2, 3:].any()  # nothing past an episode's end


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(1)
    parts = [rng.normal(3.0, 2.0, size=k) for k in (5, 17, 40)]
    rms = RunningMeanStd()
    for p in parts:
        rms.update(p)
    allx = np.concatenate(parts)
    assert rms.mean == pytest.approx(allx.mean()) and rms.var == pytest.approx(allx.var())
    np.testing.assert_allclose(rms.denormalize(rms.normalize(allx)), allx, rtol=1e-5)


# ----------------------------------------------------------------------------------- the learner
def _fake_learner(tmp_path: Path, *extra: str) -> tuple[PPOLearner, EnvInfo]:
    cfg = ppo_cfg(tmp_path, "mappo", "fake", ("env.args.episode_limit=5", *extra))
    info = EnvInfo(n_agents=3, n_actions=4, obs_shape=6, state_shape=7, episode_limit=5)
    return PPOLearner(info, cfg), info


def _loss_inputs(learner: PPOLearner, batch: EpisodeBatch, ratio: float, adv_sign: float) -> list:
    arr = learner._arrays(batch)
    ins = [Tensor(np.ascontiguousarray(arr[k])) for k in ("actor_in", "critic_in", "avail", "actions")]
    logp, _, _ = learner._eval(*ins)
    old_logp = Tensor(logp.asnumpy() - math.log(ratio))  # pi / pi_old == ratio everywhere
    shape = logp.shape
    adv = Tensor(np.full(shape, adv_sign, np.float32))
    zeros = Tensor(np.zeros(shape, np.float32))
    return [*ins, old_logp, adv, zeros, zeros, Tensor(arr["mask"])]


@pytest.mark.parametrize(
    ("ratio", "adv_sign", "zero_grad"),
    [
        (1.5, 1.0, True),  # ratio > 1 + eps with A > 0: clipped, no push further up
        (0.5, -1.0, True),  # ratio < 1 - eps with A < 0: clipped, no push further down
        (1.5, -1.0, False),  # ratio > 1 + eps with A < 0: the unclipped term is the minimum -> gradient
        (0.5, 1.0, False),  # ratio < 1 - eps with A > 0: gradient pulls it back up
        (1.1, 1.0, False),  # inside the trust region
    ],
)
def test_clipped_objective_gradient(tmp_path, ratio, adv_sign, zero_grad):
    learner, info = _fake_learner(tmp_path, "learner.entropy_coef=0", "learner.value_coef=0", "use_jit=false")
    inputs = _loss_inputs(learner, random_ppo_batch(info, 4, 0), ratio, adv_sign)
    actor_params = list(learner.nets.actor.trainable_params())
    grad_fn = ms.value_and_grad(learner.loss_fn, None, weights=actor_params, has_aux=True)
    (loss, stats), grads = grad_fn(*inputs)
    norm = math.sqrt(sum(float((g.asnumpy() ** 2).sum()) for g in grads))
    clipped = min(max(ratio, 1.0 - 0.2), 1.0 + 0.2)
    assert float(stats[0].asnumpy()) == pytest.approx(-min(ratio * adv_sign, clipped * adv_sign), rel=1e-4)
    assert (norm < 1e-7) if zero_grad else (norm > 1e-4)


def test_masked_actions_are_never_sampled_and_sampling_follows_softmax(tmp_path):
    learner, info = _fake_learner(tmp_path, "agent.name=mlp")
    ctrl = learner.make_controller(seed=0)
    rng = np.random.default_rng(0)
    n_envs = 2000
    ctrl.init_hidden(n_envs)
    obs = np.broadcast_to(rng.normal(size=(1, 3, 6)), (n_envs, 3, 6)).astype(np.float32)
    avail = np.array([[1, 0, 1, 1], [0, 1, 0, 0], [1, 1, 0, 1]], np.int32)
    acts = ctrl.select_actions(obs, np.broadcast_to(avail, (n_envs, 3, 4)), t_env=0)
    assert acts.dtype == np.int64 and acts.shape == (n_envs, 3)
    assert avail[np.arange(3)[None], acts].all()  # never an unavailable action
    ctrl.init_hidden(1)
    logits = ctrl.forward(obs[:1])[0]
    p = np.where(avail > 0, np.exp(logits - logits.max(1, keepdims=True)), 0.0)
    p /= p.sum(1, keepdims=True)
    freq = np.stack([np.bincount(acts[:, i], minlength=4) / n_envs for i in range(3)])
    np.testing.assert_allclose(freq, p, atol=0.04)
    ctrl.init_hidden(1)
    greedy = ctrl.select_actions(obs[:1], avail[None], 0, test_mode=True)
    np.testing.assert_array_equal(greedy[0], np.where(avail > 0, logits, -np.inf).argmax(1))


def test_gaussian_controller_and_log_prob(tmp_path):
    info = EnvInfo(n_agents=2, n_actions=3, obs_shape=4, state_shape=5, episode_limit=4, discrete=False)
    cfg = ppo_cfg(tmp_path, "ippo", "fake", ("agent.name=mlp", "learner.init_log_std=-1.0"))
    learner = PPOLearner(info, cfg)
    ctrl: PolicyController = learner.make_controller(seed=1)
    assert ctrl.epsilon(0) == pytest.approx(math.exp(-1.0))
    ctrl.init_hidden(5000)
    obs = np.zeros((5000, 2, 4), np.float32)
    acts = ctrl.select_actions(obs, np.ones((5000, 2, 3)), 0)
    assert acts.shape == (5000, 2, 3) and acts.dtype == np.float32
    np.testing.assert_allclose(acts.std(0), math.exp(-1.0), rtol=0.08)
    batch = random_ppo_batch(info, 4, 3)
    arr = learner._arrays(batch)
    ins = [Tensor(np.ascontiguousarray(arr[k])) for k in ("actor_in", "critic_in", "avail", "actions")]
    logp = learner._eval(*ins)[0].asnumpy()
    mean = learner.nets.actor.unroll(ins[0]).asnumpy()[:, :-1]
    sd = math.exp(-1.0)
    want = (-0.5 * ((arr["actions"] - mean) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)).sum(-1)
    np.testing.assert_allclose(logp, want, rtol=1e-4, atol=1e-4)


def test_jit_step_equals_eager_step(tmp_path):
    jitted, info = _fake_learner(tmp_path)
    eager, _ = _fake_learner(tmp_path, "use_jit=false")
    eager.load_state_dict(jitted.state_dict())
    batch = random_ppo_batch(info, 4, 7)
    out_j, out_e = jitted.train(batch, 0, 0), eager.train(batch, 0, 0)
    for k in ("loss", "policy_loss", "value_loss", "entropy", "grad_norm"):
        assert out_j[k] == pytest.approx(out_e[k], rel=1e-4, abs=1e-6), k
    sd_j, sd_e = jitted.state_dict(), eager.state_dict()
    assert sd_j["length_plan/compiled"].shape[0] == 1 and sd_e["length_plan/compiled"].shape[0] == 0
    for k, v in sd_j.items():  # the planner's record differs by construction: an eager step compiles nothing
        if not k.startswith("length_plan/"):
            np.testing.assert_allclose(v, sd_e[k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert not np.allclose(
        sd_j["nets/actor.agent.fc1.weight"],
        _fake_learner(tmp_path)[0].state_dict()["nets/actor.agent.fc1.weight"],
    )  # the step changed the weights


def test_time_buckets_cut_padding_without_changing_the_update(tmp_path):
    """Training over the longest episode's slots rounded up to a bucket gives the update of the whole
    padded batch (same statistics and weights after one train call)."""
    cfg = ppo_cfg(tmp_path, "mappo", "fake", ("env.args.episode_limit=12", "use_jit=false"))
    info = EnvInfo(n_agents=3, n_actions=4, obs_shape=6, state_shape=7, episode_limit=12)
    batch = cut_episodes(random_ppo_batch(info, 4, 3), [3, 5, 2, 4])  # 6 filled slots at most -> 8 with 4
    whole = PPOLearner(info, with_overrides(cfg, learner={"time_bucket": 0}))
    cut = PPOLearner(info, with_overrides(cfg, learner={"time_bucket": 4}))
    assert_same_update(whole, cut, batch)


def test_bad_settings_fail_early(tmp_path):
    info = EnvInfo(n_agents=2, n_actions=3, obs_shape=4, state_shape=5, episode_limit=4)
    with pytest.raises(ValueError, match="allowed: central, local"):
        PPOLearner(info, ppo_cfg(tmp_path, "mappo", "fake", ("learner.critic=global",)))
    with pytest.raises(ValueError, match="multiple of runner.batch_size_run"):
        PPOLearner(info, ppo_cfg(tmp_path, "mappo", "fake", ("runner.batch_size_run=3",)))
    learner = PPOLearner(info, ppo_cfg(tmp_path, "mappo", "fake"))
    with pytest.raises(ValueError, match="learner.batch_size is 4"):
        learner.train(random_ppo_batch(info, 2, 0), 0, 0)


# ------------------------------------------------------------------------------ through the Trainer
def test_mappo_rnn_trains_on_fake_env_and_resumes(tmp_path):
    cfg = ppo_cfg(
        tmp_path, "mappo", "fake", ("t_max=200", "env.args.episode_limit=6", "log.histogram_interval=1")
    )
    trainer = Trainer(cfg)
    run_dir = trainer.run()
    assert trainer.train_steps >= 5
    records = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    hists = {r["key"] for r in records if "hist" in r}  # the same route as the Q histograms to MindInsight
    assert hists == {"policy_entropy", "advantage", "value"}
    payload = load(latest(run_dir))
    sd = flatten_arrays(payload["arrays"])
    assert sd["value_norm"][2] > 0  # returns were folded into the normaliser
    fresh = PPOLearner(trainer.info, cfg)
    fresh.load_state_dict(sd)
    for k, v in trainer.learner.actor_weights().items():
        np.testing.assert_array_equal(fresh.actor_weights()[k], v)


def test_ippo_continuous_mlp_trains_on_mpe(tmp_path):
    cfg = ppo_cfg(
        tmp_path,
        "ippo",
        "mpe",
        (
            "t_max=60",
            "agent.name=mlp",
            "env.map_name=simple_spread",
            "env.args.continuous_actions=true",
            "env.args.max_cycles=5",
        ),
    )
    trainer = Trainer(cfg)
    before = trainer.learner.actor_weights()
    trainer.run()
    assert not trainer.info.discrete and trainer.train_steps >= 2
    after = trainer.learner.actor_weights()
    assert not np.allclose(before["log_std"], after["log_std"])
    assert cfg.learner.critic == "local"  # ippo's config: each agent's value net sees its own obs
    critic_in = trainer.learner.nets.critic.trainable_params()[0].shape[1]
    assert critic_in == trainer.info.obs_shape + trainer.info.n_agents * int(cfg.agent.obs_agent_id)


def test_histograms_are_the_trained_batch_distributions(tmp_path):
    learner, info = _fake_learner(tmp_path, "learner.batch_size=4", "learner.num_minibatches=1")
    assert learner.histograms(random_ppo_batch(info, 4, 0)) == {}  # nothing trained yet
    batch = random_ppo_batch(info, 4, 1)
    learner.train(batch, 0, 0)
    hist = learner.histograms(batch)
    assert set(hist) == {"policy_entropy", "advantage", "value"}
    n_transitions = 4 * info.episode_limit * info.n_agents  # no episode ends early in the random batch
    for key, values in hist.items():
        assert values.shape == (n_transitions,) and np.isfinite(values).all(), key
    # a categorical over the available actions: 0 <= entropy <= log(number available), not all equal
    avail = np.asarray(batch["avail_actions"][:, :-1]).reshape(-1, info.n_actions).sum(-1)
    assert (hist["policy_entropy"] >= -1e-6).all()
    assert (hist["policy_entropy"] <= np.log(avail) + 1e-5).all() and hist["policy_entropy"].std() > 0
    assert hist["advantage"].std() > 0  # raw GAE, before normalisation (which would make std exactly 1)
    assert abs(hist["advantage"].std() - 1.0) > 1e-3
