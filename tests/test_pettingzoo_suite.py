"""PettingZoo's own test suite on the SMAC view of every map, and the view's options.

Each of the 23 maps (the conformance tier; the unit tier runs four representative maps) runs
``parallel_api_test``, ``parallel_seed_test``, ``api_test`` and ``seed_test`` (on
``parallel_to_aec``), ``render_test`` (``human`` in a headless pygame window, ``rgb_array``) and
``max_cycles_test``. The tools that sample unmasked actions (the seed and max-cycles tests) get the
lenient ``unavailable_action="noop"`` view, as a user of those tools would configure it.
"""

from __future__ import annotations

import os
import types
import warnings

import numpy as np
import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # render_mode="human" opens a window: headless here

from pettingzoo.test import (  # noqa: E402
    api_test,
    max_cycles_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
)
from pettingzoo.utils.conversions import parallel_to_aec  # noqa: E402
from shared import REPRESENTATIVE_MAPS, on_every_map  # noqa: E402  (tests/ is on sys.path under pytest)

from marl.envs.pettingzoo_view import pettingzoo_env  # noqa: E402
from marl.envs.smac.maps import list_maps  # noqa: E402

MAPS = list_maps()
API_TEST_HINTS = {  # api_test's hints that do not apply: Dict observations carry the action mask ...
    "Observation space for each agent probably should be gymnasium.spaces.box or gymnasium.spaces.discrete",
    "Observation is not a NumPy array",
    "Observation numpy array is all zeros.",  # ... and a dead SMAC agent observes zeros
}


def test_all_23_maps_are_covered() -> None:
    assert len(MAPS) == 23


def _pettingzoo_suite(map_name: str) -> None:
    strict = lambda **kw: pettingzoo_env(map_name, seed=1, **kw)  # noqa: E731
    lenient = lambda **kw: pettingzoo_env(map_name, seed=1, unavailable_action="noop", **kw)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PettingZoo reports API problems as warnings
        parallel_api_test(strict(), num_cycles=40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(parallel_to_aec(strict()), num_cycles=10)
    assert {str(w.message) for w in caught} <= API_TEST_HINTS
    parallel_seed_test(lenient, num_cycles=10)
    seed_test(lambda: parallel_to_aec(lenient()), num_cycles=10)
    render_test(lambda render_mode: parallel_to_aec(strict(render_mode=render_mode)))
    mod = types.SimpleNamespace(
        parallel_env=lambda max_cycles: lenient(max_cycles=max_cycles),
        env=lambda max_cycles: parallel_to_aec(lenient(max_cycles=max_cycles)),
    )
    max_cycles_test(mod)


@pytest.mark.parametrize("map_name", REPRESENTATIVE_MAPS)
def test_pettingzoo_suite(map_name: str) -> None:
    _pettingzoo_suite(map_name)


@pytest.mark.conformance
def test_pettingzoo_suite_on_every_map() -> None:
    on_every_map(_pettingzoo_suite)


def _spaces_hold_every_observation_and_state(map_name: str) -> None:
    env = pettingzoo_env(map_name, seed=2, obs_last_action=True, obs_timestep_number=True)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=2)
    low, high = env.state_space.low.min(), env.state_space.high.max()
    assert low == -1.0 and high >= 1.0 and np.isfinite(high)  # the bounds are declared, not infinite
    for _ in range(120):
        for a, o in obs.items():
            assert env.observation_space(a).contains(o), (a, o["observation"].min(), o["observation"].max())
        assert env.state_space.contains(env.state())
        if not env.agents:
            obs, _ = env.reset()
            continue
        acts = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, *_ = env.step(acts)
    env.close()


@pytest.mark.parametrize("map_name", REPRESENTATIVE_MAPS)
def test_spaces_hold_every_observation_and_state(map_name: str) -> None:
    _spaces_hold_every_observation_and_state(map_name)


@pytest.mark.conformance
def test_spaces_hold_every_observation_and_state_on_every_map() -> None:
    on_every_map(_spaces_hold_every_observation_and_state)


def test_noop_mode_replaces_unavailable_actions() -> None:
    env = pettingzoo_env("3m", seed=0, unavailable_action="noop")
    obs, _ = env.reset(seed=0)
    # at the start no enemy is in range: attacks (6..8) are unavailable; the no-op (0) is for the dead only
    assert not obs["agent_0"]["action_mask"][6:].any() and not obs["agent_0"]["action_mask"][0]
    twin = pettingzoo_env("3m", seed=0)
    twin.reset(seed=0)
    env.step({a: 7 for a in env.agents})  # unavailable for every living agent -> "stop" (1)
    twin.step({a: 1 for a in twin.agents})
    np.testing.assert_array_equal(env.state(), twin.state())
    strict = pettingzoo_env("3m", seed=0)
    strict.reset(seed=0)
    with pytest.raises(
        ValueError, match=r"action 7 is not available \(available actions: \[1, 2, 3, 4, 5\]\)"
    ):
        strict.step({a: 7 for a in strict.agents})


def test_max_cycles_cuts_the_episode_as_a_truncation() -> None:
    env = pettingzoo_env("8m", seed=0, max_cycles=3)
    obs, infos = env.reset(seed=0)
    for t in range(3):
        assert env.agents, f"the episode ended early, at step {t}"
        obs, rew, term, trunc, infos = env.step({a: 1 for a in env.agents})
    assert all(trunc.values()) and not any(term.values()) and env.agents == []
    assert all(i["episode_limit"] for i in infos.values())


def test_human_render_draws_into_a_window() -> None:
    env = pettingzoo_env("3m", seed=0, render_mode="human")
    env.reset(seed=0)
    assert env.render() is None
    import pygame

    surface = pygame.display.get_surface()
    frame = pettingzoo_env("3m", seed=0, render_mode="rgb_array")
    frame.reset(seed=0)
    expected = frame.render()
    assert surface is not None and surface.get_size() == (expected.shape[1], expected.shape[0])
    drawn = pygame.surfarray.array3d(surface).transpose(1, 0, 2)
    np.testing.assert_array_equal(drawn, expected)  # the window shows exactly the rgb_array frame
    env.close()
    assert pygame.display.get_surface() is None
