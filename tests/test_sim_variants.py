"""The candidate rules of the built-in AI (``sim/rules.py``, kernels in ``sim/variants.py``; none is the
engine's default): each test shows a rule changing what the default does in a small set-up. Marines: weapon
and scan reach 5.75, centre to centre."""

from __future__ import annotations

import numpy as np
import pytest
from sim_specs import ATTACK_ENEMY_0, STOP, place, spec_of  # tests/ is on sys.path under pytest

from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.engine import BatchedSimEngine, SimEngine
from marl.envs.smac.sim.units import S_CD, S_HP, S_SH, S_TGT, S_X
from marl.envs.smac.sim.variants import R_DELAY, R_NO_RETALIATE, R_RANDOM, R_SCAN, R_SHARED, parse_rules


def ruled(spec, rules: str | None, seed: int = 0):
    """A one-env engine with the candidate rules ``rules`` (None: the default engine), reset."""
    eng = SimEngine(spec, seed, rules=None if rules is None else parse_rules(rules))
    eng.reset()
    return eng, eng._batch.S[0]


def test_rule_names_parse_and_all_zero_rules_run_the_default_kernel():
    assert not parse_rules("default").any()
    r = parse_rules("scan4+shared+noretaliate+delay2")
    assert (r[R_SCAN], r[R_SHARED], r[R_NO_RETALIATE], r[R_DELAY], r[R_RANDOM]) == (4, 1, 1, 2, 0)
    for bad in ("scan", "noretaliate2", "retaliate", "focus", "shared", "closer", "prefattacker1", "leash"):
        with pytest.raises(ValueError):
            parse_rules(bad)
    assert (
        SimEngine(
            spec_of([("marine", 1, (9, 16))], [("marine", 1, (16, 16))]), 0, rules=parse_rules("")
        )._batch.rules
        is None
    )


def test_a_no_op_rule_reproduces_the_default_engine_bit_for_bit():
    spec = load_map("3m")
    a, b = BatchedSimEngine(spec, 4, 3), BatchedSimEngine(spec, 4, 3, rules=parse_rules("scan1"))
    a.reset(), b.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        act = np.where(a.avail_actions(), rng.random(a.avail_actions().shape), -1).argmax(-1)
        a.step(act), b.step(act)
    assert np.array_equal(a.S, b.S) and np.array_equal(a.rng, b.rng)


def engaged(rules: str | None):
    """One enemy marine at x 16 that has taken marine 0 (4.5 away) as its target; marine 1 stands far off."""
    eng, S = ruled(spec_of([("marine", 2, (9, 16))], [("marine", 1, (16, 16))]), rules)
    place(S, 2, 16.0)
    place(S, 0, 11.5)
    place(S, 1, 30.0, 30.0)
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0
    return eng, S


@pytest.mark.parametrize(
    "rules, switches", [(None, True), ("noretaliate", False), ("closer1", False), ("closer5", True)]
)
def test_a_hit_enemy_switches_to_its_attacker_unless_retaliation_is_off(rules, switches):
    """Marine 1 hits the enemy from 5.2 away (0.7 farther than its target): the engine's switch turns it;
    ``noretaliate`` keeps the target, so does ``closer1`` (no margin); ``closer5`` (margin 1.0) turns it."""
    eng, S = engaged(rules)
    place(S, 1, 10.8)  # 5.2 away, in its own range and the enemy's scan range: it attacks the enemy
    for _ in range(2):
        eng.step(np.array([STOP, ATTACK_ENEMY_0]))
    assert S[2, S_HP] < 45 and S[2, S_TGT] == (1 if switches else 0)


@pytest.mark.parametrize("rules", [None, "stick64"])
def test_stick_holds_the_attacker_it_switched_to(rules):
    """Marine 1 hits the enemy (it switches to marine 1), then only marine 0 does: the engine's switch turns
    it back to marine 0, ``stick<k>`` holds marine 1 for k loops."""
    eng, S = engaged(rules)
    place(S, 1, 10.8)
    eng.step(np.array([STOP, ATTACK_ENEMY_0]))
    assert S[2, S_TGT] == 1
    S[1, S_CD] = 200.0  # marine 1 holds its fire from here on
    for _ in range(2):
        eng.step(np.array([ATTACK_ENEMY_0, ATTACK_ENEMY_0]))
    assert S[2, S_TGT] == (1 if rules else 0)


@pytest.mark.parametrize("rules", [None, "keepfoe"])
def test_keepfoe_keeps_a_target_that_fights_back(rules):
    """The enemy's target attacks it (its weapon cooling down) while the other marine hits it: the engine's
    switch turns the enemy to the one that hit it, ``keepfoe`` keeps the one fighting it."""
    eng, S = ruled(spec_of([("marine", 2, (9, 16))], [("marine", 1, (16, 16))]), rules)
    place(S, 2, 16.0)
    place(S, 0, 11.5)
    place(S, 1, 30.0, 30.0)
    eng.step(np.array([ATTACK_ENEMY_0, STOP]))
    assert S[2, S_TGT] == 0 and S[0, S_TGT] == 2
    S[0, S_CD] = 200.0  # marine 0 keeps its attack on the enemy but cannot fire again here
    place(S, 1, 10.8)
    for _ in range(2):
        eng.step(np.array([ATTACK_ENEMY_0, ATTACK_ENEMY_0]))
    assert S[2, S_HP] < 45 and S[2, S_TGT] == (0 if rules == "keepfoe" else 1)


