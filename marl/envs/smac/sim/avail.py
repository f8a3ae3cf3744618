"""SMAC action availability (docs/smac.md §4) computed straight from the engine state, for whole batches.

This mirrors SMAC's rules so that scripted policies, tests and benchmarks can pick valid actions
without the feature layer: a dead agent may only no-op (0); a living one may stop (1), move d (2..5)
if the cell one unit ahead (``int(pos + d)``) is on the map and walkable, and attack enemy j
(``6 + j``) if it is alive and at most ``SHOOT_RANGE`` away centre to centre.  A Medivac's ``6 + j``
heals ally j instead (alive, not a Medivac, within ``SHOOT_RANGE``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from marl.envs.smac.sim.physics import walkable
from marl.envs.smac.sim.units import HEALER, S_HP, S_X, S_Y

SHOOT_RANGE = 6.0
_DX = (0.0, 0.0, 1.0, -1.0)
_DY = (1.0, -1.0, 0.0, 0.0)


@njit(cache=True)
def avail_actions(na, props, utype, grid, S, out):
    """Fill ``out`` (E, NA, 6 + NE) bool with SMAC's available actions for every env."""
    n_env, u = S.shape[0], S.shape[1]
    n_act = out.shape[2]
    r2 = SHOOT_RANGE * SHOOT_RANGE
    out[:] = False
    for e in range(n_env):
        for i in range(na):
            if S[e, i, S_HP] <= 0.0:
                out[e, i, 0] = True
                continue
            x, y = S[e, i, S_X], S[e, i, S_Y]
            out[e, i, 1] = True
            for d in range(4):
                out[e, i, 2 + d] = walkable(grid, x + _DX[d], y + _DY[d])
            healer = props[utype[i], HEALER] > 0
            lo, hi = (0, na) if healer else (na, u)
            for j in range(lo, hi):
                a = 6 + j - lo
                if a >= n_act or S[e, j, S_HP] <= 0.0 or (healer and props[utype[j], HEALER] > 0):
                    continue
                dx = S[e, j, S_X] - x
                dy = S[e, j, S_Y] - y
                out[e, i, a] = dx * dx + dy * dy <= r2
    return out


@njit(cache=True)
def sample_env(avail, u, e, act):
    """Row ``e`` of :func:`sample_available`, written into ``act[e]``."""
    na, n_act = avail.shape[1], avail.shape[2]
    for i in range(na):
        act[e, i] = 0
        cnt = 0
        for a in range(n_act):
            cnt += avail[e, i, a]
        k = int(u[e, i] * cnt)
        for a in range(n_act):
            if avail[e, i, a]:
                if k == 0:
                    act[e, i] = a
                    break
                k -= 1


@njit(cache=True)
def sample_available(avail, u):
    """One uniformly random available action per (env, agent); ``u`` (E, NA) uniforms in [0, 1)."""
    act = np.zeros(avail.shape[:2], dtype=np.int64)
    for e in range(avail.shape[0]):
        sample_env(avail, u, e, act)
    return act


RUNNING, WON, LOST, DRAW = 0, 1, 2, 3


@njit(cache=True)
def battle_status(na, props, utype, S, medivac_rule):
    """Per env: RUNNING, WON (allies alive, enemies gone), LOST, or DRAW (both gone) by SMAC's rule.

    With ``medivac_rule`` (MMM maps) a side whose only survivors are Medivacs counts as gone.
    """
    n_env, u = S.shape[0], S.shape[1]
    out = np.zeros(n_env, dtype=np.int64)
    for e in range(n_env):
        a_alive = False
        e_alive = False
        for k in range(u):
            if S[e, k, S_HP] > 0.0 and not (medivac_rule and props[utype[k], HEALER] > 0):
                if k < na:
                    a_alive = True
                else:
                    e_alive = True
        if a_alive and not e_alive:
            out[e] = WON
        elif e_alive and not a_alive:
            out[e] = LOST
        elif not (a_alive or e_alive):
            out[e] = DRAW
    return out
