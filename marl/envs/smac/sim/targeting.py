"""The built-in AI's automatic targeting on attack-move (the enemies of SMAC's maps): which ally an enemy
attacks, when it keeps its target and when it switches (Liquipedia's "Automatic Targeting", L, and the game's
recorded episodes, D; each rule's source in its docstring and in docs/fidelity.md, "Targeting rules").
The per-tick update that calls :func:`_enemy_act` is ``stepper._step_env``; candidate rules for sensitivity
studies are in ``variants.py``."""

from __future__ import annotations

from marl.envs.smac.sim.jit import engine_jit, engine_jit_inline
from marl.envs.smac.sim.physics import (
    can_hit,
    dist,
    reach,
    step_toward,
)
from marl.envs.smac.sim.units import (
    ACQUIRE,
    AMOVE,
    ATTACK,
    CALL_FOR_HELP_LOOPS,
    CALL_FOR_HELP_RADIUS,
    HEALER,
    IDLE,
    RANGE,
    S_CFH,
    S_HP,
    S_LA,
    S_OK,
    S_OX,
    S_OY,
    S_SH,
    S_SINCE,
    S_TGT,
    S_WU,
    SPEED,
)
from marl.envs.smac.sim.weapons import _attack, _wind_up


@engine_jit_inline
def _is_threat(props, utype, j, i):
    """Whether ally ``j`` is a threat to enemy ``i``: its weapon can return fire (Liquipedia, "Automatic
    Targeting", criterion 1, first reason).  The page's second reason was not read (every copy we reached
    stops before it); a public python-sc2 bot that implements the page counts as threats, besides units
    that can return fire, only some spellcasters and special units (High Templar, Oracle, Disruptor,
    Widow Mine, Raven, Infestor, Swarm Host, Viper, Lurker), none of which is on SMAC's maps, so no second
    rule is modelled."""
    return can_hit(props, utype, j, i) and props[utype[j], HEALER] == 0


@engine_jit
def _acquire(e, i, na, props, utype, S):
    """Enemy ``i``'s new auto-target among the valid allies within its scan range, else its attacker, or -1.

    Sources: Liquipedia, "Automatic Targeting" (Legacy of the Void rules): candidates are the valid targets
    within the scan range (``units.ACQUIRE``, edge to edge); criteria in order: (1) threats first, (2) the
    higher Attack Target Priority (every unit on SMAC's maps has 20, so it never separates allies; no allied
    structure exists), (3) targets the primary weapon can hit (each unit here has one weapon: ``can_hit``),
    (4) when the previous target was lost, the closest.  When there was no previous target the page gives no
    tie-break: no source, the closest is kept (the simplest rule).
    Response: a stock unit's Response is Acquire, so it attacks a unit that attacks it (SMAC's docs/smac.md,
    "Environment Settings": its allies are set to No Response precisely to disable this).  When that applies
    is not in our sources; the simplest rule is kept: with no candidate in scan range, the last living ally
    that hit this unit (and that its weapon can hit) is the target.
    """
    best = -1
    best_key = 1e18
    for j in range(na):
        if S[e, j, S_HP] <= 0.0 or not can_hit(props, utype, i, j):
            continue
        d = dist(e, i, j, S)
        if d > reach(props, utype, i, j, ACQUIRE):
            continue
        key = d if _is_threat(props, utype, j, i) else 1e6 + d
        if key < best_key:
            best_key = key
            best = j
    if best < 0:
        la = int(S[e, i, S_LA])
        if 0 <= la < na and S[e, la, S_HP] > 0.0 and can_hit(props, utype, i, la):
            best = la
    return best


@engine_jit_inline
def _fresh_attacker(e, i, na, props, utype, S):
    """The ally that hit enemy ``i`` since its last update, if it lives, ``i`` can hit it and it stands within
    ``i``'s scan range; else -1.  The retaliation switch (docs/fidelity.md, "Targeting rules"): measured on
    the game (D: the game's 3m episodes replayed, fire spreads over the allies from the second volley on
    only with it) and in line with SMAC's note that stock units attack the units that attack them
    (Response: Acquire); Liquipedia's page (L) has a unit keep its target instead, and the exact form
    (which hits count, how long it lasts) is our reading."""
    if S[e, i, S_SINCE] != 1.0:  # a hit resets S_SINCE to 0; the unit's own update adds 1 before it acts
        return -1
    la = int(S[e, i, S_LA])
    if (
        0 <= la < na
        and S[e, la, S_HP] > 0.0
        and can_hit(props, utype, i, la)
        and dist(e, i, la, S) <= reach(props, utype, i, la, ACQUIRE)
    ):
        return la
    return -1


@engine_jit
def _threat_in_weapon_range(e, i, na, props, utype, S):
    """Whether any living threat (see :func:`_is_threat`) stands within ``i``'s weapon reach."""
    for j in range(na):
        if (
            S[e, j, S_HP] > 0.0
            and can_hit(props, utype, i, j)
            and _is_threat(props, utype, j, i)
            and dist(e, i, j, S) <= reach(props, utype, i, j, RANGE)
        ):
            return True
    return False


