"""The built-in AI's target choice, rule by rule (sources in targeting._enemy_act and docs/fidelity.md).

Marines: weapon reach (range + both radii) 5.75 and scan reach the same (scan range max(5, weapon range)),
centre to centre; a zealot's scan reach against a marine is 5.875, its weapon reach 0.975.
"""

from __future__ import annotations

import numpy as np
from sim_specs import ATTACK_ENEMY_0, STOP, engine, place, spec_of  # tests/ is on sys.path under pytest

from marl.envs.smac.sim.units import S_HP, S_TGT, S_X


def two_marines_one_enemy():
    """Allies 0 and 1 (marines), enemy unit 2 (a marine at (16, 16), no order: it idles and auto-acquires)."""
    eng, S = engine(spec_of([("marine", 2, (9, 16))], [("marine", 1, (16, 16))]))
    place(S, 2, 16.0)
    return eng, S


def test_a_target_in_weapon_range_is_kept_when_a_closer_one_arrives():
    eng, S = two_marines_one_enemy()
    place(S, 0, 11.0)  # 5.0 away: in weapon reach
    place(S, 1, 30.0, 30.0)
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0
    place(S, 1, 14.0)  # now much closer, but the target is still valid and in weapon range
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0


def test_a_target_that_leaves_weapon_range_is_dropped_for_the_closest():
    eng, S = engine(spec_of([("marine", 2, (9, 16))], [("zealot", 1, (16, 16))]))
    place(S, 2, 16.0)
    place(S, 0, 12.0)  # 4.0: out of the zealot's weapon reach, inside its scan reach
    place(S, 1, 12.0, 17.6)  # 4.3: farther, also out of weapon reach
    S[2, S_TGT] = 1  # as if it had acquired ally 1 earlier
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0  # re-acquired: the closest


def test_a_dead_target_is_replaced_by_the_closest_threat():
    eng, S = two_marines_one_enemy()
    place(S, 0, 12.0)
    place(S, 1, 11.0)
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0
    S[0, S_HP] = 0.0  # ally 0 dies
    eng.step(np.array([0, STOP]))
    assert S[2, S_TGT] == 1


def test_being_attacked_switches_the_target_only_to_an_attacker_within_scan_range():
    # retaliation (targeting._fresh_attacker): the attacker must stand within the enemy's scan reach
    # (marine 5 + both radii); a stalker hits from 6.8 (its reach 6 + 0.625 + 0.375 = 7.0), beyond 6.0
    for far, switched in ((False, True), (True, False)):
        eng, S = engine(spec_of([("marine", 1, (9, 16)), ("stalker", 1, (9, 16))], [("marine", 1, (16, 16))]))
        place(S, 2, 16.0)
        place(S, 0, 11.5)  # 4.5 away: the enemy's target
        place(S, 1, 30.0, 30.0)
        eng.step(np.array([STOP, STOP]))
        assert S[2, S_TGT] == 0
        place(S, 1, 9.2 if far else 11.0)  # 6.8 or 5.0 away
        for _ in range(2):
            tab = eng.step(np.array([STOP, ATTACK_ENEMY_0]))
        assert tab.enemies.health[0] < 45 and S[2, S_TGT] == (1 if switched else 0)


def test_a_threat_entering_weapon_range_replaces_a_non_threat_target():
    eng, S = engine(spec_of([("medivac", 1, (9, 16)), ("marine", 1, (9, 16))], [("marine", 1, (16, 16))]))
    place(S, 2, 16.0)
    place(S, 0, 14.0)  # the Medivac (cannot return fire) close by
    place(S, 1, 30.0, 30.0)
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0
    place(S, 1, 11.0)  # a marine (a threat) enters weapon range, farther than the Medivac
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 1


def test_a_unit_with_nothing_in_scan_range_responds_to_its_attacker():
    # stalker weapon reach 6 + 0.625 + 0.375 = 7.0; the marine's scan reach 5 + 1.0 = 6.0
    for attack in (False, True):
        eng, S = engine(spec_of([("stalker", 1, (9, 16))], [("marine", 1, (16, 16))]))
        place(S, 0, 9.2)
        place(S, 1, 16.0)  # 6.8 apart
        for _ in range(2):
            tab = eng.step(np.array([ATTACK_ENEMY_0 if attack else STOP]))
        if attack:
            assert tab.enemies.health[0] < 45 and S[1, S_TGT] == 0 and S[1, S_X] < 16.0
        else:
            assert S[1, S_TGT] == -1 and S[1, S_X] == 16.0


def test_a_hit_enemy_calls_the_idle_ones_within_4_to_its_attacker():
    """Call for help (X: Core DU_WEAP CallForHelp, CallForHelpRadius 4, CallForHelpPeriod 2 s)."""
    from marl.envs.smac.sim import units as U
    from marl.envs.smac.sim.targeting import _call_for_help

    eng, S = engine(spec_of([("marine", 1, (9, 16))], [("marine", 3, (16, 16))]))
    E = S[None]  # the kernels index (env, unit, column)
    for k, x in ((1, 16.0), (2, 19.5), (3, 21.0)):  # the victim; 3.5 from it; 5.0 from it
        place(S, k, x)
        S[k, S_TGT] = -1.0
    S[1, U.S_LA] = 0  # ally 0 hit it in this loop
    S[2, U.S_LA] = S[3, U.S_LA] = -1.0
    hp0 = S[:, S_HP] + S[:, U.S_SH]
    S[1, S_HP] -= 6.0
    _call_for_help(0, 1, U.PROPS, eng._batch.utype, E, hp0)
    assert S[2, U.S_LA] == 0 and S[3, U.S_LA] == -1.0  # within 4 answers, beyond does not
    assert S[1, U.S_CFH] == U.CALL_FOR_HELP_LOOPS
    S[3, U.S_LA] = -1.0
    place(S, 3, 18.0)  # now within 4, but the victim called less than a period ago
    hp0 = S[:, S_HP] + S[:, U.S_SH]
    S[1, S_HP] -= 6.0
    _call_for_help(0, 1, U.PROPS, eng._batch.utype, E, hp0)
    assert S[3, U.S_LA] == -1.0 and S[1, U.S_CFH] == U.CALL_FOR_HELP_LOOPS - 1
