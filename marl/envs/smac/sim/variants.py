"""Candidate targeting rules of the built-in AI, for fitting the engine to recorded games (NOT the default).

The default engine (``targeting._enemy_act``) never runs this module: :class:`~marl.envs.smac.sim.engine.
BatchedSimEngine` uses :func:`sim_step_rules` only when built with a non-zero ``rules`` array, so default
results stay bit-identical and pay nothing.  The rules are data (an int64 array the compiled code receives),
never a module-level switch, so Numba's on-disk cache cannot serve a stale variant.

``rules[R_*]`` (0 everywhere = the default rules, run by this module's code):

* ``R_SCAN`` k > 1: an enemy without a target searches for one only every k loops, with a random phase per
  unit (drawn from the env's stream at its first loop); meanwhile it keeps walking to its goal.
* ``R_SHARED`` 1 (with ``R_SCAN``): one scan clock per env instead of one per unit: all its enemies search
  on the same loops, with a random phase per env (drawn at its first loop after a reset).
* ``R_RANDOM`` 1: a uniformly random candidate of the best class instead of the closest.
* ``R_NO_RETALIATE`` 1: no retaliation switch (the engine's rule before 2026-11-27: a hit enemy keeps its
  target; ``targeting._fresh_attacker`` is the engine's switch).
* ``R_THREAT_RANGE`` 1: among threats, those whose own weapon reaches this enemy now come first.
* ``R_DELAY`` d > 0: after acquiring a new target an enemy walks on (attack-move) for d loops before it
  approaches and attacks it.
* ``R_DEATH_BURST`` 1: a baneling (of either side) killed by a hit bursts as when it attacks, right after
  the update of the unit whose hit (weapon, missile or burst) killed it; bursts that kill banelings chain.
  Not a targeting rule but a sourced mechanic kept out of the default: X (Liberty BehaviorData
  ``BanelingExplode``, a ``DeathResponse`` with chance 1 and effect ``VolatileBurst``, on the stock
  Baneling and on SMAC's Baneling_RL, R) and L ("Baneling": they "perform their attack upon death"); on
  bane_vs_bane it moves untrained greedy play far outside the game's T=0 figures (docs/fidelity.md,
  "Calibration against the SMAC paper's runs"), so it waits for the mechanic that offsets it.
* ``R_PUSH`` k > 1: the push repeated up to k times a loop until no pair overlaps by more than 1 % of its
  contact distance (``contact.push_passes``): the engine's single pass lets a crowd of dozens walk up to
  14 % inside the contact distance the game's marines keep (D, on 3m); not a targeting rule either.

* ``R_NO_HELP`` 1: no call for help (``targeting._call_for_help``; the engine's rule before 0.9.2).
* ``R_UNPIN`` 1: a walker overlapping a firing unit by more than one loop of its walk shares the overlap
  with it (``contact._push_pass``); by default the walker takes it all, so one pinned between firing units
  stays inside them while they fire (seen on 3s5z: an enemy zealot held 15 game seconds among its stalkers).
* ``R_CHASE`` k > 0: a walker heading for a unit (attack, heal, an attack-move's target) slides round a
  firing unit by k/4 of the overlap, at most its walk of one loop (``contact._slide``), instead of the
  engine's ``SLIDE`` (1/2, fitted to D's marines with move orders, which this leaves alone): how fast a crowd
  of melee attackers fills the ring round its target (2c_vs_64zg).
* ``R_STICK`` k > 0: after a retaliation switch the unit keeps that attacker for k loops (while it stays a
  kept target) before another hit can turn it: the switch with hysteresis.
* ``R_IN_RANGE`` 1: the retaliation switch only to an attacker within the unit's weapon reach (range + both
  radii), not its scan range: a unit with a target is not pulled off it by an attacker it would have to walk
  to (a zealot hit by a stalker at range 6). On 3m every attacker of a marine stands within its reach, so D
  cannot tell this form from the engine's; the 3s5z and 10m_vs_11m checkpoints do not lean on such pulls.
* ``R_KEEP_MELEE`` 1 / ``R_KEEP_RANGED`` 1: ``R_NO_RETALIATE`` for melee units only (weapon range below
  ``MELEE_RANGE``: zealots, zerglings, banelings) / for ranged units only: which side of a mixed army's
  switch trained policies lean on.
* ``R_PREF_ATTACKER`` 1: when acquiring, a threat whose attack order targets this unit comes first (before
  the closest): the reading of the threat criterion as "attacking me" rather than "able to attack me"
  (a community answer on target choice: "units will preferentially attack enemy units that are attacking
  them"); with ``noretaliate`` it is Liquipedia's keep-the-target with attackers preferred at each
  re-acquisition, the switch's alternative.
* ``R_CLOSER`` k > 0: the retaliation switch only to an attacker no farther (centre to centre) than the
  unit's current target plus (k - 1)/4: a stalker fighting a zealot in front of it is not turned by the
  stalker behind (``closer1``: strictly no farther).
* ``R_LEASH`` k > 0: a target that leaves weapon range is chased, not dropped, while the unit stands within k
  of its leash point (where it took a target after having none); beyond it the unit drops the target and
  walks back, acquiring nothing until it is within ``LEASH_RESET`` of that point. X (Core GameData, SC2
  4.6.2): ``AcquireLeashRadius`` 21, ``AcquireLeashResetRadius`` 5, ``AcquireMovementLimit`` 21; their
  meaning is not in our primary sources (a secondary compilation quoting a mapping wiki reads the first as
  how far an idle unit chases an auto-acquired target before it returns, the second as the circle it must
  re-enter before it acquires again). The anchor for a unit on attack-move is our reading. ``leash21``:
  X's radius.
* ``R_KEEP_FOE`` 1: the retaliation switch only when the unit's current target is not itself targeting the
  unit: one fighting a unit that fights back keeps it (trained policies on 3s5z and 10m_vs_11m lean on the
  switch; the switch's exact form is our reading of D).

Per-unit state lives in ``V`` (E, U, N_V) float64: the scan countdown (-1: not drawn yet), the delay and the
hold left; the shared clock is unit 0's scan countdown
(an ally's, otherwise unused).  None of the timing and choice rules has a source; ``noretaliate`` is
Liquipedia's keep-the-target, which the recorded episodes contradict.  Each is a candidate to compare
with the recorded episodes (``benchmarks/research/targeting_fit.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from marl.envs.smac.sim.contact import _push, push_passes
from marl.envs.smac.sim.jit import engine_jit
from marl.envs.smac.sim.physics import can_hit, dist, rand_int, reach, step_toward
from marl.envs.smac.sim.stepper import _issue_orders, _settle_cooldowns, _shuffle, _update_unit
from marl.envs.smac.sim.targeting import (
    _busy,
    _call_for_help,
    _fresh_attacker,
    _is_threat,
    _kept,
    _threat_in_weapon_range,
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

R_SCAN, R_RANDOM, R_NO_RETALIATE, R_THREAT_RANGE, R_DELAY, R_SHARED, R_DEATH_BURST = 0, 1, 2, 3, 4, 5, 6
R_PUSH, R_NO_HELP, R_UNPIN, R_CHASE, R_KEEP_FOE, R_STICK, R_IN_RANGE = 7, 8, 9, 10, 11, 12, 13
R_KEEP_MELEE, R_KEEP_RANGED, R_PREF_ATTACKER, R_CLOSER, R_LEASH = 14, 15, 16, 17, 18
N_RULES = 19
MELEE_RANGE = 1.0  # a weapon range below this is melee (zealot 0.1, zergling 0.1, baneling 0.25)
V_SCAN, V_DELAY, V_STICK, V_AX, V_AY, V_LEASHED = 0, 1, 2, 3, 4, 5
N_V = 6
LEASH_RESET = 5.0  # X: Core GameData, AcquireLeashResetRadius

_KEYS = {"scan": R_SCAN, "random": R_RANDOM, "noretaliate": R_NO_RETALIATE, "threat_range": R_THREAT_RANGE}
_KEYS.update(delay=R_DELAY, shared=R_SHARED, deathburst=R_DEATH_BURST, push=R_PUSH, nohelp=R_NO_HELP)
_KEYS.update(unpin=R_UNPIN, chase=R_CHASE, keepfoe=R_KEEP_FOE, stick=R_STICK, inrange=R_IN_RANGE)
_KEYS.update(keepmelee=R_KEEP_MELEE, keepranged=R_KEEP_RANGED, prefattacker=R_PREF_ATTACKER)
_KEYS.update(closer=R_CLOSER, leash=R_LEASH)


def parse_rules(text: str) -> np.ndarray:
    """Rules from a name such as ``"scan4+noretaliate"`` or ``"delay2"`` (``"default"``: all zero).

    Parts are joined by ``+``; ``scan`` and ``delay`` take a number of loops, the others none; ``shared``
    needs ``scan``.
    """
    rules = np.zeros(N_RULES, dtype=np.int64)
    if text in ("", "default"):
        return rules
    for part in text.split("+"):
        name = part.rstrip("0123456789")
        if name not in _KEYS:
            raise ValueError(f"unknown targeting rule {part!r}; known: {sorted(_KEYS)}")
        num = part[len(name) :]
        if (name in ("scan", "delay", "push", "chase", "stick", "closer", "leash")) != bool(num):
            raise ValueError(
                f"{part!r}: scan, delay and stick take a number of loops, push of passes, chase a slide"
                " in quarters of the overlap, closer a margin in quarters plus one, leash a radius; the"
                " others none"
            )
        rules[_KEYS[name]] = int(num) if num else 1
    if rules[R_SHARED] and rules[R_SCAN] <= 1:
        raise ValueError("shared needs scan<k> with k > 1")
    return rules


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
def _kept_leash(e, i, na, props, utype, S, V, radius):
    """``targeting._kept`` under ``R_LEASH``: a target beyond weapon range is kept (chased) while the unit
    stands within ``radius`` of its leash point; past it the target is dropped and the unit leashed."""
    t = int(S[e, i, S_TGT])
    if t < 0:
        return -1
    if S[e, t, S_HP] <= 0.0:
        return -1
    if not _is_threat(props, utype, t, i) and _threat_in_weapon_range(e, i, na, props, utype, S):
        return -1
    if dist(e, i, t, S) > reach(props, utype, i, t, RANGE):
        if math.hypot(S[e, i, S_X] - V[e, i, V_AX], S[e, i, S_Y] - V[e, i, V_AY]) > radius:
            V[e, i, V_LEASHED] = 1.0
            return -1
    return t


@engine_jit
def _leashed_walk(e, i, props, utype, grid, nav, S, V):
    """A leashed unit walks back to its leash point and acquires nothing until it is within
    ``LEASH_RESET`` of it; whether it still was leashed this loop."""
    if V[e, i, V_LEASHED] <= 0.0:
        return False
    if math.hypot(S[e, i, S_X] - V[e, i, V_AX], S[e, i, S_Y] - V[e, i, V_AY]) <= LEASH_RESET:
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
