"""Weapons of the embedded engine: an attack's wind-up, its effect (hits, splash, a missile launch) and
missiles in flight (Numba; called by ``kernel`` for every unit, ally or enemy).

An attack starts when the target is within weapon reach and the cooldown is 0 (:func:`_start_attack`);
the weapon's effect comes ``DamagePoint`` loops later (:func:`_wind_up`), and for a missile weapon the
damage lands when the missile arrives (:func:`_missile`).  Every number comes from the game's Liberty and
Core catalogs (``unit_data.yaml``); the readings of fields the game documents by name only are stated
where they are used.
"""

from __future__ import annotations

import math

from marl.envs.smac.sim.jit import engine_jit
from marl.envs.smac.sim.physics import apply_hit, dist, rand_uniform, reach, step_toward
from marl.envs.smac.sim.units import (
    AIR,
    BANE_SPLASH_RADIUS,
    BEAM_HALF_LENGTH,
    BEAM_HALF_WIDTH,
    BURST_GAP,
    CD_JITTER_HI,
    CD_JITTER_LO,
    COOLDOWN,
    EFFECT_DELAY,
    HITS,
    MSL_ACCEL,
    MSL_MAX_SPEED,
    MSL_SPEED,
    RADIUS,
    RANGE,
    RANGE_SLOP,
    S_CD,
    S_HP,
    S_ML,
    S_MT,
    S_WT,
    S_WU,
    S_X,
    S_Y,
    SPEED,
    SPLASH,
    SPLASH_EXPLODE,
    SPLASH_LINE,
    WIND_UP,
)


@engine_jit
def _burst(e, a, na, props, utype, S):
    """Baneling ``a``'s ``VolatileBurstU``: every living hostile ground unit whose edge is within
    ``BANE_SPLASH_RADIUS`` of its centre takes its hit (X: search filter Ground, excluding the caster's own
    and allied units and structures)."""
    lo, hi = (na, S.shape[1]) if a < na else (0, na)  # hostile index range
    for k in range(lo, hi):
        if (
            S[e, k, S_HP] > 0.0
            and props[utype[k], AIR] == 0
            and dist(e, a, k, S) <= BANE_SPLASH_RADIUS + props[utype[k], RADIUS]
        ):
            apply_hit(e, a, k, props, utype, S)


@engine_jit
def _strike(e, a, t, na, props, utype, S):
    """``a``'s weapon effect on ``t``: the hits (with splash), or the baneling's burst; of a weapon whose two
    hits come one period apart (``BURST_GAP``, the zealot), the first hit, the second left to
    :func:`_missile`."""
    ua = utype[a]
    lo, hi = (na, S.shape[1]) if a < na else (0, na)  # hostile index range
    kind = int(props[ua, SPLASH])
    if kind == SPLASH_EXPLODE:
        _burst(e, a, na, props, utype, S)
        S[e, a, S_HP] = 0.0  # the baneling is spent
        return
    for _ in range(int(props[ua, HITS])):
        if kind == SPLASH_LINE:
            # beam through the target, perpendicular to the line of fire
            fx = S[e, t, S_X] - S[e, a, S_X]
            fy = S[e, t, S_Y] - S[e, a, S_Y]
            fn = math.sqrt(fx * fx + fy * fy) + 1e-9
            px, py = -fy / fn, fx / fn
            for k in range(lo, hi):
                if S[e, k, S_HP] <= 0.0 or props[utype[k], AIR] > 0:
                    continue
                rx = S[e, k, S_X] - S[e, t, S_X]
                ry = S[e, k, S_Y] - S[e, t, S_Y]
                along = abs(rx * px + ry * py)
                across = abs(rx * fx + ry * fy) / fn
                rk = props[utype[k], RADIUS]
                if k == t or (along <= BEAM_HALF_LENGTH + rk and across <= BEAM_HALF_WIDTH + rk):
                    apply_hit(e, a, k, props, utype, S)
        elif S[e, t, S_HP] > 0.0:
            apply_hit(e, a, t, props, utype, S)
            if props[ua, BURST_GAP] > 0.0:  # the burst's second hit comes later (see _missile)
                S[e, a, S_MT] = t
                S[e, a, S_ML] = props[ua, BURST_GAP]
                return