@engine_jit_inline
def _busy(e, i, na, props, utype, grid, nav, S, rng):
    """Run enemy ``i``'s attack in progress (its wind-up) or ordered attack (SMACv2's trigger: chase the
    target until it dies); whether that was its whole update."""
    if S[e, i, S_WU] > 0.0:
        _wind_up(e, i, na, props, utype, S)
        return True
    if S[e, i, S_OK] == ATTACK:
        t = int(S[e, i, S_TGT])
        if S[e, t, S_HP] > 0.0:
            _attack(e, i, t, na, props, utype, grid, nav, S, rng)
            return True
        S[e, i, S_OK] = IDLE
        S[e, i, S_TGT] = -1
    return False


@engine_jit_inline
def _lost(e, i, t, na, props, utype, S):
    """Whether enemy ``i`` loses target ``t`` wherever it stands (L): ``t`` died, or — a non-threat target —
    a threat stands within ``i``'s weapon range."""
    return S[e, t, S_HP] <= 0.0 or (
        not _is_threat(props, utype, t, i) and _threat_in_weapon_range(e, i, na, props, utype, S)
    )


@engine_jit_inline
def _kept(e, i, na, props, utype, S):
    """Enemy ``i``'s current target if it keeps it (L: until it dies, leaves weapon range, or — a non-threat
    target — a threat stands within weapon range), else -1."""
    t = int(S[e, i, S_TGT])
    if t >= 0 and (
        _lost(e, i, t, na, props, utype, S) or dist(e, i, t, S) > reach(props, utype, i, t, RANGE)
    ):
        return -1
    return t


@engine_jit
def _enemy_act(e, i, na, props, utype, grid, nav, S, rng):
    """The built-in AI's attack-move: keep the target, or drop it and acquire, else walk to the goal.

    Rules and sources (Liquipedia, "Automatic Targeting", which covers units on attack-move): a target is
    kept until it (a) stops being a valid target (here: dies), (b) leaves weapon range, or (c) a
    higher-priority target enters weapon range; then :func:`_acquire` picks the next one within the scan
    range.  (b) is taken literally: a target beyond weapon range (range + both radii) is dropped, so a unit
    closing in on a target it acquired in its scan range re-runs the acquisition every loop (it keeps the
    same target while that one stays the best by the criteria).  (c): the only priority that separates
    allies here is the threat class, so a non-threat target (a Medivac) is dropped when a threat is within
    weapon range.  Retaliation: a unit hit since its last update switches to its attacker when that one is
    within scan range (:func:`_fresh_attacker`; from the game's recorded episodes, D, against L's "keep");
    with no candidate in scan range it walks to its last attacker (see :func:`_acquire`).
    An attack in progress runs to its end first (:func:`_wind_up`).
    """
    if _busy(e, i, na, props, utype, grid, nav, S, rng):
        return
    t = _kept(e, i, na, props, utype, S)
    hit_by = _fresh_attacker(e, i, na, props, utype, S)
    if hit_by >= 0:
        t = hit_by
    if t < 0:
        t = _acquire(e, i, na, props, utype, S)
    S[e, i, S_TGT] = t
    if t >= 0:
        _attack(e, i, t, na, props, utype, grid, nav, S, rng)
    elif S[e, i, S_OK] == AMOVE:
        step_toward(e, i, S[e, i, S_OX], S[e, i, S_OY], props[utype[i], SPEED], S, props, utype, grid, nav)


@engine_jit
def _call_for_help(e, na, props, utype, S, hp0):
    """Call for help, after a loop's updates: every enemy that lost health or shields in the loop
    (``hp0[k]``: unit k's health + shields at its start) calls, unless it called less than
    ``CALL_FOR_HELP_LOOPS`` ago, the other living enemies within ``CALL_FOR_HELP_RADIUS`` of it (centre to
    centre) that have no target and can hit its attacker: each takes that ally as its last attacker, which
    it walks to while nothing is in its own scan range (:func:`_acquire`) and attacks once in range.

    X: every weapon's damage effect calls for help (Core EffectData, ``DU_WEAP``: SearchFlags CallForHelp)
    within the game's ``CallForHelpRadius`` 4, once per ``CallForHelpPeriod`` 2 s (Core GameData). Who
    answers and how is our reading. Allies (SMAC's copies: acquire level Passive) neither call nor answer.
    """
    u = S.shape[1]
    for v in range(na, u):
        if S[e, v, S_CFH] > 0.0:
            S[e, v, S_CFH] -= 1.0
            continue
        if hp0[v] <= 0.0 or S[e, v, S_HP] + S[e, v, S_SH] >= hp0[v]:
            continue
        att = int(S[e, v, S_LA])
        if not (0 <= att < na and S[e, att, S_HP] > 0.0):
            continue
        S[e, v, S_CFH] = CALL_FOR_HELP_LOOPS
        for j in range(na, u):
            if j == v or S[e, j, S_HP] <= 0.0 or S[e, j, S_TGT] >= 0.0:
                continue
            if can_hit(props, utype, j, att) and dist(e, j, v, S) <= CALL_FOR_HELP_RADIUS:
                S[e, j, S_LA] = att