@pytest.mark.parametrize("rules", [None, "inrange"])
def test_inrange_keeps_a_melee_target_when_hit_from_beyond_weapon_reach(rules):
    """An enemy zealot fights marine 0 in melee; marine 1 hits it from 5.0 away (inside the zealot's scan
    reach, beyond its weapon reach): the engine's switch pulls it off marine 0, ``inrange`` keeps it."""
    eng, S = ruled(spec_of([("marine", 2, (9, 16))], [("zealot", 1, (16, 16))]), rules)
    place(S, 2, 16.0)
    place(S, 0, 15.2)  # 0.8 away: within the zealot's weapon reach 0.975
    place(S, 1, 30.0, 30.0)
    eng.step(np.array([STOP, STOP]))
    assert S[2, S_TGT] == 0
    place(S, 1, 11.0)
    for _ in range(2):
        eng.step(np.array([STOP, ATTACK_ENEMY_0]))
    assert S[2, S_SH] < 50.0  # marine 1's hits landed
    assert S[2, S_TGT] == (0 if rules == "inrange" else 1)


@pytest.mark.parametrize("rules, keeps", [(None, False), ("keepmelee", True), ("keepranged", False)])
def test_keepmelee_and_keepranged_split_the_switch_by_weapon_class(rules, keeps):
    """The enemy zealot (melee) of the test above is hit from 0.9 away by marine 1, within its reach:
    ``keepmelee`` keeps its target, ``keepranged`` (ranged units only) lets it switch as the engine does."""
    eng, S = ruled(spec_of([("marine", 2, (9, 16))], [("zealot", 1, (16, 16))]), rules)
    place(S, 2, 16.0)
    place(S, 0, 15.2)
    place(S, 1, 30.0, 30.0)
    eng.step(np.array([STOP, STOP]))
    place(S, 1, 16.0, 16.9)
    for _ in range(2):
        eng.step(np.array([STOP, ATTACK_ENEMY_0]))
    assert S[2, S_SH] < 50.0
    assert S[2, S_TGT] == (0 if keeps else 1)


@pytest.mark.parametrize("rules, pick", [("noretaliate", 0), ("noretaliate+prefattacker", 1)])
def test_prefattacker_acquires_the_marine_attacking_it_before_the_closest(rules, pick):
    """Marine 0 stands 4.0 away, marine 1 5.0 away with an attack order on the enemy (its weapon held, so
    no hit and no switch): acquiring, the enemy takes the closest, or under ``prefattacker`` marine 1."""
    eng, S = ruled(spec_of([("marine", 2, (9, 16))], [("marine", 1, (16, 16))]), rules)
    place(S, 2, 16.0)
    place(S, 0, 12.0)
    place(S, 1, 11.0)
    S[1, S_CD] = 200.0
    eng.step(np.array([STOP, ATTACK_ENEMY_0]))
    assert S[2, S_HP] == 45 and S[1, S_TGT] == 2
    assert S[2, S_TGT] == pick


@pytest.mark.parametrize("rules", [None, "leash21", "leash7"])
def test_leash_chases_a_target_that_left_weapon_range_until_the_leash_breaks(rules):
    """The enemy's target steps to 13 away (beyond its weapon and scan reach 5.75): the engine drops it and
    walks on; ``leash21`` chases it until it fires again; ``leash7`` gives up 7 from where it took the
    target and walks back towards that point before it goes on."""
    eng, S = engaged(rules)
    x0 = S[2, S_X]
    place(S, 0, x0 - 13.0)
    S[0, S_HP] = 1000.0  # it outlives the chase
    eng.step(np.array([STOP, STOP]))
    if rules is None:
        assert S[2, S_TGT] == -1
        return
    assert S[2, S_TGT] == 0 and S[2, S_X] < x0 - 0.5  # chasing
    xs = [S[2, S_X]]
    for _ in range(8):
        eng.step(np.array([STOP, STOP]))
        xs.append(S[2, S_X])
    low = int(np.argmin(xs))
    if rules == "leash21":
        assert S[2, S_TGT] == 0 and S[0, S_HP] < 1000.0  # caught up and firing
    else:
        assert S[0, S_HP] == 1000.0 and 6.5 < x0 - xs[low] < 8.0  # gave up about 7 out
        assert max(xs[low:]) > xs[low] + 1.0  # and walked back


def test_random_choice_picks_a_farther_candidate_sometimes_the_default_never():
    spec = spec_of([("marine", 2, (9, 16))], [("marine", 1, (16, 16))])
    picks = {None: set(), "random": set()}
    for rules in picks:
        for seed in range(12):
            eng, S = ruled(spec, rules, seed)
            place(S, 2, 16.0)
            place(S, 0, 12.0)  # 4.0 away
            place(S, 1, 11.0)  # 5.0 away: both within scan reach 5.75
            eng.step(np.array([STOP, STOP]))
            picks[rules].add(int(S[2, S_TGT]))
    assert picks[None] == {0} and picks["random"] == {0, 1}


def test_an_acquire_delay_holds_the_first_shot_back():
    spec = spec_of([("marine", 1, (9, 16))], [("marine", 1, (16, 16))])
    for rules, hit in ((None, True), ("delay8", False)):
        eng, S = ruled(spec, rules)
        place(S, 1, 16.0)
        place(S, 0, 12.0)  # in weapon range at once
        eng.step(np.array([STOP]))
        assert S[1, S_TGT] == 0 and (S[0, S_HP] < 45) == hit


def test_periodic_scans_spread_the_first_shot_over_loops():
    # the enemy's cooldown left after one step tells the loop of its first shot
    spec = spec_of([("marine", 1, (9, 16))], [("marine", 1, (16, 16))])
    left = {None: set(), "scan8": set()}
    for rules in left:
        for seed in range(16):
            eng, S = ruled(spec, rules, seed)
            place(S, 1, 16.0)
            place(S, 0, 12.0)
            eng.step(np.array([STOP]))
            left[rules].add(float(S[1, S_CD]))
    assert max(left["scan8"]) > max(left[None])
