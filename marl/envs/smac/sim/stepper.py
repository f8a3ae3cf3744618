"""Compiled entry points: apply agent actions and run 8 ticks for every env; (re)spawn masked envs."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from marl.envs.smac.sim.contact import _push
from marl.envs.smac.sim.jit import engine_jit, engine_jit_inline
from marl.envs.smac.sim.kernel import (
    _ally_act,
    _enemy_healer,
    _regen,
)
from marl.envs.smac.sim.physics import can_hit, rand_int, rand_uniform, walkable
from marl.envs.smac.sim.targeting import _call_for_help, _enemy_act
from marl.envs.smac.sim.units import (
    AIR,
    AMOVE,
    ATTACK,
    CLIFF_WALK,
    ENERGY_START,
    HEAL,
    HEALER,
    HP,
    IDLE,
    LOOPS_PER_STEP,
    MOVE,
    S_CD,
    S_EN,
    S_HP,
    S_HT,
    S_LA,
    S_ML,
    S_MT,
    S_OK,
    S_OX,
    S_OY,
    S_RC,
    S_SH,
    S_SINCE,
    S_TGT,
    S_WT,
    S_WU,
    S_X,
    S_Y,
    SHIELD,
)
from marl.envs.smac.sim.weapons import _missile

# enemy order kinds (EnemyOrder.kind)
ORDER_NONE, ORDER_AMOVE, ORDER_BETWEEN, ORDER_GROUP, ORDER_NEAREST = 0, 1, 2, 3, 4
_MOVE_DX = np.array([0.0, 0.0, 0.0, 1.0, -1.0])  # indexed by action - 1 (stop, N, S, E, W)
_MOVE_DY = np.array([0.0, 1.0, -1.0, 0.0, 0.0])
MOVE_AMOUNT = 2.0


@engine_jit
def _ally_centroid(e, na, S):
    cx = cy = 0.0
    n = 0
    for k in range(na):
        if S[e, k, S_HP] > 0.0:
            cx += S[e, k, S_X]
            cy += S[e, k, S_Y]
            n += 1
    return (cx / n, cy / n, True) if n > 0 else (0.0, 0.0, False)


@engine_jit
def _order_nearest(e, na, props, utype, S):
    """SMACv2's map trigger "Attack" (32x32_flat's MapScript.galaxy, every 0.5 game seconds): every enemy
    without an order is ordered to attack the living ally closest to it (an enemy that cannot hit that ally
    stays idle and acquires on its own; enemy Medivacs keep their healer rule)."""
    u = S.shape[1]
    for k in range(na, u):
        if S[e, k, S_HP] <= 0.0 or props[utype[k], HEALER] > 0:
            continue
        if S[e, k, S_OK] == ATTACK and S[e, int(S[e, k, S_TGT]), S_HP] > 0.0:
            continue
        best, best_d = -1, np.inf
        for j in range(na):
            if S[e, j, S_HP] > 0.0:
                d = (S[e, j, S_X] - S[e, k, S_X]) ** 2 + (S[e, j, S_Y] - S[e, k, S_Y]) ** 2
                if d < best_d:
                    best, best_d = j, d
        if best >= 0 and can_hit(props, utype, k, best):
            S[e, k, S_OK] = ATTACK
            S[e, k, S_TGT] = best


@njit(cache=True)
def check_actions(actions, na, n_act, props, utype):
    """-1 if every action is in range, else the flat index of the first bad one (a Medivac's heal
    targets allies: its attack-slot range is [6, 6 + na))."""
    n_env = actions.shape[0]
    for e in range(n_env):
        for i in range(na):
            a = actions[e, i]
            hi = 6 + na if props[utype[i], HEALER] > 0 else n_act
            if a < 0 or a >= min(hi, n_act):
                return e * na + i
    return -1


@engine_jit
def _issue_orders(e, actions, na, props, utype, enemy_order, S):
    """Turn env ``e``'s SMAC actions into orders, then the map's per-step enemy orders (if any)."""
    u = S.shape[1]
    for i in range(na):
        a = actions[e, i]
        if S[e, i, S_HP] <= 0.0 or a == 0:
            continue  # no-op keeps the current order
        if a == 1:
            S[e, i, S_OK] = IDLE
        elif a <= 5:
            S[e, i, S_OK] = MOVE
            S[e, i, S_OX] = S[e, i, S_X] + MOVE_AMOUNT * _MOVE_DX[a - 1]
            S[e, i, S_OY] = S[e, i, S_Y] + MOVE_AMOUNT * _MOVE_DY[a - 1]
        elif props[utype[i], HEALER] > 0:
            S[e, i, S_OK] = HEAL
            S[e, i, S_TGT] = a - 6
        else:
            S[e, i, S_OK] = ATTACK
            S[e, i, S_TGT] = na + a - 6
    if enemy_order == ORDER_NEAREST:  # the trigger's period (8 loops) is one agent step
        _order_nearest(e, na, props, utype, S)
    if enemy_order == ORDER_GROUP:
        cx, cy, ok = _ally_centroid(e, na, S)
        if ok:
            for k in range(na, u):
                S[e, k, S_OX] = cx
                S[e, k, S_OY] = cy


@engine_jit
def _shuffle(e, u, rng, perm):
    """A fresh update order of the ``u`` units in ``perm`` (Fisher-Yates on env ``e``'s stream)."""
    for k in range(u):
        perm[k] = k
    for k in range(u - 1, 0, -1):
        j = rand_int(rng, e, k + 1)
        perm[k], perm[j] = perm[j], perm[k]


@engine_jit_inline
def _settle_cooldowns(e, S):
    """After a step's loops: a weapon that came ready during a loop and stayed unused is just ready (the
    carried part of ``kernel._regen`` lives only within its loop), and one that came ready in the last
    loop (``S_RC``, kept for the next step) is ready too, so every cooldown the state shows is >= 0, as the
    game's ``weapon_cooldown``."""
    for i in range(S.shape[1]):
        if S[e, i, S_CD] < 0.0 or S[e, i, S_RC] < 0.0:
            S[e, i, S_CD] = 0.0


@engine_jit_inline
def _update_unit(e, i, na, props, utype, grid, nav, S, rng, last):
    """One loop of unit ``i``: its missile in flight (which flies on after its launcher's death), then, if
    it lives, regeneration and its action; returns True for an enemy on automatic targeting, whose action
    (``targeting._enemy_act`` or a candidate rule's) the caller runs."""
    if S[e, i, S_ML] > 0.0:
        _missile(e, i, na, props, utype, S)
    if S[e, i, S_HP] <= 0.0:
        return False
    _regen(e, i, props, utype, S, last)
    if i < na:
        _ally_act(e, i, na, props, utype, grid, nav, S, rng)
    elif props[utype[i], HEALER] > 0:
        _enemy_healer(e, i, na, props, utype, grid, nav, S)
    else:
        return True
    return False


@engine_jit
def _loop(e, na, props, utype, grid, nav, S, rng, buf, idx, perm, last):
    """One game loop of env ``e``: every unit in a fresh random order, then the calls for help
    (``targeting._call_for_help``) and the push (scratch: buf, idx, perm); ``last``: the step's last loop
    (``kernel._regen``)."""
    u = S.shape[1]
    for k in range(u):  # health + shields at the loop's start, for the calls for help (buf is scratch)
        buf[k, 0] = S[e, k, S_HP] + S[e, k, S_SH]
    _shuffle(e, u, rng, perm)
    for k in range(u):
        i = perm[k]
        if _update_unit(e, i, na, props, utype, grid, nav, S, rng, last):
            _enemy_act(e, i, na, props, utype, grid, nav, S, rng)
    _call_for_help(e, na, props, utype, S, buf[:, 0])
    _push(e, props, utype, grid, S, rng, buf, idx)


@engine_jit
def _step_env(e, actions, na, props, utype, grid, nav, enemy_order, S, rng, buf, idx, perm):
    """Issue env ``e``'s SMAC actions as orders, then simulate its 8 game loops (scratch: buf, idx, perm)."""
    _issue_orders(e, actions, na, props, utype, enemy_order, S)
    for k in range(LOOPS_PER_STEP):
        _loop(e, na, props, utype, grid, nav, S, rng, buf, idx, perm, k == LOOPS_PER_STEP - 1)
    _settle_cooldowns(e, S)


@njit(cache=True)
def _first_loop(e, na, props, utype, grid, nav, S, rng):
    """The game loop that passes between a SMAC episode's units being created and its first observation.

    SMAC restarts an episode by killing every unit and stepping the game 2 loops (``_restart``); the map's
    trigger creates the units when none is left and orders the enemies to attack-move, and SMAC observes
    after those loops. D shows what that leaves: at the first observation every enemy of 3m has walked one
    loop (0.1406 = 2.25 / 16) towards the allies, in 389 of 390 recorded episodes, and the allies (no
    orders) stand on their spawn places. So one loop of the engine runs here after a SMAC reset.  (SMACv2
    creates its units itself and orders them by a periodic trigger, so its reset has no such loop.)
    """
    u = S.shape[1]
    buf = np.empty((u, 4))
    idx = np.empty(u, dtype=np.int64)
    perm = np.empty(u, dtype=np.int64)
    _loop(e, na, props, utype, grid, nav, S, rng, buf, idx, perm, np.bool_(False))  # no literal: sim/jit.py
    _settle_cooldowns(e, S)


@njit(cache=True)
def sim_step(actions, na, props, utype, grid, nav, enemy_order, S, rng):
    """Issue the SMAC actions (E, NA) as orders, then simulate 8 game loops in every env, one after another.

    The reference for :func:`sim_step_parallel`: the envs share nothing (each has its own random stream
    ``rng[e]`` and scratch arrays), so both give bit-identical states (tested).
    """
    u = S.shape[1]
    buf = np.empty((u, 4))
    idx = np.empty(u, dtype=np.int64)
    perm = np.empty(u, dtype=np.int64)
    for e in range(S.shape[0]):
        _step_env(e, actions, na, props, utype, grid, nav, enemy_order, S, rng, buf, idx, perm)


@njit(cache=True, parallel=True)
def sim_step_parallel(actions, na, props, utype, grid, nav, enemy_order, S, rng):
    """:func:`sim_step` with the envs spread over Numba's threads (``numba.set_num_threads``)."""
    u = S.shape[1]
    for p in prange(S.shape[0]):
        e = np.int64(p)  # prange's index is unsigned: the per-env code keeps one type (sim/jit.py)
        buf = np.empty((u, 4))
        idx = np.empty(u, dtype=np.int64)
        perm = np.empty(u, dtype=np.int64)
        _step_env(e, actions, na, props, utype, grid, nav, enemy_order, S, rng, buf, idx, perm)


@engine_jit
def _reset_env(e, na, props, utype, grid, base_pos, noise, enemy_order, target, target2, S, rng):
    """Respawn env ``e``: base layout + uniform noise, full stats, enemy orders."""
    u = S.shape[1]
    for i in range(u):
        ut = utype[i]
        x = base_pos[i, 0] + noise * (2.0 * rand_uniform(rng, e) - 1.0)
        y = base_pos[i, 1] + noise * (2.0 * rand_uniform(rng, e) - 1.0)
        ground = props[ut, AIR] == 0 and props[ut, CLIFF_WALK] == 0
        if ground and not walkable(grid, x, y):
            x, y = base_pos[i, 0], base_pos[i, 1]
        S[e, i, S_X] = x
        S[e, i, S_Y] = y
        S[e, i, S_HP] = props[ut, HP]
        S[e, i, S_SH] = props[ut, SHIELD]
        S[e, i, S_EN] = ENERGY_START if props[ut, HEALER] > 0 else 0.0
        S[e, i, S_CD] = 0.0
        S[e, i, S_RC] = 0.0
        S[e, i, S_SINCE] = 1e9
        S[e, i, S_OK] = IDLE
        S[e, i, S_TGT] = -1
        S[e, i, S_LA] = -1
        S[e, i, S_HT] = -1
        S[e, i, S_WU] = 0.0
        S[e, i, S_WT] = -1
        S[e, i, S_ML] = 0.0
        S[e, i, S_MT] = -1
        S[e, i, S_OX] = x
        S[e, i, S_OY] = y
    gx, gy = target[0], target[1]
    if enemy_order == ORDER_BETWEEN:
        f = rand_uniform(rng, e)
        gx = target[0] + f * (target2[0] - target[0])
        gy = target[1] + f * (target2[1] - target[1])
    elif enemy_order == ORDER_GROUP:
        gx, gy, _ = _ally_centroid(e, na, S)
    if enemy_order == ORDER_NEAREST:
        _order_nearest(e, na, props, utype, S)
    elif enemy_order != ORDER_NONE:
        for i in range(na, u):
            S[e, i, S_OK] = AMOVE
            S[e, i, S_OX] = gx
            S[e, i, S_OY] = gy


@njit(cache=True)
def sim_reset(
    mask, na, props, utype, grid, nav, base_pos, noise, enemy_order, target, target2, S, rng, first_loop
):
    """Respawn every env with ``mask[e]`` (see :func:`_reset_env`), then, with ``first_loop`` (SMAC's
    reset), run :func:`_first_loop`."""
    for e in range(S.shape[0]):
        if mask[e]:
            _reset_env(e, na, props, utype, grid, base_pos, noise, enemy_order, target, target2, S, rng)
            if first_loop:
                _first_loop(e, na, props, utype, grid, nav, S, rng)


# ---------------------------------------------------------------- envs with their own units (SMACv2)
# The same per-env code as above with per-env unit types ``utype_EU`` (E, U) and spawn layouts
# ``base_pos_EU`` (E, U, 2): env e runs exactly what a one-env engine of its units runs.


@njit(cache=True)
def sim_reset_typed(mask, na, props, utype_EU, grid, base_pos_EU, noise, enemy_order, S, rng):
    """:func:`sim_reset` with per-env unit types and spawn layouts (orders without a target point)."""
    none = np.zeros(2)
    for e in range(S.shape[0]):
        if mask[e]:
            _reset_env(
                e, na, props, utype_EU[e], grid, base_pos_EU[e], noise, enemy_order, none, none, S, rng
            )


@njit(cache=True)
def sim_step_typed(actions, mask, na, props, utype_EU, grid, nav, enemy_order, S, rng):
    """:func:`sim_step` of the envs with ``mask[e]``, each with its own unit types ``utype_EU[e]``."""
    u = S.shape[1]
    buf = np.empty((u, 4))
    idx = np.empty(u, dtype=np.int64)
    perm = np.empty(u, dtype=np.int64)
    for e in range(S.shape[0]):
        if mask[e]:
            _step_env(e, actions, na, props, utype_EU[e], grid, nav, enemy_order, S, rng, buf, idx, perm)


@njit(cache=True, parallel=True)
def sim_step_typed_parallel(actions, mask, na, props, utype_EU, grid, nav, enemy_order, S, rng):
    """:func:`sim_step_typed` with the envs spread over Numba's threads (same results)."""
    u = S.shape[1]
    for p in prange(S.shape[0]):
        e = np.int64(p)  # as in sim_step_parallel
        if mask[e]:
            buf = np.empty((u, 4))
            idx = np.empty(u, dtype=np.int64)
            perm = np.empty(u, dtype=np.int64)
            _step_env(e, actions, na, props, utype_EU[e], grid, nav, enemy_order, S, rng, buf, idx, perm)
