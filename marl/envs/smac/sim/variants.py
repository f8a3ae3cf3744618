"""The kernels of the candidate rules of the built-in AI, for fitting the engine to recorded games (NOT the
default). The rules themselves (names, numbers, meaning, sources): :mod:`~marl.envs.smac.sim.rules`.

The default engine (``targeting._enemy_act``) never runs this module: :class:`~marl.envs.smac.sim.engine.
BatchedSimEngine` uses :func:`sim_step_rules` only when built with a non-zero ``rules`` array, so default
results stay bit-identical and pay nothing.  The rules are data (an int64 array the compiled code receives),
never a module-level switch, so Numba's on-disk cache cannot serve a stale variant.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from marl.envs.smac.sim.contact import _push, push_passes
from marl.envs.smac.sim.jit import engine_jit
from marl.envs.smac.sim.physics import can_hit, dist, rand_int, reach, step_toward
from marl.envs.smac.sim.rules import (  # noqa: F401 (N_V, parse_rules: re-exported)
    LEASH_RESET,
    MELEE_RANGE,
    N_V,
    R_CHASE,
    R_CLOSER,
    R_DEATH_BURST,
    R_DELAY,
    R_IN_RANGE,
    R_KEEP_FOE,
    R_KEEP_MELEE,
    R_KEEP_RANGED,
    R_LEASH,
    R_NO_HELP,
    R_NO_RETALIATE,
    R_PREF_ATTACKER,
    R_PUSH,
    R_RANDOM,
    R_SCAN,
    R_SHARED,
    R_STICK,
    R_THREAT_RANGE,
    R_UNPIN,
    V_AX,
    V_AY,
    V_DELAY,
    V_LEASHED,
    V_SCAN,
    V_STICK,
    parse_rules,
)
from marl.envs.smac.sim.stepper import _issue_orders, _settle_cooldowns, _shuffle, _update_unit
from marl.envs.smac.sim.targeting import (
    _busy,
    _call_for_help,
    _fresh_attacker,
    _is_threat,
    _kept,
    _lost,
)
from marl.envs.smac.sim.units import (
    ACQUIRE,
    AMOVE,
    ATTACK,
    LOOPS_PER_STEP,
    RANGE,
    S_HP,
    S_LA,
    S_OK,
    S_OX,
    S_OY,
    S_SH,
    S_TGT,
    S_X,
    S_Y,
    SPEED,
    SPLASH,
    SPLASH_EXPLODE,
)
from marl.envs.smac.sim.weapons import _attack, _burst


@engine_jit
def _class(e, i, j, props, utype, S, rules):
    """Candidate class of ally ``j`` for enemy ``i`` (lower first): threats in their own range or attacking
    ``i``, threats, others."""
    if not _is_threat(props, utype, j, i):
        return 2
    if rules[R_PREF_ATTACKER] > 0 and S[e, j, S_OK] == ATTACK and int(S[e, j, S_TGT]) == i:
        return 0
    if rules[R_THREAT_RANGE] > 0 and dist(e, i, j, S) <= reach(props, utype, j, i, RANGE):
        return 0
    return 1


@engine_jit
def _acquire_rules(e, i, na, props, utype, S, rng, rules):
    """``targeting._acquire`` with the rules: the closest (or a random) candidate of the best class within the
    scan range, else the last attacker, or -1."""
    best, best_cls, best_d, count = -1, 3, 1e18, 0
    for j in range(na):
        if S[e, j, S_HP] <= 0.0 or not can_hit(props, utype, i, j):
            continue
        d = dist(e, i, j, S)
        if d > reach(props, utype, i, j, ACQUIRE):
            continue
        c = _class(e, i, j, props, utype, S, rules)
        if c < best_cls:
            best, best_cls, best_d, count = j, c, d, 1
        elif c == best_cls:
            count += 1
            if d < best_d:
                best, best_d = j, d
    if best >= 0 and rules[R_RANDOM] > 0 and count > 1:
        pick = rand_int(rng, e, count)
        for j in range(na):
            if S[e, j, S_HP] <= 0.0 or not can_hit(props, utype, i, j):
                continue
            if dist(e, i, j, S) > reach(props, utype, i, j, ACQUIRE):
                continue
            if _class(e, i, j, props, utype, S, rules) == best_cls:
                if pick == 0:
                    return j
                pick -= 1
    if best < 0:
        la = int(S[e, i, S_LA])
        if 0 <= la < na and S[e, la, S_HP] > 0.0 and can_hit(props, utype, i, la):
            best = la
    return best


@engine_jit
def _scan_due(e, i, S, rng, rules, V):
    """Whether enemy ``i`` may search for a target this loop (every loop unless ``R_SCAN`` > 1)."""
    k = rules[R_SCAN]
    if k <= 1:
        return True
    if rules[R_SHARED] > 0:
        return V[e, 0, V_SCAN] == 0.0
    if V[e, i, V_SCAN] < 0.0:
        V[e, i, V_SCAN] = rand_int(rng, e, k)
    due = V[e, i, V_SCAN] == 0.0
    V[e, i, V_SCAN] = k - 1 if due else V[e, i, V_SCAN] - 1.0
    return due


@engine_jit
def _from_leash_point(e, i, S, V):
    """How far unit ``i`` stands from its leash point (centre to centre)."""
    return math.hypot(S[e, i, S_X] - V[e, i, V_AX], S[e, i, S_Y] - V[e, i, V_AY])


@engine_jit
def _kept_leash(e, i, na, props, utype, S, V, radius):
    """``targeting._kept`` under ``R_LEASH``: a target beyond weapon range is kept (chased) while the unit
    stands within ``radius`` of its leash point; past it the target is dropped and the unit leashed."""
    t = int(S[e, i, S_TGT])
    if t < 0 or _lost(e, i, t, na, props, utype, S):
        return -1
    if dist(e, i, t, S) > reach(props, utype, i, t, RANGE) and _from_leash_point(e, i, S, V) > radius:
        V[e, i, V_LEASHED] = 1.0
        return -1
    return t


@engine_jit
def _leashed_walk(e, i, props, utype, grid, nav, S, V):
    """A leashed unit walks back to its leash point and acquires nothing until it is within
    ``LEASH_RESET`` of it; whether it still was leashed this loop."""
    if V[e, i, V_LEASHED] <= 0.0:
        return False
    if _from_leash_point(e, i, S, V) <= LEASH_RESET:
        V[e, i, V_LEASHED] = -1.0
        return False
    S[e, i, S_TGT] = -1
    step_toward(e, i, V[e, i, V_AX], V[e, i, V_AY], props[utype[i], SPEED], S, props, utype, grid, nav)
    return True


@engine_jit
def _enemy_act_rules(e, i, na, props, utype, grid, nav, S, rng, rules, V):
    """``targeting._enemy_act`` with the candidate rules (see the module docstring)."""
    due = _scan_due(e, i, S, rng, rules, V)  # the scan clock runs in every loop, wind-ups included
    V[e, i, V_STICK] -= 1.0  # so does the hold after a retaliation switch
    if _busy(e, i, na, props, utype, grid, nav, S, rng):
        return
    leash = rules[R_LEASH] > 0
    if leash and _leashed_walk(e, i, props, utype, grid, nav, S, V):
        return
    old = int(S[e, i, S_TGT])
    if leash:
        t = _kept_leash(e, i, na, props, utype, S, V, rules[R_LEASH])
    else:
        t = _kept(e, i, na, props, utype, S)
    hit_by = -1 if rules[R_NO_RETALIATE] > 0 else _fresh_attacker(e, i, na, props, utype, S)
    if rules[R_KEEP_FOE] > 0 and t >= 0 and int(S[e, t, S_TGT]) == i:
        hit_by = -1  # its target is fighting it: no switch
    if rules[R_STICK] > 0 and t >= 0 and V[e, i, V_STICK] > 0.0:
        hit_by = -1  # still holding the attacker it last switched to
    if rules[R_KEEP_MELEE] > 0 or rules[R_KEEP_RANGED] > 0:
        melee = props[utype[i], RANGE] < MELEE_RANGE
        if rules[R_KEEP_MELEE if melee else R_KEEP_RANGED] > 0:
            hit_by = -1  # no retaliation switch for this class of unit
    if (
        rules[R_IN_RANGE] > 0
        and t >= 0
        and hit_by >= 0
        and dist(e, i, hit_by, S) > reach(props, utype, i, hit_by, RANGE)
    ):
        hit_by = -1  # the attacker stands beyond its weapon's reach: it keeps the target it is fighting
    if rules[R_CLOSER] > 0 and t >= 0 and hit_by >= 0:
        if dist(e, i, hit_by, S) > dist(e, i, t, S) + 0.25 * (rules[R_CLOSER] - 1):
            hit_by = -1  # the attacker stands farther than the target it is fighting (beyond the margin)
    if hit_by >= 0:
        if rules[R_STICK] > 0 and hit_by != t:
            V[e, i, V_STICK] = rules[R_STICK]
        t = hit_by
    if t < 0 and due:
        t = _acquire_rules(e, i, na, props, utype, S, rng, rules)
    if t >= 0 and t != old:
        V[e, i, V_DELAY] = rules[R_DELAY]
        if old < 0:  # a target after none: the leash point is where the unit stands
            V[e, i, V_AX], V[e, i, V_AY] = S[e, i, S_X], S[e, i, S_Y]
    S[e, i, S_TGT] = t
    if t >= 0 and V[e, i, V_DELAY] <= 0.0:
        _attack(e, i, t, na, props, utype, grid, nav, S, rng)
        return
    if t >= 0:
        V[e, i, V_DELAY] -= 1.0
    if S[e, i, S_OK] == AMOVE:
        step_toward(e, i, S[e, i, S_OX], S[e, i, S_OY], props[utype[i], SPEED], S, props, utype, grid, nav)


@engine_jit
def _death_bursts(e, i, na, props, utype, S, alive):
    """``R_DEATH_BURST``: after unit ``i``'s update, the burst of every baneling that ``alive`` (its flags at
    the last check) holds alive and that died meanwhile, except ``i`` itself (a baneling that attacked:
    its attack removes the death burst first, X ``BanelingDontExplode``); repeated while bursts kill."""
    again = True
    while again:
        again = False
        for b in range(S.shape[1]):
            if alive[b] and S[e, b, S_HP] <= 0.0:
                alive[b] = False
                if b != i and props[utype[b], SPLASH] == SPLASH_EXPLODE:
                    _burst(e, b, na, props, utype, S)
                    again = True


@njit(cache=True)
def sim_step_rules(actions, na, props, utype, grid, nav, enemy_order, S, rng, rules, V):
    """``stepper.sim_step`` with the enemies on :func:`_enemy_act_rules` (serial; same order of updates)."""
    u = S.shape[1]
    buf = np.empty((u, 4))
    idx = np.empty(u, dtype=np.int64)
    perm = np.empty(u, dtype=np.int64)
    alive = np.empty(u, dtype=np.bool_)
    hp0 = np.empty(u)
    bursts = rules[R_DEATH_BURST] > 0
    helps = rules[R_NO_HELP] == 0
    for e in range(S.shape[0]):
        _issue_orders(e, actions, na, props, utype, enemy_order, S)
        for k in range(u):
            alive[k] = S[e, k, S_HP] > 0.0
        for loop in range(LOOPS_PER_STEP):
            if rules[R_SHARED] > 0 and rules[R_SCAN] > 1:  # the env's scan clock: one tick per loop
                V[e, 0, V_SCAN] = (
                    rand_int(rng, e, rules[R_SCAN])
                    if V[e, 0, V_SCAN] < 0.0
                    else (V[e, 0, V_SCAN] - 1.0) % rules[R_SCAN]
                )
            if helps:
                for k in range(u):
                    hp0[k] = S[e, k, S_HP] + S[e, k, S_SH]
            _shuffle(e, u, rng, perm)
            for k in range(u):
                i = perm[k]
                if _update_unit(e, i, na, props, utype, grid, nav, S, rng, loop == LOOPS_PER_STEP - 1):
                    _enemy_act_rules(e, i, na, props, utype, grid, nav, S, rng, rules, V)
                if bursts:
                    _death_bursts(e, i, na, props, utype, S, alive)
            if helps:
                _call_for_help(e, na, props, utype, S, hp0)
            if rules[R_PUSH] > 1 or rules[R_UNPIN] > 0 or rules[R_CHASE] > 0:
                passes = max(rules[R_PUSH], 1)
                chase = 0.25 * rules[R_CHASE]
                push_passes(e, passes, props, utype, grid, S, rng, buf, idx, rules[R_UNPIN] > 0, chase)
            else:
                _push(e, props, utype, grid, S, rng, buf, idx)
        _settle_cooldowns(e, S)
