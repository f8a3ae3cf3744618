"""The fused step (marl/envs/smac/fused.py) against its reference, the env's stage-by-stage step."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from marl.envs.smac import fused
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.sim.avail import sample_available


def _pair(map_name: str, n_envs: int, threads: int = 1, **flags) -> tuple[BatchedStarCraft2Env, ...]:
    fast = BatchedStarCraft2Env(map_name, n_envs, seed=5, threads=threads, **flags)
    ref = BatchedStarCraft2Env(map_name, n_envs, seed=5, fused=False, **flags)
    assert fast.fused and not ref.fused
    return fast, ref


def _assert_same_env(fast: BatchedStarCraft2Env, ref: BatchedStarCraft2Env) -> None:
    np.testing.assert_array_equal(fast.engine.S, ref.engine.S)
    np.testing.assert_array_equal(fast.engine.rng, ref.engine.rng)
    for get in ("get_obs", "get_state", "get_avail_actions"):
        a, b = getattr(fast, get)(), getattr(ref, get)()
        assert a.dtype == b.dtype and a.shape == b.shape, get
        np.testing.assert_array_equal(a, b, err_msg=get)
    for key in ("_steps", "_running", "_dead", "_last_action", "battles_game", "battles_won", "timeouts"):
        np.testing.assert_array_equal(getattr(fast, key), getattr(ref, key), err_msg=key)
    np.testing.assert_array_equal(fast.units.health, ref.units.health)
    assert fast.get_stats() == ref.get_stats()


@pytest.fixture
def poisoned_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full step's uninitialised arrays (``FusedPlan.fresh_views``, ``step_outputs`` with ``np.empty``)
    filled with what no step writes (NaN, -1, True), so that any row or output the compiled step leaves
    unwritten differs from the reference."""

    def poison(*arrays: np.ndarray) -> tuple:
        for x in arrays:
            x.fill(True if x.dtype == bool else np.nan if x.dtype.kind == "f" else -1)
        return arrays

    views, outputs = fused.FusedPlan.fresh_views, fused.step_outputs

    def poisoned_outputs(n_envs: int, alloc=np.zeros) -> tuple:
        out = outputs(n_envs, alloc)
        return poison(*out) if alloc is np.empty else out  # zeroed outputs are what a masked step reads

    monkeypatch.setattr(fused.FusedPlan, "fresh_views", lambda self: poison(*views(self)))
    monkeypatch.setattr(fused, "step_outputs", poisoned_outputs)


# a marine map on one and two threads, a Medivac map (healing, the MMM end rule), shields with sparse
# rewards, terrain with every optional feature, and short timeouts with continuing episodes
@pytest.mark.parametrize(("map_name", "n_envs", "threads", "flags", "limit"), [
    ("3m", 4, 1, {}, None),
    ("3m", 5, 2, {"reward_only_positive": False}, None),
    ("MMM", 3, 1, {}, None),
    ("2s3z", 2, 1, {"reward_sparse": True, "reward_scale": False}, None),
    ("corridor", 2, 1, {"obs_last_action": True, "state_timestep_number": True, "obs_timestep_number": True,
                        "obs_instead_of_state": True}, None),
    ("3m", 3, 1, {"continuing_episode": True}, 12),
])  # fmt: skip
@pytest.mark.usefixtures("poisoned_fresh")
def test_fused_step_equals_the_reference(map_name, n_envs, threads, flags, limit) -> None:
    """Same reward, end, info, observations, state, available actions, engine state and counters at every
    step, with full and masked steps and resets of ended envs."""
    fast, ref = _pair(map_name, n_envs, threads, **flags)
    if limit is not None:  # timeouts within a short test
        fast.episode_limit = ref.episode_limit = limit
    rs = np.random.default_rng(3)
    for env in (fast, ref):
        env.reset()
    ends = 0
    for k in range(250):
        actions = sample_available(ref.get_avail_actions().astype(bool), rs.random((n_envs, ref.n_agents)))
        mask = None if k % 3 else rs.random(n_envs) < 0.5  # every third step masked (sometimes empty)
        held = fast.get_obs()
        held_copy = held.copy()
        got, want = fast.step(actions, mask), ref.step(actions, mask)
        if mask is None:  # a full step gives fresh arrays: what the caller held is untouched
            np.testing.assert_array_equal(held, held_copy)
        for name, a, b in zip(("reward", "terminated"), got[:2], want[:2], strict=True):
            assert a.dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=name)
        assert got[2].keys() == want[2].keys()
        for key in want[2]:
            np.testing.assert_array_equal(got[2][key], want[2][key], err_msg=key)
        _assert_same_env(fast, ref)
        if want[1].any():
            ends += int(want[1].sum())
            for env in (fast, ref):
                env.reset_envs(want[1].copy())
    assert ends >= n_envs  # episodes ended and restarted during the test
    if limit is not None:
        assert fast.timeouts.sum() > 0