@engine_jit
def flight_loops(d, v0, accel, vmax):
    """Loops a missile takes to fly ``d`` from speed ``v0``, accelerating by ``accel`` up to ``vmax`` (per
    loop and per loop squared), rounded up: it lands in the loop it arrives, at least one loop later."""
    if accel <= 0.0 or v0 >= vmax:
        t = d / max(v0, vmax)
    else:
        t_max = (vmax - v0) / accel  # loops to reach the top speed
        d_max = v0 * t_max + 0.5 * accel * t_max * t_max
        if d <= d_max:
            t = (math.sqrt(v0 * v0 + 2.0 * accel * d) - v0) / accel
        else:
            t = t_max + (d - d_max) / vmax
    return max(1, int(math.ceil(t - 1e-9)))


@engine_jit
def _effect(e, a, t, na, props, utype, S):
    """The weapon's effect at the end of its wind-up: a missile launch (missile weapons), a delayed strike
    (the colossus), else the strike.

    A missile weapon's effect is ``CEffectLaunchMissile`` (the game's Liberty EffectData: the stalker's
    ``ParticleDisruptors``, the marauder's ``PunisherGrenadesLM``, the hydralisk's
    ``NeedleSpinesLaunchMissile``, the spine crawler's ``ImpalerTentacleLM``); its damage is the launch's
    ``ImpactEffect``, applied when the missile arrives.  The missile unit's mover (Liberty/Core MoverData)
    gives its speed; it is a guided (``Guidance``) missile, modelled as flying the edge-to-edge distance at
    launch.  A missile is a unit of its own (its ``AmmoUnit`` has parent ``MISSILE``), so it flies on if its
    launcher dies (our reading; no source states it).

    The colossus's effect, ``ThermalLances`` (X: Liberty EffectData), starts two ``CEffectCreatePersistent``
    sweeps on the target at once, ``ThermalLancesForward`` and ``ThermalLancesReverse``: each hits the target
    with its ``ExpireEffect`` ``ThermalLancesMU`` (20) at its ``ExpireDelay``, 0.375 s (6 loops), and its 11
    searches (``PeriodicPeriodArray`` 0.0312 s, radius 0.15 round points from -1.25 to +1.25 beside the
    target) give every other ground unit they find a ``ThermalLancesDamageDelay``, which hits it with the
    same ``ThermalLancesMU`` 0.25 s (4 loops) later. The engine lands it all at the target's time
    (``EFFECT_DELAY`` loops), on the units beside the target then (:func:`_strike`); in the game the others
    are hit about 4.5 to 9.5 loops after the effect, where each search found them. The sweeps are flagged
    ``Channeled``; as for the zealot's burst we read it as "ends when its caster dies", so a colossus killed
    in between lands nothing (in the game the units already found would still be hit).
    """
    ua = utype[a]
    if props[ua, MSL_MAX_SPEED] > 0.0:
        d = max(0.0, dist(e, a, t, S) - props[ua, RADIUS] - props[utype[t], RADIUS])
        S[e, a, S_MT] = t
        S[e, a, S_ML] = flight_loops(d, props[ua, MSL_SPEED], props[ua, MSL_ACCEL], props[ua, MSL_MAX_SPEED])
    elif props[ua, EFFECT_DELAY] > 0.0:
        S[e, a, S_MT] = t
        S[e, a, S_ML] = props[ua, EFFECT_DELAY]
    else:
        _strike(e, a, t, na, props, utype, S)


@engine_jit
def _start_attack(e, a, t, na, props, utype, S, rng):
    """``a`` begins an attack on ``t``: its cooldown starts (``Period`` plus a random delay drawn uniformly
    from [-1, +2] loops, the game's ``RandomDelayMin``/``Max``, see ``units``) and its wind-up runs
    ``DamagePoint`` loops (Liberty WeaponData) before the effect; with no wind-up the effect comes at once.
    A weapon that came ready part-way through this loop (its cooldown is below 0, ``kernel._regen``)
    counts the new cooldown from that moment: the attacks of a unit that keeps attacking start ``Period +
    delay`` apart in continuous time, not rounded to whole loops.

    Sources: X gives every weapon's ``Period`` and ``DamagePoint``.  That the period is the time between the
    starts of two attacks: SC2Pod's "Attack speed" ("how many game seconds the unit must wait between
    attacks"); that the cooldown starts with the wind-up rather than at the damage: a public third-party
    simulator of SC2 combat (secondary; no Blizzard source found).  D (the game's 3m episodes, whose state
    shows each ally's cooldown; ``benchmarks/fidelity/recorded_cooldowns.py``): after a fresh attack the
    cooldown left is ``Period + delay - 7`` with the delay uniform over the reals in [-1, +2] (the attack
    starts one loop into the step, as here), and after a shot that follows the last one's cooldown it is
    ``Period + delay - 8 + c`` (``c`` the cooldown at the step's start): the carried part, not whole loops.
    """
    jitter = CD_JITTER_LO + (CD_JITTER_HI - CD_JITTER_LO) * rand_uniform(rng, e)
    S[e, a, S_CD] = props[utype[a], COOLDOWN] + jitter + min(S[e, a, S_CD], 0.0)
    wind = props[utype[a], WIND_UP]
    if wind > 0.0:
        S[e, a, S_WU] = wind
        S[e, a, S_WT] = t
    else:
        _effect(e, a, t, na, props, utype, S)


