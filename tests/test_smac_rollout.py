"""The compiled random rollout (marl/envs/smac/rollout.py) against its reference, the env's per-step loop."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.rollout import random_rollout
from marl.envs.smac.sim.avail import sample_available


def _reference(env: BatchedStarCraft2Env, uniforms_KEN: np.ndarray) -> tuple[np.ndarray, ...]:
    rewards, terms, wins = [], [], []
    for u_EN in uniforms_KEN:
        actions = sample_available(env.get_avail_actions().astype(bool), u_EN)
        reward, terminated, info = env.step(actions)
        rewards.append(reward)
        terms.append(terminated)
        wins.append(info["battle_won"])
        if terminated.any():
            env.reset_envs(terminated)
    return np.array(rewards), np.array(terms), np.array(wins)


# a marine map, a Medivac map (healing, the MMM end rule), zealots with shields and a map with terrain
# (threads=2: chunks of envs on two threads)
@pytest.mark.parametrize(("map_name", "n_envs", "threads", "flags"), [
    ("3m", 3, 2, {}),
    ("MMM", 2, 1, {}),
    ("2s3z", 2, 2, {"reward_sparse": True}),
    ("corridor", 1, 1, {"obs_last_action": True, "state_timestep_number": True}),
])  # fmt: skip
def test_rollout_equals_the_per_step_loop(map_name: str, n_envs: int, threads: int, flags: dict) -> None:
    """Same rewards, episode ends and wins at every step, and afterwards the same observations, state,
    available actions, engine state, step counts and battle counters, over several episodes with resets;
    the reference is the env's stage-by-stage step (``fused=False``)."""
    k = 300
    uniforms = np.random.default_rng(7).random((k, n_envs, BatchedStarCraft2Env(map_name).n_agents))
    fast = BatchedStarCraft2Env(map_name, n_envs, seed=11, threads=threads, **flags)
    ref = BatchedStarCraft2Env(map_name, n_envs, seed=11, fused=False, **flags)
    fast.reset()
    ref.reset()
    got = random_rollout(fast, uniforms)
    want = _reference(ref, uniforms)
    assert want[1].sum() >= n_envs  # episodes ended and were reset inside the rollout
    for name, a, b in zip(("reward", "terminated", "won"), got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(fast.engine.S, ref.engine.S)
    np.testing.assert_array_equal(fast.engine.rng, ref.engine.rng)
    np.testing.assert_array_equal(fast.get_obs(), ref.get_obs())
    np.testing.assert_array_equal(fast.get_state(), ref.get_state())
    np.testing.assert_array_equal(fast.get_avail_actions(), ref.get_avail_actions())
    for key in ("_steps", "battles_game", "battles_won", "timeouts"):
        np.testing.assert_array_equal(getattr(fast, key), getattr(ref, key), err_msg=key)
    # the env steps on after a rollout exactly as the reference does
    actions = sample_available(ref.get_avail_actions().astype(bool), uniforms[0])
    np.testing.assert_array_equal(fast.step(actions)[0], ref.step(actions)[0])


def test_rollout_refuses_bad_input() -> None:
    env = BatchedStarCraft2Env("3m", 2, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        random_rollout(env, np.zeros((4, 2, 3)))
    env.reset()
    with pytest.raises(ValueError, match=r"shape \(K, 2, 3\)"):
        random_rollout(env, np.zeros((4, 3, 3)))
    heuristic = BatchedStarCraft2Env("3m", 1, seed=0, heuristic_ai=True)
    heuristic.reset()
    with pytest.raises(ValueError, match="heuristic_ai"):
        random_rollout(heuristic, np.zeros((4, 1, 3)))
