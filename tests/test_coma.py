"""COMA (Foerster et al. 2018): the critic rows, the advantage against the counterfactual baseline
recomputed in NumPy one replaced action at a time, the TD(lambda) targets and the loss, the target schedule,
checkpoints, bad settings and a short run on the fake env."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from learner_batches import INFO, make_batch  # tests/ is on sys.path under pytest

from marl.config import load_config
from marl.controllers.policy_controller import floored_policy
from marl.envs.base import EnvInfo
from marl.learners.coma_learner import (
    COMALearner,
    coma_advantages,
    coma_advantages_reference,
    coma_critic_inputs,
)
from marl.learners.targets import td_lambda_targets_reference
from marl.trainer import Trainer
from marl.utils.ms import Tensor, ms, nn, setup

setup(1, seed=0)
SMALL = [
    "agent.hidden_dim=8",
    "learner.critic_hidden_dim=8",
    "learner.batch_size=4",
    "runner.batch_size_run=2",
]


def _learner(*extra: str) -> COMALearner:
    cfg = load_config("coma", env="fake", overrides=[*SMALL, "learner.use_jit=false", *extra])
    return COMALearner(INFO, cfg)


def _mlp(cell: nn.Cell, x: np.ndarray) -> np.ndarray:
    """The critic's Dense-ReLU-Dense-ReLU-Dense in NumPy from its parameters."""
    dense = [cell.fc1, cell.fc2, cell.fc3]
    for k, d in enumerate(dense):
        x = x @ d.weight.asnumpy().T + d.bias.asnumpy()
        x = np.maximum(x, 0.0) if k < 2 else x
    return x


def _row(state: np.ndarray, obs: np.ndarray, joint: np.ndarray, last: np.ndarray, k: int) -> np.ndarray:
    """Agent ``k``'s critic row written out: state, own obs, others' actions (own zeroed), last joint, id."""
    n, a = joint.shape
    others = joint.copy()
    others[k] = 0.0
    return np.concatenate([state, obs[k], others.reshape(n * a), last.reshape(n * a), np.eye(n)[k]])


def test_critic_rows_match_the_written_out_row() -> None:
    rng = np.random.default_rng(0)
    b, t, n, a = 2, 3, 3, 4
    state, obs = rng.normal(size=(b, t, 5)), rng.normal(size=(b, t, n, 6))
    onehot = np.eye(a)[rng.integers(0, a, size=(b, t, n))]
    rows = coma_critic_inputs(state, obs, onehot)
    for i in range(b):
        for j in range(t):
            last = onehot[i, j - 1] if j > 0 else np.zeros((n, a))
            for k in range(n):
                np.testing.assert_allclose(rows[i, j, k], _row(state[i, j], obs[i, j], onehot[i, j], last, k))


def test_fast_advantages_equal_the_loop() -> None:
    rng = np.random.default_rng(1)
    q = rng.normal(size=(3, 4, 2, 5))
    pi = rng.dirichlet(np.ones(5), size=(3, 4, 2))
    actions = rng.integers(0, 5, size=(3, 4, 2, 1))
    np.testing.assert_allclose(coma_advantages(pi, q, actions), coma_advantages_reference(pi, q, actions))


