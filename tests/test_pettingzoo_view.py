"""The PettingZoo ParallelEnv view (marl/envs/pettingzoo_view.py) over the fake env and real SMAC maps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from marl.envs.fake import FakeSmacEnv
from marl.envs.pettingzoo_view import MultiAgentParallelEnv, pettingzoo_env, to_pettingzoo

with warnings.catch_warnings():  # pettingzoo.test imports deprecated classic envs on import
    warnings.simplefilter("ignore")
    from pettingzoo.test import parallel_api_test


def _random_actions(env: MultiAgentParallelEnv, obs: dict) -> dict:
    return {a: env.action_space(a).sample(mask=obs[a]["action_mask"]) for a in env.agents}


class _NoStatsFake(FakeSmacEnv):
    """A fake env without SMAC's ``timeouts`` counter (exercises the fallback timeout rule)."""

    def get_stats(self) -> dict:
        return {}


class _ShortCutFake(_NoStatsFake):
    """Cuts episodes after ``cut`` steps and says so only through SMAC's ``info["episode_limit"]``."""

    cut = 2

    def step(self, actions):  # type: ignore[no-untyped-def]
        reward, terminated, info = super().step(actions)
        if not terminated and self.t >= self.cut:
            terminated, info = True, {**info, "episode_limit": True}
        return reward, terminated, info


class _PaintedFake(FakeSmacEnv):
    """A fake env that renders a frame whose first pixel is the step counter."""

    def render(self, mode: str = "rgb_array") -> np.ndarray:
        frame = np.zeros((4, 5, 3), dtype=np.uint8)
        frame[0, 0, 0] = self.t
        return frame


def test_names_spaces_and_reset() -> None:
    base = FakeSmacEnv(n_agents=3, n_enemies=2, seed=0)
    env = to_pettingzoo(base)
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    assert env.agents == []  # until reset
    obs, infos = env.reset(seed=3)
    assert env.agents == env.possible_agents
    info = base.env_info()
    for i, a in enumerate(env.agents):
        assert env.observation_space(a) is env.observation_space(a)
        assert env.action_space(a).n == info.n_actions
        assert env.observation_space(a).contains(obs[a])
        assert obs[a]["observation"].shape == (info.obs_shape,)
        np.testing.assert_array_equal(obs[a]["observation"], base.get_obs()[i])
        np.testing.assert_array_equal(obs[a]["action_mask"], base.get_avail_actions()[i])
        assert infos[a] == {"battle_won": False, "dead_allies": 0, "dead_enemies": 0, "episode_limit": False}
    assert env.state_space.shape == (info.state_shape,)
    np.testing.assert_array_equal(env.state(), base.get_state())
    assert env.state_space.contains(env.state())
    with pytest.raises(ValueError, match="unknown agent"):
        env.action_space("player_0")


@pytest.mark.parametrize("continuing", [False, True])
def test_parallel_api_test_on_fake_env(continuing: bool) -> None:
    base = FakeSmacEnv(n_agents=4, n_enemies=3, enemy_hit_prob=0.6, continuing_episode=continuing)
    env = to_pettingzoo(base)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the API test reports problems as warnings too
        parallel_api_test(env, num_cycles=50)


def test_shared_reward_and_observations_match_the_wrapped_env() -> None:
    kw = {"n_agents": 3, "n_enemies": 2, "enemy_hit_prob": 0.5, "episode_limit": 20}
    twin = FakeSmacEnv(**kw)
    env = to_pettingzoo(FakeSmacEnv(**kw))
    obs, _ = env.reset(seed=7)
    twin.reset(seed=7)
    steps = 0
    while env.agents:
        actions = _random_actions(env, obs)
        joint = [int(actions.get(a, 0)) for a in env.possible_agents]
        acting = list(env.agents)
        obs, rew, term, trunc, infos = env.step(actions)
        r, done, tinfo = twin.step(joint)
        steps += 1
        assert set(rew) == set(acting) and set(obs) == set(acting)
        assert all(v == pytest.approx(r) for v in rew.values())
        for a in acting:
            i = env.possible_agents.index(a)
            np.testing.assert_array_equal(obs[a]["observation"], twin.get_obs()[i])
            assert infos[a]["battle_won"] == tinfo["battle_won"]
        assert (not env.agents) == done
    assert steps >= 1


