"""MPE adapter conformance: sizes from EnvInfo, masks, padding, teams, rewards and episode ends."""

from __future__ import annotations

import numpy as np
import pytest

from marl import registry
from marl.buffers import Scheme
from marl.envs.mpe import SCENARIOS, MPEEnv, scenario_name

ALL = sorted(SCENARIOS)


def _random_actions(env: MPEEnv, rng: np.random.Generator) -> np.ndarray:
    info = env.env_info()
    if not info.discrete:
        return rng.uniform(-0.5, 1.5, size=(info.n_agents, info.n_actions)).astype(np.float32)
    avail = np.asarray(env.get_avail_actions())
    return np.array([rng.choice(np.flatnonzero(row)) for row in avail])


@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("scenario", ALL)
def test_conformance_sizes_masks_and_episode_end(scenario, continuous):
    env = registry.build("env", "mpe", map_name=scenario, seed=3, continuous_actions=continuous, max_cycles=7)
    info = env.env_info()
    assert info.episode_limit == 7 and info.discrete is (not continuous)
    rng = np.random.default_rng(0)
    for _ in range(2):  # two episodes: reset works after a finished one
        obs, state = env.reset()
        assert len(obs) == info.n_agents and all(o.shape == (info.obs_shape,) for o in obs)
        assert state.shape == (info.state_shape,) and state.dtype == np.float32
        for t in range(info.episode_limit):
            avail = np.asarray(env.get_avail_actions())
            assert avail.shape == (info.n_agents, info.n_actions)
            assert avail.any(axis=1).all()
            if continuous:
                assert avail.all()
            reward, terminated, step_info = env.step(_random_actions(env, rng))
            assert np.isfinite(reward) and step_info["battle_won"] is False
            assert np.asarray(env.get_obs()).shape == (info.n_agents, info.obs_shape)
            assert env.get_state().shape == (info.state_shape,)
            last = t == info.episode_limit - 1
            assert terminated is last  # MPE never ends early; the cut is at max_cycles
            assert step_info.get("episode_limit", False) is last  # ... stored as a time-limit cut
    env.close()


def test_heterogeneous_agents_are_padded_and_masked():
    env = MPEEnv("simple_speaker_listener", seed=0)  # speaker: obs 3, 3 actions; listener: obs 11, 5
    info = env.env_info()
    assert (info.n_agents, info.obs_shape, info.n_actions) == (2, 12, 5)
    avail = np.asarray(env.get_avail_actions())
    np.testing.assert_array_equal(avail, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    speaker, listener = env.get_obs()
    raw = env._obs  # the PettingZoo observations behind them
    np.testing.assert_array_equal(speaker[:3], raw["speaker_0"])
    assert not speaker[3:11].any() and speaker[11] == 1.0  # zero padding, then the mask feature
    np.testing.assert_array_equal(listener[:11], raw["listener_0"])
    assert listener[11] == 0.0
    with pytest.raises(ValueError, match="not in"):
        env.step([3, 0])  # the speaker has only 3 actions
    cont = MPEEnv("simple_speaker_listener", seed=0, continuous_actions=True).env_info()
    assert (cont.n_actions, cont.discrete, cont.action_low, cont.action_high) == (5, False, 0.0, 1.0)


def test_same_size_agents_have_no_mask_feature():
    info = MPEEnv("simple_spread", seed=0).env_info()
    assert (info.n_agents, info.obs_shape, info.n_actions, info.state_shape) == (3, 18, 5, 54)


def test_competitive_teams_and_heuristic_opponents():
    pred = MPEEnv("simple_tag", seed=1)  # default team: the 3 predators; the prey is the heuristic
    assert pred.controlled == ["adversary_0", "adversary_1", "adversary_2"] and pred.others == ["agent_0"]
    prey = MPEEnv("simple_tag", seed=1, team="agent")
    assert prey.env_info().n_agents == 1 and prey.env_info().obs_shape == 14
    adv = MPEEnv("simple_adversary", seed=1, team="adversary")
    assert adv.controlled == ["adversary_0"] and adv.env_info().obs_shape == 8
    # The heuristic prey flees: over an episode where predators stand still it ends farther from them.
    world = pred.env.unwrapped.world
    start = _prey_distance(world)
    for _ in range(10):
        pred.step([0, 0, 0])
    assert _prey_distance(world) > start
    with pytest.raises(ValueError, match="allowed: adversary, agent"):
        MPEEnv("simple_tag", team="all")


def _prey_distance(world) -> float:
    prey = next(a for a in world.agents if not a.adversary)
    return min(float(np.linalg.norm(a.state.p_pos - prey.state.p_pos)) for a in world.agents if a.adversary)


def test_team_reward_sum_and_mean():
    envs = {mode: MPEEnv("simple_spread", seed=5, reward=mode) for mode in ("sum", "mean")}
    for t in range(5):
        actions = np.array([t % 5, (t + 1) % 5, (t + 2) % 5])
        r_sum, _, _ = envs["sum"].step(actions)
        r_mean, _, _ = envs["mean"].step(actions)
        assert r_sum == pytest.approx(3 * r_mean, rel=1e-6)
    with pytest.raises(ValueError, match="allowed: sum, mean"):
        MPEEnv("simple_spread", reward="max")


def test_bad_names_list_valid_scenarios():
    assert scenario_name("simple_spread_v3") == "simple_spread"
    with pytest.raises(ValueError, match="valid: simple, simple_adversary, simple_reference"):
        MPEEnv("simple_sprea")


def test_seeded_resets_are_reproducible_and_scheme_fits():
    a, b = MPEEnv("simple_reference", seed=11), MPEEnv("simple_reference", seed=11)
    np.testing.assert_array_equal(a.get_state(), b.get_state())
    a.reset(), b.reset()
    np.testing.assert_array_equal(a.get_state(), b.get_state())
    scheme = Scheme(MPEEnv("simple_spread", continuous_actions=True).env_info())
    assert scheme.fields["actions"].shape == (3, 5) and scheme.fields["actions"].dtype == np.float32


def test_simple_is_one_agent_reaching_a_landmark():
    env = MPEEnv("simple_v3", seed=0, continuous_actions=True)
    info = env.env_info()
    assert info.n_agents == 1 and not info.discrete and info.episode_limit == 25
    env.reset()
    reward, terminated, _ = env.step(np.full((1, info.n_actions), 0.5, dtype=np.float32))
    assert reward < 0 and not terminated  # minus the squared distance to the landmark