@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_advantage_is_q_minus_the_counterfactual_baseline_and_loss_matches(eps: float) -> None:
    """With ``eps`` the policy is pymarl's floored one, ``(1 - eps) pi + eps / |available|``, in the baseline
    and in log pi."""
    gamma, lam = 0.99, 0.8
    learner = _learner(f"learner.gamma={gamma}", f"learner.td_lambda={lam}", "learner.entropy_coef=0.05")
    nets = learner.nets
    for p in nets.target_critic.get_parameters():
        p.set_data(p + 0.05)  # the target critic differs from the critic
    batch = make_batch(5, b=4)
    adv, targets, arr = learner.advantages_and_targets(batch, eps)
    t = arr["actor_in"].shape[1]
    state, obs = np.asarray(batch["state"])[:, :t], np.asarray(batch["obs"])[:, :t]
    acts, avail = np.asarray(batch["actions"])[:, :t, :, 0], np.asarray(batch["avail_actions"])[:, :t]
    onehot = np.asarray(batch["actions_onehot"])[:, :t]  # zeros where no action was taken (final, padding)
    mask = arr["mask"]
    n, a = INFO.n_agents, INFO.n_actions
    # the policy, one slot at a time through the agent's own step
    h = Tensor(np.zeros((4 * n, 8), np.float32))
    logits = []
    for j in range(t):
        out, h = nets.actor.agent(Tensor(arr["actor_in"][:, j].reshape(4 * n, -1)), h)
        logits.append(out.asnumpy().reshape(4, n, a))
    z = np.where(avail > 0, np.stack(logits, 1), -1e10)  # all-unavailable padding slots: uniform, masked
    pi = np.exp(z - z.max(axis=3, keepdims=True))
    pi /= pi.sum(axis=3, keepdims=True)
    pi = (1 - eps) * pi + eps * avail / np.maximum(avail.sum(axis=3, keepdims=True), 1)
    want_adv, q_taken = np.zeros((4, t - 1, n)), np.zeros((4, t - 1, n))
    target_taken = np.zeros((4, t, n))
    for i in range(4):
        for j in range(t):
            joint, last = onehot[i, j], onehot[i, j - 1] if j else np.zeros((n, a))
            for k in range(n):
                target_taken[i, j, k] = _mlp(
                    nets.target_critic, _row(state[i, j], obs[i, j], joint, last, k)
                )[acts[i, j, k]]
                if j == t - 1:
                    continue
                # the counterfactual: agent k's action replaced by every u', the others' kept
                baseline = 0.0
                for u in range(a):
                    cf = joint.copy()
                    cf[k] = np.eye(a)[u]
                    baseline += (
                        pi[i, j, k, u] * _mlp(nets.critic, _row(state[i, j], obs[i, j], cf, last, k))[u]
                    )
                q_taken[i, j, k] = _mlp(nets.critic, _row(state[i, j], obs[i, j], joint, last, k))[
                    acts[i, j, k]
                ]
                want_adv[i, j, k] = (q_taken[i, j, k] - baseline) * mask[i, j, 0]
    np.testing.assert_allclose(adv, want_adv, rtol=1e-4, atol=1e-5)
    want_targets = td_lambda_targets_reference(
        arr["reward"], arr["terminated"], mask, target_taken, gamma, lam
    )
    np.testing.assert_allclose(targets, want_targets, rtol=1e-4, atol=1e-5)
    # the loss: -A log pi + value_coef (Q - y)^2 - entropy_coef H, masked means over agents and transitions
    ins = [Tensor(arr[k]) for k in ("actor_in", "critic_in", "avail", "actions")]
    loss, stats = learner.loss_fn(*ins, Tensor(adv), Tensor(targets), Tensor(mask), Tensor(eps, ms.float32))
    m = np.broadcast_to(mask, adv.shape)
    logp_taken = np.log(np.take_along_axis(pi[:, :-1], acts[:, :-1, :, None], axis=3)[..., 0])
    ent = -(pi * np.log(np.where(pi > 0, pi, 1.0)))[:, :-1].sum(axis=3)
    nm = m.sum()
    policy = -(logp_taken * adv * m).sum() / nm
    critic = (((q_taken - targets) * m) ** 2).sum() / nm
    entropy = (ent * m).sum() / nm
    np.testing.assert_allclose(stats.asnumpy(), [policy, critic, entropy], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(loss.asnumpy()), policy + critic - 0.05 * entropy, rtol=1e-4)


