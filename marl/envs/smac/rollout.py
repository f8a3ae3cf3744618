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
inside ``lax.scan`` (``benchmarks/throughput/sim_throughput.py`` compares it with JaxMARL's SMAX), and a fast
way to play random baselines. Each step is the env's own fused step (``fused_kernels.step_env``), the respawn
the engine's (:mod:`marl.envs.smac.sim.stepper`). The envs are independent, so each env plays its ``K`` steps
on its own, and with the env's ``threads > 1`` chunks of envs play on several cores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from marl.envs.smac.fused import adopt, step_outputs, view_arrays
from marl.envs.smac.fused_kernels import reset_env, scratch, step_env
from marl.envs.smac.sim.avail import sample_env
from marl.envs.smac.threads import with_threads


@njit(cache=True)
def _play_env(e, uniforms, acts, eng, spawn, S, rng, work, ep, rules, view, out, record):
    """Env ``e``'s ``K`` random steps, recorded in ``record`` = (reward_KE, terminated_KE, won_KE) (the other
    arguments: :mod:`marl.envs.smac.fused`'s groups)."""
    out_reward, out_term, out_won = record
    for k in range(uniforms.shape[0]):
        sample_env(view[1], uniforms[k], e, acts)
        ended = step_env(e, acts, eng, S, rng, work, ep, rules, view, out)
        out_reward[k, e] = out[0][e]
        out_term[k, e] = ended
        out_won[k, e] = out[2][e]
        if ended:  # as BatchedStarCraft2Env.reset_envs
            reset_env(e, eng, spawn, S, rng, work, ep, view)


@njit(cache=True, parallel=True)
def _play(chunks, uniforms, acts, eng, spawn, S, rng, ep, rules, view, out, record):
    """:func:`_play_env` for every env, in ``chunks`` contiguous chunks of envs on Numba's threads."""
    E = S.shape[0]
    for c in prange(chunks):
        work = scratch(S.shape[1])
        for e in range(c * E // chunks, (c + 1) * E // chunks):
            _play_env(e, uniforms, acts, eng, spawn, S, rng, work, ep, rules, view, out, record)


def random_rollout(env: Any, uniforms_KEN: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Play ``K = len(uniforms_KEN)`` uniformly random steps in every env of ``env`` (a reset
    :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env`), resetting each env whose episode ends.

    ``uniforms_KEN`` must lie in ``[0, 1)`` (``ValueError`` otherwise, naming the first bad entry).
    Returns ``(reward_KE, terminated_KE, won_KE)``. Afterwards the env stands where the per-step loop of the
    module docstring leaves it (observations, state, available actions, engine state and counters), so it
    can be stepped on as usual. Envs with ``heuristic_ai`` are refused (their agents do not take actions).
    """
    eng = env.engine
    u = np.ascontiguousarray(uniforms_KEN, dtype=np.float64)
    if u.ndim != 3 or u.shape[1:] != (env.n_envs, env.n_agents):
        raise ValueError(f"uniforms must have shape (K, {env.n_envs}, {env.n_agents}), got {u.shape}")
    bad = ~((u >= 0.0) & (u < 1.0))  # also NaN: a uniform outside [0, 1) would pick an unavailable action
    if bad.any():
        k, e, a = np.argwhere(bad)[0]
        raise ValueError(
            f"uniforms must be finite and in [0, 1) (e.g. rng.random((K, E, n_agents))); "
            f"uniforms[{k}, {e}, {a}] is {u[k, e, a]!r}"
        )
    if env.opts.heuristic_ai:
        raise ValueError("random_rollout: an env with heuristic_ai=True chooses its own actions")
    if not env._running.all():
        raise RuntimeError("random_rollout: every env must be running (call reset() first)")
    k, E = u.shape[0], env.n_envs
    out_reward = np.zeros((k, E))
    out_term = np.zeros((k, E), dtype=np.bool_)
    out_won = np.zeros((k, E), dtype=np.bool_)
    step_out = step_outputs(E)
    plan = env._plan()
    arrays = view_arrays(env, plan, fresh=False)
    view = plan.view(*arrays)
    acts = np.zeros((E, env.n_agents), dtype=np.int64)
    record = (out_reward, out_term, out_won)
    args = (u, acts, plan.eng, plan.spawn, plan.S, plan.rng, plan.ep, plan.rules, view, step_out, record)
    with_threads(min(eng.threads, E), _play, min(eng.threads, E), *args)
    adopt(env, *arrays)
    return out_reward, out_term, out_won