def test_fused_step_refuses_what_the_reference_refuses() -> None:
    """The same error, word for word, and nothing changed: an unavailable action, one out of range, a
    non-integer, a stepped env that is not running."""
    fast, ref = _pair("3m", 2)
    for env in (fast, ref):
        env.reset()
    before = fast.engine.S.copy(), fast.get_obs().copy(), fast._steps.copy()
    dead_agent_noop = np.ones((2, 3), dtype=np.int64)
    dead_agent_noop[1, 2] = 0  # no-op is available to dead agents only
    bad = [dead_agent_noop, np.full((2, 3), 99), np.full((2, 3), 1.5), np.full((2, 3), -1)]
    for actions in bad:
        messages = []
        for env in (fast, ref):
            with pytest.raises(ValueError) as err:
                env.step(actions)
            messages.append(str(err.value))
        assert messages[0] == messages[1]
    assert "env 1, agent 2 cannot take action 0 (no-op)" in str(
        pytest.raises(ValueError, fast.step, dead_agent_noop).value
    )
    np.testing.assert_array_equal(fast.engine.S, before[0])
    np.testing.assert_array_equal(fast.get_obs(), before[1])
    np.testing.assert_array_equal(fast._steps, before[2])
    # integral floats are accepted, as by the reference
    ones = np.ones((2, 3))
    np.testing.assert_array_equal(fast.step(ones)[0], ref.step(ones)[0])
    _assert_same_env(fast, ref)
    fresh = BatchedStarCraft2Env("3m", 2, seed=0)
    with pytest.raises(RuntimeError, match="not running"):
        fresh.step(np.ones((2, 3), dtype=np.int64))


def test_fused_step_follows_a_limit_set_mid_episode() -> None:
    """The fused calls keep their arguments between steps (``FusedPlan``); an episode limit set after some
    steps still ends the episodes where the reference ends them."""
    fast, ref = _pair("3m", 2, continuing_episode=True)
    for env in (fast, ref):
        env.reset()
    stop = np.ones((2, 3), dtype=np.int64)  # the armies have not met after 3 steps
    for _ in range(3):
        fast.step(stop), ref.step(stop)
    plan = fast._plan()
    for env in (fast, ref):
        env.episode_limit = 4
    assert fast._plan() is not plan  # the plan was rebuilt with the new limit
    got, want = fast.step(stop), ref.step(stop)
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].all() and got[2]["episode_limit"].all()
    _assert_same_env(fast, ref)


def test_a_copy_of_a_stepped_env_steps_on_its_own() -> None:
    """``copy.deepcopy`` and pickle leave the plan out: a copy builds one over its own arrays, so it steps
    as the original does without moving the original."""
    env = BatchedStarCraft2Env("3m", 2, seed=1)
    env.reset()
    stop = np.ones((2, 3), dtype=np.int64)
    env.step(stop)
    for duplicate in (copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))):
        twin = duplicate(env)
        before = env.engine.S.copy()
        got = twin.step(stop)
        np.testing.assert_array_equal(env.engine.S, before)  # the original did not move
        want = env.step(stop)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(twin.get_obs(), env.get_obs())
        np.testing.assert_array_equal(twin.engine.S, env.engine.S)
