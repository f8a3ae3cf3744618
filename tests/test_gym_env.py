"""Gymnasium adapter: sizes from EnvInfo, masks, action scaling, episode ends (termination vs truncation)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from marl.buffers import Scheme
from marl.envs.gym import GymEnv
from marl.registry import build
from marl.runners import RolloutStats  # noqa: F401  (the runner package registers runners)


class _FirstAction:
    """A controller that always plays action 0 (discrete) or a fixed vector (continuous)."""

    def __init__(self, info, value=None):  # noqa: ANN001
        self.info, self.value, self.rng = info, value, np.random.default_rng(0)

    def init_hidden(self, batch_size: int) -> None:
        pass

    def select_actions(self, obs_BNO, avail_BNA, t_env, test_mode=False, rows=None):  # noqa: ANN001, ANN201
        m = len(obs_BNO) if rows is None else len(rows)
        if self.info.discrete:
            return np.zeros((m, self.info.n_agents), np.int64)
        return np.full((m, self.info.n_agents, self.info.n_actions), self.value, np.float32)


def test_cartpole_info_obs_and_masks():
    env = build("env", "gym", map_name="CartPole-v1", seed=3)
    info = env.env_info()
    assert (info.n_agents, info.n_actions, info.obs_shape, info.state_shape) == (1, 2, 4, 4)
    assert info.episode_limit == 500 and info.discrete
    obs, state = env.reset()
    ref, _ = gym.make("CartPole-v1").reset(seed=3)  # the adapter's first reset uses the constructor seed
    np.testing.assert_allclose(obs[0], ref.astype(np.float32))
    np.testing.assert_array_equal(state, obs[0])
    assert obs[0].dtype == np.float32 and env.get_avail_actions() == [[1, 1]]
    env.close()


def test_termination_is_a_task_end_and_truncation_a_time_limit_cut():
    env = GymEnv("CartPole-v1", seed=0)
    env.reset()
    steps, done, info = 0, False, {}
    while not done:  # always pushing left makes the pole fall long before 500 steps
        _, done, info = env.step([0])
        steps += 1
    assert steps < 100 and "episode_limit" not in info
    short = GymEnv("CartPole-v1", seed=0, max_episode_steps=5)
    assert short.env_info().episode_limit == 5
    short.reset()
    flags = [short.step([t % 2]) for t in range(5)]
    assert [d for _, d, _ in flags] == [False] * 4 + [True]
    assert flags[-1][2] == {"episode_limit": True}


def test_pendulum_actions_scaled_to_env_bounds():
    env = GymEnv("Pendulum-v1", seed=1)
    info = env.env_info()
    assert not info.discrete and info.n_actions == 1 and (info.action_low, info.action_high) == (-1.0, 1.0)
    assert info.episode_limit == 200
    np.testing.assert_allclose(env.scale_action(np.array([-1.0, 0.0, 1.0, 3.0])), [-2.0, 0.0, 2.0, 2.0])
    # the reward of Pendulum depends on the applied torque: compare with the raw env given the scaled value
    raw = gym.make("Pendulum-v1")
    raw.reset(seed=1)
    env.reset()
    _, r_raw, *_ = raw.step(np.array([1.0], np.float32))  # = 0.5 in [-1, 1]
    r, done, _ = env.step(np.array([0.5]))
    assert r == pytest.approx(r_raw) and not done
    with pytest.raises(ValueError, match="expected 1 action values"):
        env.step(np.zeros(2))


def test_unknown_id_suggests_close_ones():
    with pytest.raises(KeyError, match="CartPole-v1"):
        build("env", "gym", map_name="CartPole-v9")


def test_runner_stores_truncation_as_not_terminated():
    env_fn = lambda row: GymEnv("Pendulum-v1", seed=row, max_episode_steps=7)  # noqa: E731
    info = env_fn(0).env_info()
    runner = build(
        "runner",
        "parallel",
        env_fn=env_fn,
        scheme=Scheme(info),
        controller=_FirstAction(info, 0.25),
        batch_size_run=2,
    )
    batch, stats = runner.run(t_env=0)
    assert stats.lengths == [7, 7]
    assert batch["terminated"].sum() == 0  # time-limit cuts bootstrap
    np.testing.assert_allclose(batch["actions"][:, :7], 0.25)
    assert batch["filled"][:, :, 0].sum(1).tolist() == [8, 8]
    runner.close()