@engine_jit
def _wind_up(e, a, na, props, utype, S):
    """Run one loop of ``a``'s attack in progress (callers check ``S_WU > 0``; with none it does nothing).

    During the wind-up the unit stands still and takes no new order: legacy weapons may not move while
    attacking unless they allow it (X: only the baneling's ``VolatileBurst`` sets ``AllowedMovement`` to
    ``Moving``; Core's defaults leave it unset), and Core's ``CWeaponLegacy`` default
    ``UninterruptibleDuration`` 32767.9997 reads as "never interrupted" (our reading: the editor gives the
    field no hint text).  At
    the damage point the attack is lost if its target has died or stands beyond the weapon's range +
    ``RangeSlop`` (X: Core's default 1, 0 for the spine crawler and the colossus; the field's meaning is
    our reading of its name, for which the editor gives no hint text either).
    """
    if S[e, a, S_WU] <= 0.0:
        return
    S[e, a, S_WU] -= 1.0
    if S[e, a, S_WU] <= 0.0:
        t = int(S[e, a, S_WT])
        S[e, a, S_WT] = -1.0
        if (
            S[e, t, S_HP] > 0.0
            and dist(e, a, t, S) <= reach(props, utype, a, t, RANGE) + props[utype[a], RANGE_SLOP]
        ):
            _effect(e, a, t, na, props, utype, S)


@engine_jit
def _missile(e, a, na, props, utype, S):
    """One loop of ``a``'s missile in flight (if any): it lands on its target when its loops run out (a
    target that died meanwhile takes nothing).

    The same clock times a delayed effect (the colossus's sweeps, see :func:`_effect`: lost with its caster,
    as a burst) and a burst's second hit. The zealot's ``PsiBlades`` effect is ``PsiBladesBurst``
    (Liberty EffectData, X), a ``CEffectCreatePersistent`` on the target unit with ``PeriodCount`` 2 and
    ``PeriodicPeriodArray`` 0 and 0.28: the first blade's damage at the attack, the second 0.28 game
    seconds (4.48 loops, rounded to 4 as every other time here) later. The effect carries the ``Channeled``
    flag; we read it as "ends when its caster dies", so a zealot killed in between loses the second blade
    (a reading of the flag's name: no source we reached describes it). A target that died takes nothing;
    the sweeps, persistent effects searching round the target's place rather than a missile at the target,
    still hit the units beside the place where it fell (our reading of ``WhichLocation`` ``TargetUnit``).
    """
    if S[e, a, S_ML] <= 0.0:
        return
    burst = props[utype[a], BURST_GAP] > 0.0
    sweep = props[utype[a], EFFECT_DELAY] > 0.0
    if (burst or sweep) and S[e, a, S_HP] <= 0.0:  # Channeled: lost with its caster
        S[e, a, S_ML] = 0.0
        S[e, a, S_MT] = -1.0
        return
    S[e, a, S_ML] -= 1.0
    if S[e, a, S_ML] <= 0.0:
        t = int(S[e, a, S_MT])
        S[e, a, S_MT] = -1.0
        if burst:
            if S[e, t, S_HP] > 0.0:
                apply_hit(e, a, t, props, utype, S)
        elif S[e, t, S_HP] > 0.0 or sweep:  # a sweep still hits the units beside a target that died
            _strike(e, a, t, na, props, utype, S)


@engine_jit
def _attack(e, i, t, na, props, utype, grid, nav, S, rng):
    """Approach ``t`` until within range + both radii, then start an attack when the cooldown allows."""
    if dist(e, i, t, S) > reach(props, utype, i, t, RANGE):
        step_toward(e, i, S[e, t, S_X], S[e, t, S_Y], props[utype[i], SPEED], S, props, utype, grid, nav)
    elif S[e, i, S_CD] <= 0.0:
        _start_attack(e, i, t, na, props, utype, S, rng)