def test_dead_agents_are_removed_and_their_actions_ignored() -> None:
    # Every living enemy hits a random agent each step and one hit kills: agents die one by one.
    env = to_pettingzoo(
        FakeSmacEnv(n_agents=4, n_enemies=2, enemy_hp=50, agent_hp=1, enemy_hit_prob=1.0, episode_limit=30)
    )
    env.reset(seed=0)
    obs, rew, term, trunc, infos = env.step({a: 1 for a in env.agents})  # everyone stops
    dead = [a for a in term if term[a]]
    assert len(dead) == 2 and not any(trunc.values())
    assert env.agents == [a for a in env.possible_agents if a not in dead]
    for a in dead:
        np.testing.assert_array_equal(obs[a]["action_mask"], [1, 0, 0, 0])
        assert not obs[a]["observation"].any()  # SMAC: a dead agent sees zeros
        assert set(infos[a]) == {"battle_won", "dead_allies", "dead_enemies", "episode_limit"}
    assert infos[dead[0]]["dead_allies"] == 2
    # as TorchRL does: an action for every possible agent; the removed ones' (even unavailable) are ignored
    obs, rew, term, trunc, _ = env.step({**{a: 1 for a in env.agents}, dead[0]: 3, dead[1]: 99})
    assert set(rew) == {a for a in env.possible_agents if a not in dead}
    assert all(term.values())  # the last two agents die: a loss is a termination
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


@pytest.mark.parametrize("base_cls", [FakeSmacEnv, _NoStatsFake])
@pytest.mark.parametrize("continuing", [False, True])
def test_time_limit_is_a_truncation(base_cls: type, continuing: bool) -> None:
    env = to_pettingzoo(
        base_cls(
            n_agents=2,
            n_enemies=1,
            enemy_hp=100,
            enemy_hit_prob=0.0,
            episode_limit=3,
            continuing_episode=continuing,
        )
    )
    env.reset(seed=0)
    for t in range(3):
        _, _, term, trunc, _ = env.step({a: 1 for a in env.agents})
        assert not any(term.values())
        assert all(trunc.values()) == (t == 2) and any(trunc.values()) == (t == 2)
    assert env.agents == []


def test_info_episode_limit_is_a_truncation_before_the_declared_limit() -> None:
    base = _ShortCutFake(n_agents=2, n_enemies=1, enemy_hp=100, enemy_hit_prob=0.0, episode_limit=9)
    env = to_pettingzoo(base)
    env.reset(seed=0)
    env.step({a: 1 for a in env.agents})
    _, _, term, trunc, infos = env.step({a: 1 for a in env.agents})
    assert trunc == {"agent_0": True, "agent_1": True} and not any(term.values())
    assert infos["agent_0"]["episode_limit"] and env.agents == []


@pytest.mark.parametrize("base_cls", [FakeSmacEnv, _NoStatsFake])
def test_win_or_loss_on_the_last_step_is_a_termination(base_cls: type) -> None:
    # win: one enemy with one health point, killed on the only step
    env = to_pettingzoo(base_cls(n_agents=2, n_enemies=1, enemy_hp=1, enemy_hit_prob=0.0, episode_limit=1))
    obs, _ = env.reset(seed=0)
    attacker = next(a for a in env.agents if obs[a]["action_mask"][2])
    _, _, term, trunc, infos = env.step({a: 2 if a == attacker else 1 for a in env.agents})
    assert all(term.values()) and not any(trunc.values()) and infos[attacker]["battle_won"]
    # loss: the only agent is killed on the only step
    env = to_pettingzoo(
        base_cls(n_agents=1, n_enemies=1, enemy_hp=9, agent_hp=1, enemy_hit_prob=1.0, episode_limit=1)
    )
    env.reset(seed=0)
    _, _, term, trunc, infos = env.step({"agent_0": 1})
    assert term == {"agent_0": True} and trunc == {"agent_0": False} and not infos["agent_0"]["battle_won"]


