"""Uniform-random play of a :class:`BatchedStarCraft2Env` for many steps in one compiled call.

``random_rollout(env, uniforms_KEN)`` plays ``K`` steps in every env of ``env``: each agent takes a uniformly
random available action (``uniforms_KEN`` in [0, 1) pick it, as :func:`marl.envs.smac.sim.avail.
sample_available` does), the engine steps, SMAC's reward, end of episode, observations, state and available
actions are computed, and an env whose episode ended is reset at once. It is the same play as this loop
over the env's own per-step API, which is its readable reference (``tests/test_smac_rollout.py`` holds the
two equal: rewards, ends, observations, state and the engine's whole state)::

    for k in range(K):
        actions = sample_available(env.get_avail_actions().astype(bool), uniforms_KEN[k])
        reward, terminated, info = env.step(actions)
        if terminated.any():
            env.reset_envs(terminated)

The loop runs in Numba with no Python between steps: the like-for-like of a JAX environment rolled out
inside ``lax.scan`` (``benchmarks/sim_throughput.py`` compares it with JaxMARL's SMAX), and a fast way to
play random baselines. The compiled pieces are the env's own: the engine step and reset
(:mod:`marl.envs.smac.sim.stepper`), the feature kernels (:mod:`marl.envs.smac.fast_features`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from marl.envs.smac.fast_features import observe_kernel, reward_end_kernel
from marl.envs.smac.features import RUNNING
from marl.envs.smac.sim.avail import sample_available
from marl.envs.smac.sim.engine import SPAWN_NOISE
from marl.envs.smac.sim.stepper import sim_reset, sim_step
from marl.envs.smac.sim.units import PROPS, S_CD, S_EN, S_HP, S_SH, S_X, S_Y
from marl.envs.smac.types import MEDIVAC_MAP_TYPES


@njit(cache=True)
def _rollout_kernel(
    uniforms, na, props, utype, grid, nav, order, base_pos, noise, target, target2, S, rng,
    hmax, kargs, reward_args, end_reward, sparse, scale, episode_limit,
    steps, last_action, dead, avail, obs, state, out_reward, out_term, out_code,
):  # fmt: skip
    """The loop of :func:`random_rollout` (arguments: the env's engine, feature and bookkeeping arrays)."""
    n_steps, n_env, n_act = uniforms.shape[0], S.shape[0], avail.shape[2]
    reward = np.empty(n_env)
    code = np.empty(n_env, dtype=np.int64)
    n_dead = np.zeros((n_env, 2), dtype=np.int64)
    reset = np.zeros(n_env, dtype=np.bool_)
    prev_health, prev_shield = np.empty((n_env, S.shape[1])), np.empty((n_env, S.shape[1]))
    for k in range(n_steps):
        actions = sample_available(avail, uniforms[k])
        for e in range(n_env):
            for i in range(na):
                for a in range(n_act):
                    last_action[e, i, a] = 1.0 if a == actions[e, i] else 0.0
        prev_health[:] = S[:, :, S_HP]
        prev_shield[:] = S[:, :, S_SH]
        sim_step(actions, na, props, utype, grid, nav, order, S, rng)
        reward_end_kernel(
            na,
            prev_health,
            prev_shield,
            S[:, :, S_HP],
            S[:, :, S_SH],
            dead,
            *reward_args,
            reward,
            code,
            n_dead,
        )
        any_end = False
        for e in range(n_env):
            steps[e] += 1
            r = end_reward[code[e]] if sparse else reward[e] + end_reward[code[e]]
            out_reward[k, e] = r / scale
            out_code[k, e] = code[e]
            reset[e] = code[e] != RUNNING or steps[e] >= episode_limit
            out_term[k, e] = reset[e]
            any_end |= reset[e]
        if any_end:  # as BatchedStarCraft2Env.reset_envs: respawn, clear the step count, actions and deaths
            sim_reset(reset, na, props, utype, grid, base_pos, noise, order, target, target2, S, rng)
            for e in range(n_env):
                if reset[e]:
                    steps[e] = 0
                    last_action[e] = 0.0
                    dead[e] = False
        avail[:] = 0  # the kernel writes only what is visible, available or alive (as into fresh zeros)
        obs[:] = 0.0
        state[:] = 0.0
        observe_kernel(
            na, S[:, :, S_X : S_Y + 1], S[:, :, S_HP], S[:, :, S_SH], S[:, :, S_CD], S[:, :, S_EN], hmax,
            last_action, steps, *kargs, avail, obs, state,
        )  # fmt: skip


def random_rollout(env: Any, uniforms_KEN: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Play ``K = len(uniforms_KEN)`` uniformly random steps in every env of ``env`` (a reset
    :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env`), resetting each env whose episode ends.

    Returns ``(reward_KE, terminated_KE, won_KE)``. Afterwards the env stands where the per-step loop of the
    module docstring leaves it (observations, state, available actions, engine state and counters), so it
    can be stepped on as usual. Envs with ``heuristic_ai`` are refused (their agents do not take actions).
    """
    f, eng, o = env.features, env.engine, env.opts
    u = np.ascontiguousarray(uniforms_KEN, dtype=np.float64)
    if u.ndim != 3 or u.shape[1:] != (env.n_envs, env.n_agents):
        raise ValueError(f"uniforms must have shape (K, {env.n_envs}, {env.n_agents}), got {u.shape}")
    if o.heuristic_ai:
        raise ValueError("random_rollout: an env with heuristic_ai=True chooses its own actions")
    if not env._running.all():
        raise RuntimeError("random_rollout: every env must be running (call reset() first)")
    k, n_env = u.shape[0], env.n_envs
    out_reward = np.zeros((k, n_env))
    out_term = np.zeros((k, n_env), dtype=np.bool_)
    out_code = np.zeros((k, n_env), dtype=np.int64)
    reward_args = (
        f.spec.map_type in MEDIVAC_MAP_TYPES,
        f.ally_medivac,
        f.enemy_medivac,
        o.reward_sparse,
        o.reward_only_positive,
        f.reward_clip_at_zero,
        o.reward_death_value,
        o.reward_negative_scale,
    )
    scale = env.max_reward / o.reward_scale_rate if o.reward_scale else 1.0
    avail = np.ascontiguousarray(env._avail, dtype=np.int64)
    obs, state = np.ascontiguousarray(env._obs), np.ascontiguousarray(env._state)
    _rollout_kernel(
        u, eng.n_agents, PROPS, eng.utype, eng.grid, eng.nav, eng._order, eng.base_pos, SPAWN_NOISE,
        eng._target, eng._target2, eng.S, eng.rng, eng.health_max.reshape(1, -1).astype(np.float64),
        f._kernel_args, reward_args, env._end_reward, bool(o.reward_sparse), float(scale),
        int(env.episode_limit), env._steps, env._last_action, env._dead, avail, obs, state,
        out_reward, out_term, out_code,
    )  # fmt: skip
    env._avail, env._obs, env._state = avail, obs, state
    if o.obs_instead_of_state:
        env._state = obs.reshape(n_env, -1).copy()
    env._units = eng.snapshot().units()
    won = out_code == 1
    env.battles_game += out_term.sum(0)
    env.battles_won += won.sum(0)
    env.timeouts += (out_term & (out_code == RUNNING)).sum(0)
    return out_reward, out_term, won
