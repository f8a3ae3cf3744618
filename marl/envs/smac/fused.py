"""One compiled call per step of a :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env`.

``BatchedStarCraft2Env.step`` is, per env: check the actions, record them (``last_action``), run the engine's
8 game loops, compute SMAC's reward and end of episode, update the step count and the battle counters, and
recompute available actions, observations and state. Its readable reference is the same method with
``fused=False``: one Python call per stage (engine, ``SmacFeatures.reward_and_end``, ``observe``) and the
bookkeeping in NumPy. This module runs every stage of one env in one compiled function, :func:`step_env`,
with no Python between stages and envs: at one env the stage-by-stage step spent several times the
engine's own time in Python calls and small arrays (3m: about 160 µs a step against the engine's 24 µs).
``tests/test_smac_fused.py`` holds the two paths equal, bit for bit (every output, the engine state and
every counter, with masks, Medivacs, sparse rewards, timeouts and threads).

The compiled pieces are the env's own: the engine step and respawn (:mod:`marl.envs.smac.sim.stepper`) and
the feature kernels (:mod:`marl.envs.smac.fast_features`). :mod:`marl.envs.smac.rollout` loops
:func:`step_env` for many random steps.

Argument groups (tuples of the env's own arrays, built per call by :func:`fused_args`, :func:`view_args`,
:func:`spawn_args` and :func:`step_outputs`):

- ``eng`` = (n_agents, props, utype, grid, nav, enemy order kind): the engine's map arrays;
- ``ep`` = (steps, last_action, dead, running, battles_won, battles_game, timeouts): per-env episode state;
- ``rules`` = (end bonus by code, sparse, reward divisor, episode_limit, continuing, *reward kernel options);
- ``view`` = (health maxima (1, U), avail, obs, state, *feature kernel options);
- ``spawn`` = (base positions, spawn noise, order target, second target): what a respawn needs;
- ``out`` = (reward, terminated, won, dead counts (E, 2), episode_limit flag): the step's outputs.

The groups are flat tuples: Numba's parallel loops do not take tuples nested in tuples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from marl.envs.smac.fast_features import observe_kernel, reward_end_kernel
from marl.envs.smac.features import RUNNING
from marl.envs.smac.sim.engine import SPAWN_NOISE
from marl.envs.smac.sim.stepper import _first_loop, _reset_env, _step_env
from marl.envs.smac.sim.units import PROPS, S_CD, S_EN, S_HP, S_SH, S_X, S_Y
from marl.envs.smac.threads import with_threads
from marl.envs.smac.types import MEDIVAC_MAP_TYPES


@njit(cache=True)
def scratch(u):
    """Per-thread work arrays of :func:`step_env` for ``u`` units: (buf, idx, perm, prev health/shield,
    end code)."""
    idx, perm, code = np.empty(u, dtype=np.int64), np.empty(u, dtype=np.int64), np.empty(1, dtype=np.int64)
    return np.empty((u, 4)), idx, perm, np.empty((2, u)), code


@njit(cache=True)
def bad_agent(e, actions, avail):
    """-1 if every agent of env ``e`` chose an available action, else the first agent that did not."""
    n_act = avail.shape[2]
    for i in range(actions.shape[1]):
        a = actions[e, i]
        if a < 0 or a >= n_act or avail[e, i, a] == 0:
            return i
    return -1


@njit(cache=True)
def observe_env(e, na, S, view, last_action, steps):
    """Available actions, observations and state of env ``e`` (``view``'s arrays, row ``e`` rewritten)."""
    hmax, avail, obs, state = view[0], view[1], view[2], view[3]
    avail[e] = 0  # the kernel writes only what is visible, available or alive (as into fresh zeros)
    obs[e] = 0.0
    state[e] = 0.0
    r = slice(e, e + 1)
    observe_kernel(
        na, S[r, :, S_X : S_Y + 1], S[r, :, S_HP], S[r, :, S_SH], S[r, :, S_CD], S[r, :, S_EN], hmax,
        last_action[r], steps[r], *view[4:], avail[r], obs[r], state[r],
    )  # fmt: skip


@njit(cache=True)
def step_env(e, actions, eng, S, rng, work, ep, rules, view, out):
    """One SMAC step of env ``e`` under ``actions[e]`` (already checked): orders, 8 game loops, reward, end,
    counters, then the new observations. Returns True when the episode ended."""
    na = eng[0]
    steps, last_action, dead, running, battles_won, battles_game, timeouts = ep
    end_reward, sparse, divisor, episode_limit, continuing = rules[0], rules[1], rules[2], rules[3], rules[4]
    reward, term, won, n_dead, limit = out
    buf, idx, perm, prev, code = work
    n_act = last_action.shape[2]
    for i in range(na):
        for a in range(n_act):
            last_action[e, i, a] = 1.0 if a == actions[e, i] else 0.0
    prev[0] = S[e, :, S_HP]
    prev[1] = S[e, :, S_SH]
    _step_env(e, actions, *eng, S, rng, buf, idx, perm)
    r = slice(e, e + 1)
    n_dead[e] = 0
    reward_end_kernel(
        na, prev[0:1], prev[1:2], S[r, :, S_HP], S[r, :, S_SH], dead[r], *rules[5:], reward[r], code,
        n_dead[r],
    )  # fmt: skip
    c = code[0]
    steps[e] += 1
    # the end bonus by code (+1 win, 0 draw, 2 running, -1 loss = the last entry); sparse: the bonus only
    value = end_reward[c] if sparse else reward[e] + end_reward[c]
    reward[e] = value / divisor
    timed_out = c == RUNNING and steps[e] >= episode_limit
    ended = c != RUNNING or timed_out
    term[e] = ended
    won[e] = c == 1
    limit[e] = timed_out and continuing
    battles_game[e] += ended
    battles_won[e] += c == 1
    timeouts[e] += timed_out
    running[e] = not ended
    observe_env(e, na, S, view, last_action, steps)
    return ended


@njit(cache=True)
def first_bad(mask, actions, avail_now):
    """-1, or ``e * n_agents + i`` for the first action of a masked env that ``avail_now`` (the available
    actions before the step) does not allow."""
    na = actions.shape[1]
    for e in range(mask.shape[0]):
        if mask[e]:
            i = bad_agent(e, actions, avail_now)
            if i >= 0:
                return e * na + i
    return -1


@njit(cache=True)
def step_envs(mask, actions, avail_now, eng, S, rng, ep, rules, view, out):
    """:func:`step_env` for every env with ``mask[e]``, one after another; returns -1, or
    :func:`first_bad`'s index (then nothing has changed)."""
    bad = first_bad(mask, actions, avail_now)
    if bad >= 0:
        return bad
    work = scratch(S.shape[1])
    for e in range(S.shape[0]):
        if mask[e]:
            step_env(e, actions, eng, S, rng, work, ep, rules, view, out)
    return -1


@njit(cache=True, parallel=True)
def step_envs_parallel(chunks, mask, actions, avail_now, eng, S, rng, ep, rules, view, out):
    """:func:`step_envs` with the envs split into ``chunks`` contiguous chunks on Numba's threads (each env
    owns its random stream and rows, so the results are those of the serial call)."""
    bad = first_bad(mask, actions, avail_now)
    if bad >= 0:
        return bad
    E = S.shape[0]
    for c in prange(chunks):
        work = scratch(S.shape[1])
        for e in range(c * E // chunks, (c + 1) * E // chunks):
            if mask[e]:
                step_env(e, actions, eng, S, rng, work, ep, rules, view, out)
    return -1


@njit(cache=True)
def reset_env(e, eng, spawn, S, rng, ep, view):
    """A new episode in env ``e``: respawn, step count, last actions and death trackers cleared, observed.
    ``spawn`` = (base positions, spawn noise, order target, second target, first loop)."""
    na, props, utype, grid, order = eng[0], eng[1], eng[2], eng[3], eng[5]
    steps, last_action, dead, running = ep[0], ep[1], ep[2], ep[3]
    _reset_env(e, na, props, utype, grid, spawn[0], spawn[1], order, spawn[2], spawn[3], S, rng)
    if spawn[4]:
        _first_loop(e, na, props, utype, grid, eng[4], S, rng)
    steps[e] = 0
    last_action[e] = 0.0
    dead[e] = False
    running[e] = True
    observe_env(e, na, S, view, last_action, steps)


@njit(cache=True)
def reset_envs(mask, eng, spawn, S, rng, ep, view):
    """:func:`reset_env` for every env with ``mask[e]``."""
    for e in range(S.shape[0]):
        if mask[e]:
            reset_env(e, eng, spawn, S, rng, ep, view)


def fused_reset(env: Any, mask: np.ndarray) -> None:
    """``env.reset_envs(mask)`` after the first reset, in one compiled call (fresh observation arrays when
    every env restarts, as the reference path gives; else the restarted rows rewritten)."""
    eng = env.engine
    avail, obs, state = _view_arrays(env, fresh=bool(mask.all()))
    engine, ep, _ = fused_args(env)
    reset_envs(mask, engine, spawn_args(env), eng.S, eng.rng, ep, view_args(env, avail, obs, state))
    _adopt(env, avail, obs, state)


def _view_arrays(env: Any, fresh: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(avail, obs, state) to write: new ones when every env is rewritten (as the reference path gives),
    else the env's own, whose rewritten rows change."""
    if fresh:
        return np.empty_like(env._avail), np.empty_like(env._obs), np.empty_like(env._state)
    return env._avail, env._obs, env._state


def _adopt(env: Any, avail: np.ndarray, obs: np.ndarray, state: np.ndarray) -> None:
    """Make the written arrays the env's; its units are taken from the engine when next read."""
    env._avail, env._obs = avail, obs
    env._state = obs.reshape(env.n_envs, -1).copy() if env.opts.obs_instead_of_state else state
    env._units_stale = True


def fused_step(
    env: Any, actions_EN: np.ndarray, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``env.step(actions_EN, mask)`` in one compiled call (the caller has checked shapes, mask and that the
    stepped envs run). A full step gives fresh observation arrays, as the reference path does; a masked
    step rewrites the stepped rows of the current ones. An unavailable action raises the reference path's
    error before anything changes."""
    E = env.n_envs
    a = actions_EN
    if a.dtype.kind not in "iu":
        env._check_actions(a, np.arange(E))  # the reference's dtype and range errors
    a = np.ascontiguousarray(a, dtype=np.int64)
    avail, obs, state = _view_arrays(env, fresh=mask is None)
    mask = env._all_envs if mask is None else mask
    out = step_outputs(E)
    eng, ep, rules = fused_args(env)
    view = view_args(env, avail, obs, state)
    threads = min(env.engine.threads, E)
    if threads > 1:
        args = (threads, mask, a, env._avail, eng, env.engine.S, env.engine.rng, ep, rules, view, out)
        bad = with_threads(threads, step_envs_parallel, *args)
    else:
        bad = step_envs(mask, a, env._avail, eng, env.engine.S, env.engine.rng, ep, rules, view, out)
    if bad >= 0:
        rows = np.flatnonzero(mask)
        env._check_actions(a[rows], rows)  # raises the reference's message
        raise AssertionError(f"fused step refused action index {bad} that the reference accepts")
    _adopt(env, avail, obs, state)
    reward, term, won, n_dead, limit = out
    info = {"battle_won": won, "dead_allies": n_dead[:, 0], "dead_enemies": n_dead[:, 1]}
    info["episode_limit"] = limit
    return reward, term, info


def step_outputs(n_envs: int) -> tuple:
    """``out`` of :func:`step_env` for ``n_envs`` envs, zeroed (what an env not stepped reads)."""
    E = n_envs
    return (
        np.zeros(E),
        np.zeros(E, dtype=np.bool_),
        np.zeros(E, dtype=np.bool_),
        np.zeros((E, 2), dtype=np.int64),
        np.zeros(E, dtype=np.bool_),
    )


def fused_args(env: Any) -> tuple[tuple, tuple, tuple]:
    """(eng, ep, rules) of a :class:`BatchedStarCraft2Env` (its arrays, shared, not copied)."""
    f, eng, o = env.features, env.engine, env.opts
    reward_args = (
        f.spec.map_type in MEDIVAC_MAP_TYPES,
        f.ally_medivac,
        f.enemy_medivac,
        bool(o.reward_sparse),
        bool(o.reward_only_positive),
        bool(f.reward_clip_at_zero),
        float(o.reward_death_value),
        float(o.reward_negative_scale),
    )
    divisor = env.max_reward / o.reward_scale_rate if o.reward_scale else 1.0
    rules = (
        env._end_reward,
        bool(o.reward_sparse),
        float(divisor),
        int(env.episode_limit),
        bool(o.continuing_episode),
        *reward_args,
    )
    engine = (eng.n_agents, PROPS, eng.utype, eng.grid, eng.nav, eng._order)
    ep = (
        env._steps,
        env._last_action,
        env._dead,
        env._running,
        env.battles_won,
        env.battles_game,
        env.timeouts,
    )
    return engine, ep, rules


def spawn_args(env: Any) -> tuple:
    """``spawn`` of :func:`reset_env`: the engine's base positions, spawn noise, order targets and whether
    its resets end with SMAC's first loop (``BatchedSimEngine.first_loop``)."""
    eng = env.engine
    return eng.base_pos, SPAWN_NOISE, eng._target, eng._target2, eng.first_loop


def view_args(env: Any, avail: np.ndarray, obs: np.ndarray, state: np.ndarray) -> tuple:
    """``view`` of :func:`step_env`, writing into ``avail``, ``obs`` and ``state`` (no state columns with
    ``obs_instead_of_state``: the caller copies the observations afterwards)."""
    if env.opts.obs_instead_of_state:
        state = np.zeros((env.n_envs, 0), np.float32)
    return (env._hmax, avail, obs, state, *env.features._kernel_args)