def test_bad_actions_fail_with_clear_errors() -> None:
    env = to_pettingzoo(FakeSmacEnv(n_agents=2, n_enemies=2, seed=0))
    obs, _ = env.reset(seed=0)
    masked = int(np.flatnonzero(obs["agent_0"]["action_mask"] == 0)[0])
    with pytest.raises(ValueError, match=rf"agent_0: action {masked} is not available"):
        env.step({"agent_0": masked, "agent_1": 1})
    with pytest.raises(ValueError, match="not available"):
        env.step({"agent_0": 99, "agent_1": 1})
    with pytest.raises(ValueError, match=r"no action for live agents \['agent_1'\]"):
        env.step({"agent_0": 1})
    with pytest.raises(ValueError, match="unknown agent"):
        env.step({"agent_0": 1, "agent_1": 1, "agent_7": 0})
    with pytest.raises(ValueError, match="one integer"):
        env.step({"agent_0": 1.5, "agent_1": 1})
    with pytest.raises(TypeError, match="dict"):
        env.step([1, 1])
    _, rew, _, _, _ = env.step({"agent_0": np.int64(1), "agent_1": np.array([1])})  # integer forms are fine
    assert set(rew) == {"agent_0", "agent_1"}
    with pytest.raises(RuntimeError, match="reset"):
        to_pettingzoo(FakeSmacEnv()).step({})


def test_constructor_checks_and_render() -> None:
    with pytest.raises(TypeError, match="MultiAgentEnv"):
        to_pettingzoo(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="render_mode"):
        to_pettingzoo(FakeSmacEnv(), render_mode="ansi")
    with pytest.raises(ValueError, match="unavailable_action"):
        to_pettingzoo(FakeSmacEnv(), unavailable_action="ignore")
    for bad in (0, 11, 2.5, True):
        with pytest.raises(ValueError, match=r"max_cycles must be an int in \[1, 10\]"):
            to_pettingzoo(FakeSmacEnv(episode_limit=10), max_cycles=bad)
    with pytest.raises(ValueError, match="noop_action"):
        to_pettingzoo(FakeSmacEnv(), noop_action=9)
    env = to_pettingzoo(_PaintedFake(seed=0), render_mode="rgb_array")
    env.reset(seed=0)
    env.step({a: 1 for a in env.agents})
    frame = env.render()
    assert frame.shape == (4, 5, 3) and frame[0, 0, 0] == 1
    quiet = to_pettingzoo(_PaintedFake(seed=0))
    quiet.reset()
    with pytest.warns(UserWarning, match="render_mode=None"):
        assert quiet.render() is None
    env.close()


def test_reset_seed_reproduces_an_episode() -> None:
    def rollout(seed: int) -> list[float]:
        env = to_pettingzoo(FakeSmacEnv(n_agents=3, n_enemies=2, enemy_hit_prob=0.5, episode_limit=15))
        obs, _ = env.reset(seed=seed)
        rewards = []
        while env.agents:
            obs, rew, *_ = env.step(_random_actions(env, obs))
            rewards.append(next(iter(rew.values())))
        return rewards

    assert rollout(11) == rollout(11)


# -- the embedded SMAC engine -------------------------------------------------------------------------
@pytest.mark.parametrize("map_name", ["3m", "2s3z"])
def test_parallel_api_test_on_smac_maps(map_name: str) -> None:
    env = pettingzoo_env(map_name, seed=0)
    assert env.num_agents == 0 and env.max_num_agents == env.env.n_agents
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=200)
    env.close()


def test_smac_episode_rewards_state_and_render() -> None:
    env = pettingzoo_env("3m", seed=0, render_mode="rgb_array")
    twin = pettingzoo_env("3m", seed=0).env
    obs, _ = env.reset(seed=5)
    twin.reset(seed=5)
    steps = 0
    while env.agents:
        actions = _random_actions(env, obs)
        obs, rew, term, trunc, infos = env.step(actions)
        r, done, tinfo = twin.step([int(actions.get(a, 0)) for a in env.possible_agents])
        steps += 1
        assert all(v == pytest.approx(r) for v in rew.values())
        np.testing.assert_allclose(env.state(), twin.get_state())
        assert infos[next(iter(infos))]["dead_allies"] == tinfo["dead_allies"]
    assert done and steps <= env.env_info.episode_limit
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8


def test_smac_time_limit_is_a_truncation() -> None:
    base = pettingzoo_env("3m", seed=0).env
    base.episode_limit = 2  # a short limit: the armies cannot meet in 2 steps
    env = to_pettingzoo(base)
    env.reset(seed=0)
    _, _, term, trunc, _ = env.step({a: 1 for a in env.agents})
    assert not any(term.values()) and not any(trunc.values())
    _, _, term, trunc, infos = env.step({a: 1 for a in env.agents})
    assert not any(term.values()) and all(trunc.values()) and len(trunc) == 3
    assert not infos["agent_0"]["battle_won"]
