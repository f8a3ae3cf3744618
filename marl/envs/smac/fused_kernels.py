"""The compiled per-env functions of the fused SMAC step (:mod:`marl.envs.smac.fused`): one env's step,
respawn and observation, the checks before a step, and the loops over envs.

The compiled pieces are the env's own: the engine step and respawn (:mod:`marl.envs.smac.sim.stepper`) and
the feature kernels (:mod:`marl.envs.smac.fast_features`). Their arguments are :mod:`marl.envs.smac.fused`'s
groups; :mod:`marl.envs.smac.rollout` loops :func:`step_env` for many random steps.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from marl.envs.smac.fast_features import observe_rows, observe_scratch, reward_end_kernel
from marl.envs.smac.features import RUNNING
from marl.envs.smac.sim.jit import engine_jit
from marl.envs.smac.sim.stepper import _first_loop, _reset_env, _step_env
from marl.envs.smac.sim.units import S_CD, S_EN, S_HP, S_SH, S_X, S_Y


@njit(cache=True)
def scratch(u):
    """Per-thread work arrays of :func:`step_env` for ``u`` units: (buf, idx, perm, prev health/shield
    (1, u, 2): columns, as the state's, so the reward kernel gets the types of the features path: sim/jit.py),
    end code, the observation's ``fast_features.observe_scratch``)."""
    idx, perm, code = np.empty(u, dtype=np.int64), np.empty(u, dtype=np.int64), np.empty(1, dtype=np.int64)
    return np.empty((u, 4)), idx, perm, np.empty((1, u, 2)), code, observe_scratch(u)


@engine_jit
def bad_agent(e, actions, avail):
    """-1 if every agent of env ``e`` chose an available action, else the first agent that did not."""
    n_act = avail.shape[2]
    for i in range(actions.shape[1]):
        a = actions[e, i]
        if a < 0 or a >= n_act or avail[e, i, a] == 0:
            return i
    return -1


@engine_jit
def observe_env(e, na, S, view, last_action, steps, tmp):
    """Available actions, observations and state of env ``e`` (``view``'s arrays, row ``e`` rewritten;
    ``tmp``: ``fast_features.observe_scratch``)."""
    hmax, avail, obs, state = view[0], view[1], view[2], view[3]
    avail[e] = 0  # the kernel writes only what is visible, available or alive (as into fresh zeros)
    obs[e] = 0.0
    state[e] = 0.0
    r = slice(e, e + 1)
    observe_rows(
        tmp, na, S[r, :, S_X : S_Y + 1], S[r, :, S_HP], S[r, :, S_SH], S[r, :, S_CD], S[r, :, S_EN], hmax,
        last_action[r], steps[r], *view[4:], avail[r], obs[r], state[r],
    )  # fmt: skip


@engine_jit
def step_env(e, actions, eng, S, rng, work, ep, rules, view, out):
    """One SMAC step of env ``e`` under ``actions[e]`` (already checked): orders, 8 game loops, reward, end,
    counters, then the new observations. Returns True when the episode ended."""
    na = eng[0]
    steps, last_action, dead, running, battles_won, battles_game, timeouts = ep
    end_reward, sparse, divisor, episode_limit, continuing = rules[0], rules[1], rules[2], rules[3], rules[4]
    reward, term, won, dead_allies, dead_enemies, limit = out
    buf, idx, perm, prev, code, tmp = work
    n_act = last_action.shape[2]
    for i in range(na):
        for a in range(n_act):
            last_action[e, i, a] = 1.0 if a == actions[e, i] else 0.0
    for k in range(S.shape[1]):
        prev[0, k, 0] = S[e, k, S_HP]
        prev[0, k, 1] = S[e, k, S_SH]
    _step_env(e, actions, *eng, S, rng, buf, idx, perm)
    r = slice(e, e + 1)
    dead_allies[e] = 0
    dead_enemies[e] = 0
    reward_end_kernel(
        na, prev[:, :, 0], prev[:, :, 1], S[r, :, S_HP], S[r, :, S_SH], dead[r], *rules[5:], reward[r], code,
        dead_allies[r], dead_enemies[r],
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
    observe_env(e, na, S, view, last_action, steps, tmp)
    return ended


@njit(cache=True)
def first_bad(mask, actions, avail_now, running):
    """-1 if every env of ``mask`` runs and took only actions that ``avail_now`` (the available actions
    before the step) allows; else -2 if one of them is not running, or ``e * n_agents + i`` for the first
    action refused."""
    for e in range(mask.shape[0]):
        if mask[e] and not running[e]:
            return -2
    na = actions.shape[1]
    for e in range(mask.shape[0]):
        if mask[e]:
            i = bad_agent(e, actions, avail_now)
            if i >= 0:
                return e * na + i
    return -1


@njit(cache=True, inline="always")  # one compile of the step's tree less: sim/jit.py
def step_envs(mask, actions, avail_now, eng, S, rng, work, ep, rules, view, out):
    """:func:`step_env` for every env with ``mask[e]``, one after another (``work``: :func:`scratch`);
    returns -1, or :func:`first_bad`'s code (then nothing has changed)."""
    bad = first_bad(mask, actions, avail_now, ep[3])
    if bad != -1:
        return bad
    for e in range(S.shape[0]):
        if mask[e]:
            step_env(e, actions, eng, S, rng, work, ep, rules, view, out)
    return -1


@njit(cache=True, parallel=True)
def step_envs_parallel(chunks, mask, actions, avail_now, eng, S, rng, ep, rules, view, out):
    """:func:`step_envs` with the envs split into ``chunks`` contiguous chunks on Numba's threads (each env
    owns its random stream and rows, so the results are those of the serial call)."""
    bad = first_bad(mask, actions, avail_now, ep[3])
    if bad != -1:
        return bad
    E = S.shape[0]
    for c in prange(chunks):
        work = scratch(S.shape[1])
        for e in range(c * E // chunks, (c + 1) * E // chunks):
            if mask[e]:
                step_env(e, actions, eng, S, rng, work, ep, rules, view, out)
    return -1


@njit(cache=True)
def reset_env(e, eng, spawn, S, rng, work, ep, view):
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
    observe_env(e, na, S, view, last_action, steps, work[5])


@njit(cache=True, inline="always")  # one compile of the step's tree less: sim/jit.py
def reset_envs(mask, eng, spawn, S, rng, work, ep, view):
    """:func:`reset_env` for every env with ``mask[e]``."""
    for e in range(S.shape[0]):
        if mask[e]:
            reset_env(e, eng, spawn, S, rng, work, ep, view)