def test_train_moves_actor_and_critic_copies_target_on_schedule_and_round_trips() -> None:
    learner = COMALearner(
        INFO, load_config("coma", env="fake", overrides=[*SMALL, "learner.target_update_interval=6"])
    )
    sd0 = learner.state_dict()
    batch = make_batch(6, b=4, lengths=[5, 2, 3, 4])  # 5 live slots: one critic step each
    learner.train(batch, 0, 0)
    sd1 = learner.state_dict()
    for prefix in ("nets/actor.", "nets/critic."):
        assert any(not np.array_equal(sd0[k], sd1[k]) for k in sd1 if k.startswith(prefix)), prefix
    target = [k for k in sd1 if k.startswith("nets/target_critic.")]
    assert target and all(np.array_equal(sd0[k], sd1[k]) for k in target)  # 5 < 6 critic steps
    stats = learner.train(batch, 0, 0)  # 10 >= 6: copied
    assert learner.critic_steps == 10 and learner.last_target_update == 10 and np.isfinite(stats["loss"])
    sd2 = learner.state_dict()
    for k in target:
        np.testing.assert_array_equal(sd2[k], sd2[k.replace("target_critic", "critic")])
    fresh = COMALearner(INFO, load_config("coma", env="fake", overrides=SMALL))
    fresh.load_state_dict(sd2)
    assert fresh.critic_steps == 10
    for k, v in learner.actor_weights().items():
        np.testing.assert_array_equal(fresh.actor_weights()[k], v)


def test_bad_settings_fail_clearly() -> None:
    cont = EnvInfo(n_agents=2, n_actions=2, obs_shape=3, state_shape=4, episode_limit=5, discrete=False)
    with pytest.raises(ValueError, match="coma needs discrete actions"):
        COMALearner(cont, load_config("coma", env="fake", overrides=SMALL))
    cfg = load_config("coma", env="fake", overrides=SMALL)
    bad = replace(cfg, learner=replace(cfg.learner, target_update_interval=0))  # past the config checks
    with pytest.raises(ValueError, match="target_update_interval >= 1"):
        COMALearner(INFO, bad)


def test_config_and_a_short_run_on_the_fake_env(tmp_path: Path) -> None:
    quiet = ["log.mindinsight=false", "log.progress=false", "log.test_interval=100", "log.test_nepisode=2"]
    overrides = [
        *SMALL,
        *quiet,
        "t_max=150",
        "learner.use_jit=false",
        "checkpoint.save_interval=0",
        f"results_dir={tmp_path}",
    ]
    cfg = load_config("coma", env="fake", overrides=overrides)
    assert cfg.learner.name == "coma" and cfg.learner.td_lambda == 0.8
    trainer = Trainer(cfg)
    trainer.run()
    assert trainer.train_steps >= 3


def test_the_controller_samples_the_floored_policy_and_anneals_its_epsilon() -> None:
    learner = _learner()
    ctrl = learner.make_controller(seed=0)
    assert ctrl.epsilon(0) == pytest.approx(0.5) and ctrl.epsilon(50_000) == pytest.approx(0.255)
    assert ctrl.epsilon(10**7) == pytest.approx(0.01)  # coma.yaml: 0.5 -> 0.01 over 100k steps
    n, a = INFO.n_agents, INFO.n_actions
    logits = np.zeros((1, n, a), np.float32)
    logits[..., 0] = 6.0  # the policy all but always picks action 0
    avail = np.ones((1, n, a), np.float32)
    avail[0, 0, -1] = 0.0  # agent 0 cannot take the last action
    want = floored_policy(logits, avail > 0, 0.5)
    np.testing.assert_allclose(want.sum(axis=-1), 1.0, rtol=1e-6)
    p1 = np.exp(-6.0) / (1.0 + (a - 2) * np.exp(-6.0))  # softmax of a 0 logit beside one 6 over a - 1 actions
    assert want[0, 0, -1] == 0.0 and want[0, 0, 1] == pytest.approx(0.5 * p1 + 0.5 / (a - 1))
    ctrl.forward = lambda obs, rows: logits  # the sampler alone, over fixed logits
    draws = np.stack([ctrl.select_actions(np.zeros((1, n, INFO.obs_shape)), avail, 0) for _ in range(4000)])
    freq = np.stack([(draws[:, 0, k, None] == np.arange(a)).mean(axis=0) for k in range(n)])
    np.testing.assert_allclose(freq, want[0], atol=0.03)
    greedy = ctrl.select_actions(np.zeros((1, n, INFO.obs_shape)), avail, 0, test_mode=True)
    assert (greedy == 0).all()  # no floor when testing
