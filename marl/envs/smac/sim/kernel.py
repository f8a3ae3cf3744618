"""The compiled per-tick update of the embedded engine (Numba, one code path for 1 or many envs).

State layout: one float64 array ``S[env, unit, column]`` (E envs x U units, allies ``0..NA-1`` then
enemies; columns ``units.S_*``: position, health, shield, energy, cooldown loops, loops since damage,
order kind/target/point, last attacker; ids are stored as floats).  Packing the state into
one array keeps the compiled calls cheap (each array argument costs time on every call).

Order kinds (column S_OK): IDLE, MOVE (to the order point, ends on arrival), ATTACK (unit S_TGT; allies
go idle when it dies; enemies get it only from the ``attack_nearest`` order of SMACv2's map), HEAL
(Medivac, ally S_TGT), AMOVE (enemy attack-move to the order point; S_TGT is then the auto-target).

A tick (one game loop): units act in a freshly shuffled order; each living unit regenerates, counts its
cooldown down by one loop, then runs its attack in progress (the weapon's wind-up) or else its order
(moving ``speed`` per loop, or starting an attack when its cooldown is at 0); a missile in flight lands
when its flight time has run out, whether or not its launcher lives.  Then ground units that touch are
pushed apart, the one that gives way by the whole overlap (``contact``: units firing stand, idle ones give
way, a walker slides round what it may not push).  Ground units walk straight to their goal when that is
as short as in open ground, else toward the neighbouring cell with the shortest walk left (a cell-level
BFS table, ``physics.nav_table``); blocked cells stop them and they slide along walls.
Approximations: missiles fly the distance at launch (guided, no path), no turning or acceleration, no
unit-aware path planning (pushes and a slide instead of the game's steering).
"""

from __future__ import annotations

import math

import numpy as np

from marl.envs.smac.sim.jit import engine_jit, engine_jit_inline
from marl.envs.smac.sim.physics import (
    can_hit,
    dist,
    reach,
    step_toward,
)
from marl.envs.smac.sim.units import (
    ATTACK,
    ATTR,
    BIO,
    ENERGY_MAX,
    ENERGY_REGEN,
    HEAL,
    HEAL_START_ENERGY,
    HEALER,
    HP,
    HP_PER_ENERGY,
    IDLE,
    MEDIVAC_AUTOCAST_RANGE,
    MEDIVAC_HEAL,
    MOVE,
    RADIUS,
    RANGE,
    S_CD,
    S_EN,
    S_HP,
    S_HT,
    S_OK,
    S_OX,
    S_OY,
    S_RC,
    S_SH,
    S_SINCE,
    S_TGT,
    S_WU,
    S_X,
    S_Y,
    SHIELD,
    SHIELD_REGEN,
    SHIELD_REGEN_DELAY,
    SPEED,
    ZERG_HP_REGEN,
    ZERG_REGEN,
)
from marl.envs.smac.sim.weapons import _attack, _wind_up


@engine_jit
def _heal(e, i, t, prev, props, utype, grid, nav, S):
    """Medivac ``i`` flies to ``t`` and heals 9 HP per game-s, 1 energy per 3 HP.

    ``prev`` is the unit ``i`` healed in the previous loop (-1: none; the caller has cleared ``S_HT``).  A
    heal needs ``HEAL_START_ENERGY`` (5) to start and then goes on while energy lasts (Liquipedia, "Heal":
    at least 5 energy to start); healing another unit, or again after a pause, is a new start.
    """
    if dist(e, i, t, S) > reach(props, utype, i, t, RANGE):
        step_toward(e, i, S[e, t, S_X], S[e, t, S_Y], props[utype[i], SPEED], S, props, utype, grid, nav)
        return
    if prev != t and S[e, i, S_EN] < HEAL_START_ENERGY:
        return
    amount = min(MEDIVAC_HEAL, props[utype[t], HP] - S[e, t, S_HP], S[e, i, S_EN] * HP_PER_ENERGY)
    if amount > 0.0:
        S[e, t, S_HP] += amount
        S[e, i, S_EN] -= amount / HP_PER_ENERGY
        if S[e, i, S_EN] > 0.0:  # spent: the heal ends, and the next one needs 5 energy again
            S[e, i, S_HT] = t


@engine_jit_inline
def _end_heal(e, i, S):
    """Clear healer ``i``'s running heal for this loop and return the unit it healed in the last one."""
    prev = int(S[e, i, S_HT])
    S[e, i, S_HT] = -1.0
    return prev


