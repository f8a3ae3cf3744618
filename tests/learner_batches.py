"""Learner-test helpers (tests/ is on ``sys.path`` under pytest): random padded episode batches and small
learner configs for the Q-learner family and PPO, shared by the learner test files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marl.buffers.episode import EpisodeBatch, Scheme
from marl.config import load_config
from marl.config.schema import Config, LearnerConfig, MixerConfig
from marl.envs.base import EnvInfo
from marl.learners.ppo_learner import PPOLearner
from marl.trainer import with_overrides

# ------------------------------------------------ Q-learner family (test_q_learner.py)
INFO = EnvInfo(n_agents=3, n_actions=5, obs_shape=6, state_shape=8, episode_limit=5)


def make_batch(
    seed: int,
    b: int = 4,
    lengths: list[int] | None = None,
    timeouts: list[bool] | None = None,
    info: EnvInfo = INFO,
) -> EpisodeBatch:
    """Random padded episodes; an episode shorter than the limit terminates unless told it timed out."""
    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(info), b)
    n, a = info.n_agents, info.n_actions
    for row in range(b):
        ep_len = lengths[row] if lengths else int(rng.integers(2, info.episode_limit + 1))
        timeout = timeouts[row] if timeouts else ep_len == info.episode_limit
        for t in range(ep_len + 1):
            avail = (rng.random((n, a)) < 0.6).astype(np.int32)
            avail[:, 0] = 1
            vals = {
                "obs": rng.normal(size=(n, info.obs_shape)),
                "state": rng.normal(size=info.state_shape),
                "avail_actions": avail,
            }
            if t < ep_len:
                act = np.array([rng.choice(np.flatnonzero(m)) for m in avail])[:, None]
                done = t == ep_len - 1 and not timeout
                vals.update(actions=act, reward=[rng.normal()], terminated=[float(done)])
            eb.update(vals, t, rows=np.array([row]))
    return eb


def cfg(**learner: object) -> Config:
    mixer = learner.pop("mixer", "qmix")
    base = {"use_jit": False, "lr": 1e-3}
    base.update(learner)
    return Config(learner=LearnerConfig(**base), mixer=MixerConfig(name=mixer, embed_dim=8, hypernet_dim=16))


# ------------------------------------------------ length groups (test_length_groups.py)
GROUPS_INFO = EnvInfo(n_agents=3, n_actions=5, obs_shape=6, state_shape=8, episode_limit=20)
# two timed-out episodes (21 slots) among short ones: the shape of an exploring QMIX batch
LENGTHS = [3, 20, 2, 4, 5, 6, 3, 2, 20, 4, 5, 3, 2, 2, 7, 3]


def filled_mask(lengths: list[int], t_slots: int = 21) -> np.ndarray:
    filled = np.zeros((len(lengths), t_slots, 1), np.float32)
    for row, n in enumerate(lengths):
        filled[row, : n + 1] = 1.0
    return filled


# ------------------------------------------------ PPO (test_ppo.py)
# tiny actor-critic runs (PG, PPO): small nets and batches, no logging or checkpoints
AC_TINY = [
    "learner.batch_size=4",
    "runner.batch_size_run=2",
    "log.log_interval=50",
    "log.test_interval=100",
    "log.test_nepisode=2",
    "log.mindinsight=false",
    "checkpoint.save_interval=0",
    "agent.hidden_dim=16",
    "learner.critic_hidden_dim=16",
]
PPO_TINY = [*AC_TINY, "learner.ppo_epochs=2", "learner.num_minibatches=2"]


def ppo_cfg(tmp_path: Path, alg: str, env: str, extra: tuple[str, ...] = ()):  # noqa: ANN202
    return load_config(alg, env=env, overrides=[*PPO_TINY, f"results_dir={tmp_path}", "run_name=r", *extra])


def random_ppo_batch(info: EnvInfo, b: int, seed: int) -> EpisodeBatch:
    rng = np.random.default_rng(seed)
    batch = EpisodeBatch(Scheme(info), b)
    for t in range(info.episode_limit + 1):
        avail = (rng.random((b, info.n_agents, info.n_actions)) < 0.6).astype(np.int32)
        avail[..., 0] = 1
        vals = {
            "obs": rng.normal(size=(b, info.n_agents, info.obs_shape)),
            "state": rng.normal(size=(b, info.state_shape)),
            "avail_actions": avail,
        }
        if t < info.episode_limit:
            if info.discrete:
                act = np.array([[rng.choice(np.flatnonzero(r)) for r in env] for env in avail])
            else:
                act = rng.normal(size=(b, info.n_agents, info.n_actions))
            vals.update(actions=act, reward=rng.normal(size=(b, 1)), terminated=np.zeros((b, 1)))
        batch.update(vals, t)
    return batch


def cut_episodes(batch: EpisodeBatch, lengths: list[int], limit: int = 0) -> EpisodeBatch:
    """``batch`` with episode ``row`` ending after ``lengths[row]`` steps: terminated, unless it reaches
    ``limit`` (a timeout)."""
    for row, length in enumerate(lengths):
        for key in batch.data:
            batch.data[key][row, length + 1 :] = 0
        batch.data["terminated"][row, length - 1] = float(length != limit)
    return batch


def assert_same_update(a: PPOLearner, b: PPOLearner, batch: EpisodeBatch) -> None:
    """``b``, from ``a``'s weights, trains on ``batch`` to ``a``'s statistics and state."""
    b.load_state_dict(a.state_dict())
    out_a, out_b = a.train(batch, 0, 0), b.train(batch, 0, 0)
    for k, v in out_a.items():
        assert out_b[k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
    sd_b = b.state_dict()
    for k, v in a.state_dict().items():
        np.testing.assert_allclose(sd_b[k], v, rtol=1e-4, atol=1e-6, err_msg=k)


def ppo_pair(tmp_path, alg: str, **split: int) -> tuple:  # noqa: ANN001
    """A PPO learner on one padded batch, one with the learner settings ``split``, and a batch of 16 episodes
    of which two run to the limit (one minibatch per epoch, the SMAC setting)."""
    info = EnvInfo(n_agents=3, n_actions=4, obs_shape=6, state_shape=7, episode_limit=12)
    over = (
        "env.args.episode_limit=12",
        "use_jit=false",
        "learner.batch_size=16",
        "learner.num_minibatches=1",
    )
    cfg = ppo_cfg(tmp_path, alg, "fake", over)
    lengths = [2, 12, 3, 2, 4, 3, 2, 12, 3, 2, 3, 4, 2, 3, 2, 3]
    batch = cut_episodes(random_ppo_batch(info, 16, 5), lengths, limit=12)
    one = PPOLearner(info, with_overrides(cfg, learner={"time_bucket": 4, "length_groups": 1}))
    return one, PPOLearner(info, with_overrides(cfg, learner={"time_bucket": 4, **split})), batch
