"""The candidate rules of the built-in AI (NOT the default): their names, numbers and meaning.

The kernels that play them are in :mod:`~marl.envs.smac.sim.variants` (the default engine never runs them).
A rule set is an int64 array, :func:`parse_rules` of a name such as ``"scan4+noretaliate"``.

``rules[R_*]`` (0 everywhere = the default rules, run by the variants' code):

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
hold left, the leash point and whether the unit is walking back to it; the shared clock is unit 0's scan
countdown (an ally's, otherwise unused).  None of the timing and choice rules has a source; ``noretaliate`` is
Liquipedia's keep-the-target, which the recorded episodes contradict.  Each is a candidate to compare
with the recorded episodes (``benchmarks/research/targeting_fit.py``).
"""

from __future__ import annotations

import numpy as np

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