@engine_jit
def _enemy_healer(e, i, na, props, utype, grid, nav, S):
    """Enemy Medivac: auto-cast heal on the wounded biological ally with the lowest life fraction, the
    nearest on a tie, within the ability's auto-cast range (Liberty's ``MedivacHeal``: AutoCastRange 6,
    TargetSorts TSLifeFraction then TSDistance), else follow its army's centroid."""
    u = S.shape[1]
    best = np.int64(-1)  # not the literal -1, which would compile _heal for it too (sim/jit.py)
    best_frac = 1.0
    best_d = 0.0
    cx = cy = 0.0
    n = 0
    for k in range(na, u):
        if k == i or S[e, k, S_HP] <= 0.0 or props[utype[k], HEALER] > 0:
            continue
        cx += S[e, k, S_X]
        cy += S[e, k, S_Y]
        n += 1
        frac = S[e, k, S_HP] / props[utype[k], HP]
        d = dist(e, i, k, S)
        if (
            (int(props[utype[k], ATTR]) & BIO) != 0
            and (frac < best_frac or (best >= 0 and frac == best_frac and d < best_d))
            and d <= MEDIVAC_AUTOCAST_RANGE + props[utype[k], RADIUS]
        ):
            best_frac = frac
            best_d = d
            best = k
    prev = _end_heal(e, i, S)
    if best >= 0:
        _heal(e, i, best, prev, props, utype, grid, nav, S)
    elif n > 0:
        cx /= n
        cy /= n
        if math.hypot(cx - S[e, i, S_X], cy - S[e, i, S_Y]) > 2.0:
            step_toward(e, i, cx, cy, props[utype[i], SPEED], S, props, utype, grid, nav)


@engine_jit
def _ally_act(e, i, na, props, utype, grid, nav, S, rng):
    """Passive ally: run the current order only (no auto-acquire, no retaliation), once an attack in
    progress has run to its end (:func:`_wind_up`)."""
    k = int(S[e, i, S_OK])
    prev = _end_heal(e, i, S) if props[utype[i], HEALER] > 0 else -1
    if S[e, i, S_WU] > 0.0:
        _wind_up(e, i, na, props, utype, S)
        return
    if k == MOVE:
        speed = props[utype[i], SPEED]
        if step_toward(e, i, S[e, i, S_OX], S[e, i, S_OY], speed, S, props, utype, grid, nav):
            S[e, i, S_OK] = IDLE
    elif k == ATTACK:
        t = int(S[e, i, S_TGT])
        if S[e, t, S_HP] <= 0.0 or not can_hit(props, utype, i, t):
            S[e, i, S_OK] = IDLE
        else:
            _attack(e, i, t, na, props, utype, grid, nav, S, rng)
    elif k == HEAL:
        t = int(S[e, i, S_TGT])
        if S[e, t, S_HP] <= 0.0:
            S[e, i, S_OK] = IDLE
        else:
            _heal(e, i, t, prev, props, utype, grid, nav, S)


@engine_jit_inline
def _regen(e, i, props, utype, S, last):
    """Per-loop regeneration and cooldown countdown of a living unit (the cooldown as a continuous timer:
    ``weapons._start_attack``); ``last``: this is the step's last loop.

    A weapon that comes ready part-way through a loop may fire in that loop, its next cooldown counting from
    the moment it came ready (the negative part carried), except in the step's last loop: there it fires
    in the next step's first loop at the earliest, still counting from that moment (``S_RC`` keeps it
    across the step; the state shows the cooldown as 0). D (``benchmarks/fidelity/recorded_cooldowns.py``): of
    the game's allies that kept attacking an enemy in range with 7-8 loops of cooldown left at a step's start,
    none began an attack in that step (0 of 1,017; with 6-7 loops left all 935 did), and the next step's
    cooldown then implies a random delay within X's [-1, +2] loops exactly when counted from the moment it
    came ready (642 steps, KS p 0.76). A weapon ready since an earlier loop and unused carries nothing.
    """
    ut = utype[i]
    S[e, i, S_SINCE] += 1.0
    if props[ut, SHIELD] > 0 and S[e, i, S_SINCE] > SHIELD_REGEN_DELAY:
        S[e, i, S_SH] = min(props[ut, SHIELD], S[e, i, S_SH] + SHIELD_REGEN)
    if props[ut, ZERG_REGEN] > 0:
        S[e, i, S_HP] = min(props[ut, HP], S[e, i, S_HP] + ZERG_HP_REGEN)
    if props[ut, HEALER] > 0:
        S[e, i, S_EN] = min(ENERGY_MAX, S[e, i, S_EN] + ENERGY_REGEN)
    cd = S[e, i, S_CD]
    if S[e, i, S_RC] < 0.0:  # came ready in the last step's last loop: ready now, carrying since then
        S[e, i, S_CD] = S[e, i, S_RC]
        S[e, i, S_RC] = 0.0
    elif cd > 1.0 or (cd > 0.0 and not last):
        S[e, i, S_CD] = cd - 1.0  # below 0: the weapon came ready part-way through this loop (carried)
    elif cd > 0.0:  # comes ready in the step's last loop: not before the next step (S_CD stays > 0 here)
        S[e, i, S_RC] = cd - 2.0  # its cooldown at the next step's first loop
    elif cd < 0.0:
        S[e, i, S_CD] = 0.0  # ready since an earlier loop and unused: nothing left to carry
