"""Numba building blocks of the engine: per-env random numbers, damage, movement and walls.

Every function works on one env ``e`` of the batched structure-of-arrays state (arrays shaped
``(E, U, ...)``, allies first then enemies), so a batch of envs and a single env run the same code.

Random numbers: each env owns one 64-bit state in ``rng[e]`` advanced by SplitMix64, so the stream of an
env depends only on its own seed and on the calls made for it, never on the other envs of a batch.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from marl.envs.smac.sim.jit import engine_jit, engine_jit_inline
from marl.envs.smac.sim.units import (
    AIR,
    ARMOR,
    ATTR,
    BONUS_ATTR,
    BONUS_DMG,
    CLIFF_WALK,
    DMG,
    HITS_AIR,
    HITS_GROUND,
    RADIUS,
    S_HP,
    S_LA,
    S_SH,
    S_SINCE,
    S_X,
    S_Y,
)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0


@engine_jit_inline
def rand_u64(rng, e):
    """Next SplitMix64 output of env ``e``'s stream."""
    x = rng[e] + _GOLDEN
    rng[e] = x
    z = (x ^ (x >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@engine_jit_inline
def rand_uniform(rng, e):
    """Uniform float in [0, 1) from env ``e``'s stream."""
    return float(rand_u64(rng, e) >> _S11) * _INV53


@engine_jit_inline
def rand_int(rng, e, n):
    """Uniform integer in [0, n) from env ``e``'s stream."""
    k = int(rand_uniform(rng, e) * n)
    return k if k < n else n - 1


@engine_jit_inline
def can_hit(props, utype, a, t):
    """Whether unit ``a``'s weapon can target unit ``t`` (air/ground layer)."""
    if props[utype[t], AIR] > 0:
        return props[utype[a], HITS_AIR] > 0
    return props[utype[a], HITS_GROUND] > 0 and props[utype[a], DMG] > 0


@engine_jit
def apply_hit(e, a, t, props, utype, S):
    """One weapon hit of ``a`` on ``t``: bonus by attribute, shields first, then HP armour (min 0.5).

    Order (Liquipedia, "Plasma Shield", StarCraft II): shields are removed before any hit points; they
    take the damage the attacker's attribute bonus gives (a Marauder deals 20 to a Stalker's shields, 10 to
    a Zealot's) and have their own armour, 0 without upgrades (none on SMAC's maps); the unit's armour
    reduces only the damage that reaches hit points.  The 0.5 floor is Liquipedia's "Armor" rule for Brood
    War (no StarCraft II page read); it never binds on SMAC's maps (smallest hit 5, largest armour 2).
    """
    ua = utype[a]
    ut = utype[t]
    dmg = props[ua, DMG]
    battr = int(props[ua, BONUS_ATTR])
    if battr != 0 and (int(props[ut, ATTR]) & battr) != 0:
        dmg += props[ua, BONUS_DMG]
    if S[e, t, S_SH] > 0.0:
        absorbed = min(S[e, t, S_SH], dmg)
        S[e, t, S_SH] -= absorbed
        dmg -= absorbed
    if dmg > 0.0:
        S[e, t, S_HP] -= max(dmg - props[ut, ARMOR], 0.5)
        if S[e, t, S_HP] <= 0.0:
            S[e, t, S_HP] = 0.0
    S[e, t, S_SINCE] = 0.0
    S[e, t, S_LA] = a  # the last unit that attacked t (the built-in AI's response)


@engine_jit_inline
def walkable(grid, x, y):
    """True if the point lies in a walkable cell of the (x, y)-indexed grid (outside the map: False)."""
    if x < 0.0 or y < 0.0:
        return False
    ix = int(x)
    iy = int(y)
    if ix >= grid.shape[0] or iy >= grid.shape[1]:
        return False
    return grid[ix, iy]


@engine_jit_inline
def try_move(e, i, nx, ny, S, props, utype, grid):
    """Move unit ``i`` to (nx, ny) if allowed, else slide along one axis, else stay.

    Air units and cliff walkers only have to stay on the map; a ground unit standing on a blocked cell
    (spawn noise, pushes) may move anywhere so it can never be trapped.
    """
    x = S[e, i, S_X]
    y = S[e, i, S_Y]
    ut = utype[i]
    if props[ut, AIR] > 0 or props[ut, CLIFF_WALK] > 0 or not walkable(grid, x, y):
        w = float(grid.shape[0])
        h = float(grid.shape[1])
        S[e, i, S_X] = min(max(nx, 0.0), w - 1e-6)
        S[e, i, S_Y] = min(max(ny, 0.0), h - 1e-6)
        return
    if walkable(grid, nx, ny):
        S[e, i, S_X] = nx
        S[e, i, S_Y] = ny
    elif walkable(grid, nx, y):
        S[e, i, S_X] = nx
    elif walkable(grid, x, ny):
        S[e, i, S_Y] = ny


@njit(cache=True)
def nav_table(grid):
    """Geodesic distances (int16, cells, 8-connected unit steps) between all cells: ``nav[goal, cell]``.

    -1 marks unreachable or blocked cells.  A diagonal step needs one of its two orthogonal neighbours
    walkable (units may cut a corner but not pass between two diagonal walls).
    """
    w, h = grid.shape
    c = w * h
    nav = np.full((c, c), -1, dtype=np.int16)
    queue = np.empty(c, dtype=np.int64)
    for g in range(c):
        gx, gy = g // h, g % h
        if not grid[gx, gy]:
            continue
        nav[g, g] = 0
        queue[0] = g
        head, tail = 0, 1
        while head < tail:
            cur = queue[head]
            head += 1
            cx, cy = cur // h, cur % h
            for dx in range(-1, 2):
                for dy in range(-1, 2):
                    nx, ny = cx + dx, cy + dy
                    if (dx == 0 and dy == 0) or nx < 0 or ny < 0 or nx >= w or ny >= h or not grid[nx, ny]:
                        continue
                    if dx != 0 and dy != 0 and not (grid[cx + dx, cy] or grid[cx, cy + dy]):
                        continue
                    n = nx * h + ny
                    if nav[g, n] < 0:
                        nav[g, n] = nav[g, cur] + 1
                        queue[tail] = n
                        tail += 1
    return nav


@engine_jit_inline
def _waypoint(x, y, tx, ty, grid, nav):
    """Where a ground unit at (x, y) should head to reach (tx, ty): the goal itself when the walk is as
    short as in open ground, else the centre of the neighbouring cell with the shortest walk left."""
    w, h = grid.shape
    ix, iy, gx, gy = int(x), int(y), int(tx), int(ty)
    if ix < 0 or iy < 0 or ix >= w or iy >= h or gx < 0 or gy < 0 or gx >= w or gy >= h:
        return tx, ty
    g = gx * h + gy
    here = nav[g, ix * h + iy]
    if here < 0 or here <= max(abs(gx - ix), abs(gy - iy)) + 1:
        return tx, ty
    best = here
    bx, by = tx, ty
    best_d = 1e18
    for dx in range(-1, 2):
        for dy in range(-1, 2):
            nx, ny = ix + dx, iy + dy
            if nx < 0 or ny < 0 or nx >= w or ny >= h:
                continue
            v = nav[g, nx * h + ny]
            if v < 0 or v > best:
                continue
            d = (nx + 0.5 - tx) ** 2 + (ny + 0.5 - ty) ** 2
            if v < best or d < best_d:
                best, best_d = v, d
                bx, by = nx + 0.5, ny + 0.5
    return bx, by


@engine_jit
def step_toward(e, i, tx, ty, step, S, props, utype, grid, nav):
    """Move ``i`` up to ``step`` units toward (tx, ty), walking round walls through the nav table;
    returns True once it stands on the point."""
    x = S[e, i, S_X]
    y = S[e, i, S_Y]
    wx, wy = tx, ty
    if props[utype[i], AIR] == 0 and props[utype[i], CLIFF_WALK] == 0:
        wx, wy = _waypoint(x, y, tx, ty, grid, nav)
    dx = wx - x
    dy = wy - y
    d = math.sqrt(dx * dx + dy * dy)
    if d <= step:
        try_move(e, i, wx, wy, S, props, utype, grid)
    elif step > 0.0:
        try_move(e, i, x + dx * step / d, y + dy * step / d, S, props, utype, grid)
    return S[e, i, S_X] == tx and S[e, i, S_Y] == ty


@engine_jit_inline
def dist(e, a, b, S):
    """Centre-to-centre distance between units ``a`` and ``b`` of env ``e``."""
    dx = S[e, b, S_X] - S[e, a, S_X]
    dy = S[e, b, S_Y] - S[e, a, S_Y]
    return math.sqrt(dx * dx + dy * dy)


@engine_jit_inline
def reach(props, utype, a, t, rng_col):
    """Centre-to-centre reach of ``a`` against ``t`` for a range column (weapon range, acquire...)."""
    return props[utype[a], rng_col] + props[utype[a], RADIUS] + props[utype[t], RADIUS]
