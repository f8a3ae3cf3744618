"""The SMAC maps as Gymnasium multi-agent envs, driven as EPyMARL's gymma / SMAClite wrappers drive them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import flatdim
from gymnasium.wrappers import TimeLimit
from shared import REPRESENTATIVE_MAPS, on_every_map  # tests/ is on sys.path under pytest

from marl.envs.smac import StarCraft2Env

KEY = "marl.envs.smac.gym_view:marl/{}-v0"  # Gymnasium imports the module named before ':'


def _registered_with_smac_sizes(map_name: str) -> None:
    env = gym.make(KEY.format(map_name), seed=0)
    smac = StarCraft2Env(map_name, seed=0).env_info()
    u = env.unwrapped
    assert (u.n_agents, u.obs_size, u.state_size) == (smac.n_agents, smac.obs_shape, smac.state_shape)
    assert len(env.action_space) == smac.n_agents and flatdim(env.action_space[0]) == smac.n_actions
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    env.close()


@pytest.mark.parametrize("map_name", REPRESENTATIVE_MAPS)
def test_map_is_registered_with_smac_sizes(map_name: str) -> None:
    _registered_with_smac_sizes(map_name)


@pytest.mark.conformance
def test_every_map_is_registered_with_smac_sizes() -> None:
    on_every_map(_registered_with_smac_sizes)


def test_an_epymarl_style_loop_runs_whole_episodes_with_masks_and_state() -> None:
    """What EPyMARL's SMAClite wrapper calls: make with seed and kwargs, TimeLimit, unwrapped accessors."""
    env = TimeLimit(gym.make(KEY.format("3m"), seed=3), max_episode_steps=60)
    u = env.unwrapped
    longest = max(env.action_space, key=lambda x: x.n)
    rng = np.random.default_rng(0)
    twin = StarCraft2Env("3m", seed=3)
    env.reset(seed=3)
    twin.reset(seed=3)
    episodes, steps = 0, 0
    while episodes < 2:
        avail = np.asarray(u.get_avail_actions())
        assert avail.shape == (u.n_agents, longest.n)
        np.testing.assert_array_equal(u.get_state(), twin.get_state())
        acts = [int(rng.choice(np.flatnonzero(row))) for row in avail]
        obs, reward, terminated, truncated, info = env.step(acts)
        t_reward, t_done, t_info = twin.step(acts)
        steps += 1
        assert reward == pytest.approx(t_reward) and (terminated or truncated) == t_done
        np.testing.assert_array_equal(np.stack(obs), np.stack(twin.get_obs()))
        assert u.get_state().shape == (u.state_size,)
        if terminated or truncated:
            assert terminated != truncated and info["battle_won"] == t_info["battle_won"]
            episodes += 1
            env.reset()
            twin.reset()
    assert steps > 2


def test_step_limit_is_a_truncation_and_noop_mode_for_maskless_tools() -> None:
    env = gym.make(KEY.format("3m"), seed=0, unavailable_action="noop")  # as under EPyMARL's gymma
    env.unwrapped.smac.episode_limit = 2  # a short limit: the armies cannot meet in 2 steps
    env.reset(seed=0)
    for expect_cut in (False, True):
        obs, reward, terminated, truncated, info = env.step([0, 0, 0])  # unavailable for the living: "stop"
        assert (terminated, truncated) == (False, expect_cut)
    twin = StarCraft2Env("3m", seed=0)
    twin.reset(seed=0)
    twin.step([1, 1, 1])
    twin.step([1, 1, 1])
    np.testing.assert_array_equal(env.unwrapped.get_state(), twin.get_state())  # the no-ops were "stop"s
    strict = gym.make(KEY.format("3m"), seed=0)
    strict.reset(seed=0)
    with pytest.raises(ValueError, match="no-op"):
        strict.step([0, 0, 0])
    with pytest.raises(ValueError, match="unavailable_action must be one of"):
        gym.make(KEY.format("3m"), unavailable_action="skip")


def test_infos_hold_numbers_that_add_up_as_epymarl_sums_them() -> None:
    """EPyMARL's runners add each episode's last info, key by key, into their statistics (0 + value)."""
    env = TimeLimit(gym.make(KEY.format("3m"), seed=1), max_episode_steps=60)
    u = env.unwrapped
    rng = np.random.default_rng(1)
    _, info = env.reset(seed=1)
    keys = set(info)
    assert keys == {"battle_won", "dead_allies", "dead_enemies"}
    stats: dict[str, float] = {}
    episodes = 0
    while episodes < 3:
        acts = [int(rng.choice(np.flatnonzero(row))) for row in u.get_avail_actions()]
        _, _, terminated, truncated, info = env.step(acts)
        assert keys <= set(info) and all(isinstance(v, (bool, int, float)) for v in info.values())
        if terminated or truncated:
            stats = {k: stats.get(k, 0) + info.get(k, 0) for k in set(stats) | set(info)}
            episodes += 1
            env.reset()
    smac = u.get_stats()
    assert stats["battle_won"] == smac["battles_won"] and smac["battles_game"] == 3
