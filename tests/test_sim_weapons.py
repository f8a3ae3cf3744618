"""Weapons of the embedded engine, loop by loop: the wind-up before a weapon's effect (``DamagePoint``), the
attack lost beyond range + ``RangeSlop``, missiles that land after their flight time (also after their
launcher died), and the cooldown that starts with the attack (marl/envs/smac/sim/weapons.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from marl.envs.smac.sim import units as U
from marl.envs.smac.sim.engine import _nav_for
from marl.envs.smac.sim.kernel import _ally_act
from marl.envs.smac.sim.physics import reach
from marl.envs.smac.sim.targeting import _enemy_act
from marl.envs.smac.sim.weapons import _missile, _start_attack, _wind_up, flight_loops

GRID = np.ones((32, 32), dtype=np.bool_)
NAV = _nav_for(GRID)  # the engine's read-only table: the kernels keep the types they run with
TABLE = yaml.safe_load((Path(U.__file__).parent / "unit_data.yaml").read_text())


def duel(ally: str, enemy: str, gap: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One env: ``ally`` (unit 0) and ``enemy`` (unit 1) facing each other, ``gap`` apart edge to edge."""
    utype = np.concatenate([U.type_ids((ally,)), U.type_ids((enemy,), enemy=True)])
    S = np.zeros((1, 2, U.N_STATE))
    for i, t in enumerate(utype):
        S[0, i, U.S_HP], S[0, i, U.S_SH] = U.PROPS[t, U.HP], U.PROPS[t, U.SHIELD]
        S[0, i, [U.S_TGT, U.S_LA, U.S_HT, U.S_WT, U.S_MT]] = -1
    S[0, 0, U.S_X] = 20.0
    S[0, 1, U.S_X] = 20.0 + U.PROPS[utype[0], U.RADIUS] + U.PROPS[utype[1], U.RADIUS] + gap
    S[0, :, U.S_Y] = 10.0
    return S, utype, np.array([7], dtype=np.uint64)


def loops_until_hit(S, utype, rng, attacker=0, target=1, limit=40) -> int:
    """Start ``attacker``'s attack, then run its wind-up and missile loop by loop; the loop of the first
    damage to ``target`` (-1: none within ``limit``)."""
    before = S[0, target, U.S_HP] + S[0, target, U.S_SH]
    _start_attack(0, attacker, target, 1, U.PROPS, utype, S, rng)
    for loop in range(limit + 1):
        if S[0, target, U.S_HP] + S[0, target, U.S_SH] < before:
            return loop
        _missile(0, attacker, 1, U.PROPS, utype, S)
        _wind_up(0, attacker, 1, U.PROPS, utype, S)
    return -1


def table_row(name: str) -> dict:
    """The unit's weapon row in ``unit_data.yaml``."""
    return TABLE[name]["liberty"]["weapon"]


@pytest.mark.parametrize("name", ["marine", "zealot", "zergling", "colossus", "marauder", "stalker"])
def test_damage_lands_after_the_wind_up_and_the_flight(name):
    gap = 1.0 if table_row(name)["range"] >= 1 else 0.05
    S, utype, rng = duel(name, "marauder", gap)
    w = table_row(name)
    wind = round(w["damage_point_s"] * 16)
    flight = round(w["sweep"]["expire_delay_s"] * 16) if "sweep" in w else 0  # the colossus's sweeps
    if "missile" in w:
        m = w["missile"]
        flight = flight_loops(gap, m["speed"] / 16, m["acceleration"] / 256, m["max_speed"] / 16)
    assert loops_until_hit(S, utype, rng) == wind + flight
    jitter = S[0, 0, U.S_CD] - U.PROPS[utype[0], U.COOLDOWN]
    assert U.CD_JITTER_LO <= jitter <= U.CD_JITTER_HI  # the cooldown started with the attack


def test_flight_time_is_the_movers_kinematics():
    # the spine crawler's tentacle: 12 units/game-s, +140 per game-s^2 (up to 200): 7 units in 0.242 game-s
    t = (math.sqrt(12**2 + 2 * 140 * 7) - 12) / 140
    assert flight_loops(7.0, 12 / 16, 140 / 256, 200 / 16) == math.ceil(t * 16) == 4
    assert flight_loops(6.0, 40 / 16, 0.0, 40 / 16) == math.ceil(6 / 40 * 16)  # the hydralisk's: 2.4 -> 3
    assert flight_loops(0.0, 0.0, 3200 / 256, 18.75 / 16) == 1  # never in the same loop as the launch
    # the stalker's: at full speed after 0.006 game-s, so close to distance / 18.75
    assert flight_loops(6.0, 0.0, 3200 / 256, 18.75 / 16) == math.ceil(6 / 18.75 * 16 + 0.05)


def test_every_attack_ends_before_the_next_one_can_start():
    """One slot per unit for the attack in progress and one for its missile suffice: the wind-up plus the
    flight at the farthest reach is shorter than the shortest time between two attacks (period - 1 loop of
    random delay - up to 1 loop carried)."""
    for t in range(U.N_TYPES):
        p = U.PROPS[t]
        if p[U.DMG] == 0 or p[U.SPLASH] == U.SPLASH_EXPLODE:  # no weapon (Medivac); the baneling dies
            continue
        far = p[U.RANGE] + p[U.RANGE_SLOP] + 0.5  # a target running from the farthest reach
        flight = (
            flight_loops(far, p[U.MSL_SPEED], p[U.MSL_ACCEL], p[U.MSL_MAX_SPEED]) if p[U.MSL_MAX_SPEED] else 0
        )
        assert p[U.WIND_UP] + max(flight, p[U.EFFECT_DELAY]) < p[U.COOLDOWN] + U.CD_JITTER_LO - 1, t


def test_an_attack_is_lost_when_its_target_leaves_range_plus_slop_during_the_wind_up():
    # the spine crawler (RangeSlop 0) begins on a stalker at its range edge, which then steps 0.1 out
    S, utype, rng = duel("stalker", "spine_crawler", 7.0)
    _start_attack(0, 1, 0, 1, U.PROPS, utype, S, rng)
    S[0, 0, U.S_X] -= 0.1
    for _ in range(30):
        _wind_up(0, 1, 1, U.PROPS, utype, S)
        _missile(0, 1, 1, U.PROPS, utype, S)
    assert S[0, 0, U.S_SH] == 80 and S[0, 1, U.S_CD] > 0  # no damage, and the cooldown is spent
    # a stalker (RangeSlop 1) still lands a shot on a target 0.9 beyond its range at the damage point
    S, utype, rng = duel("stalker", "marauder", 6.0)
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    S[0, 1, U.S_X] += 0.9
    for _ in range(30):
        _wind_up(0, 0, 1, U.PROPS, utype, S)
        _missile(0, 0, 1, U.PROPS, utype, S)
    assert S[0, 1, U.S_HP] < 125
    d = abs(S[0, 1, U.S_X] - S[0, 0, U.S_X])
    assert reach(U.PROPS, utype, 0, 1, U.RANGE) < d <= reach(U.PROPS, utype, 0, 1, U.RANGE) + 1.0


def test_a_missile_in_flight_lands_after_its_launcher_died_but_not_on_a_dead_target():
    S, utype, rng = duel("stalker", "marauder", 5.0)
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    for _ in range(3):  # the wind-up: the missile is launched at its end
        _wind_up(0, 0, 1, U.PROPS, utype, S)
    assert S[0, 0, U.S_ML] > 0
    S[0, 0, U.S_HP] = 0.0  # the stalker dies with its shot in the air
    for _ in range(10):
        _missile(0, 0, 1, U.PROPS, utype, S)
    assert S[0, 1, U.S_HP] == 125 - (10 + 4 - 1)  # 10 (+4 vs Armored) less the marauder's armour 1
    S, utype, rng = duel("stalker", "marauder", 5.0)
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    for _ in range(3):
        _wind_up(0, 0, 1, U.PROPS, utype, S)
    S[0, 1, U.S_HP] = 0.0
    for _ in range(10):
        _missile(0, 0, 1, U.PROPS, utype, S)
    assert S[0, 1, U.S_HP] == 0.0 and S[0, 0, U.S_ML] == 0


def test_a_unit_winding_up_stands_still_and_keeps_its_new_order_for_later():
    S, utype, rng = duel("stalker", "zealot", 4.0)
    S[0, 0, U.S_OK], S[0, 0, U.S_TGT] = 2, 1  # ATTACK the zealot
    _ally_act(0, 0, 1, U.PROPS, utype, GRID, NAV, S, rng)  # in range, cooldown 0: the attack starts
    assert S[0, 0, U.S_WU] == U.PROPS[utype[0], U.WIND_UP] == 3
    S[0, 0, U.S_OK], S[0, 0, U.S_OX], S[0, 0, U.S_OY] = 1, 5.0, 10.0  # MOVE away, given mid-wind-up
    x0 = S[0, 0, U.S_X]
    for _ in range(3):
        _ally_act(0, 0, 1, U.PROPS, utype, GRID, NAV, S, rng)
        assert S[0, 0, U.S_X] == x0
    assert S[0, 0, U.S_ML] > 0  # launched at the damage point
    _ally_act(0, 0, 1, U.PROPS, utype, GRID, NAV, S, rng)
    assert S[0, 0, U.S_X] < x0  # then the move runs


def test_an_enemy_winding_up_does_not_retarget():
    S, utype, rng = duel("marine", "hydralisk", 3.0)
    S[0, 1, U.S_OK], S[0, 1, U.S_OX], S[0, 1, U.S_OY] = 4, 20.0, 10.0  # AMOVE toward the marine
    _enemy_act(0, 1, 1, U.PROPS, utype, GRID, NAV, S, rng)
    assert S[0, 1, U.S_WU] == 3 and int(S[0, 1, U.S_WT]) == 0
    S[0, 0, U.S_X] = 60.0  # the marine vanishes from scan range: the attack goes on, and is then lost
    for _ in range(3):
        _enemy_act(0, 1, 1, U.PROPS, utype, GRID, NAV, S, rng)
    assert S[0, 1, U.S_WU] == 0 and S[0, 1, U.S_ML] == 0 and S[0, 0, U.S_HP] == 45


def _health(S, k):
    return S[0, k, U.S_HP] + S[0, k, U.S_SH]


def test_a_zealots_second_blade_lands_one_burst_period_after_the_first():
    """PsiBladesBurst: 8 at the attack, 8 more round(0.28 * 16) = 4 loops later, from the same attack."""
    gap_loops = round(table_row("zealot")["burst"]["periods_s"][1] * 16)
    assert gap_loops == 4 and U.PROPS[U.type_ids(("zealot",))[0], U.BURST_GAP] == gap_loops
    S, utype, rng = duel("zealot", "marine", 0.05)
    full = _health(S, 1)
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    hp = [_health(S, 1)]
    for _ in range(6):
        _missile(0, 0, 1, U.PROPS, utype, S)
        hp.append(_health(S, 1))
    assert full - hp[0] == 8  # the first blade at once (a marine has no armour, no shields)
    assert hp[:gap_loops] == [full - 8] * gap_loops
    assert hp[gap_loops:] == [full - 16] * (len(hp) - gap_loops)  # the second, and nothing more


@pytest.mark.parametrize("who_dies", ["zealot", "target"])
def test_a_second_blade_is_lost_with_its_zealot_or_its_target(who_dies):
    S, utype, rng = duel("zealot", "marine", 0.05)
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    after_first = _health(S, 1)
    dead = 0 if who_dies == "zealot" else 1
    S[0, dead, U.S_HP] = 0.0
    for _ in range(6):
        _missile(0, 0, 1, U.PROPS, utype, S)
    assert S[0, 0, U.S_ML] == 0 and S[0, 0, U.S_MT] == -1  # the burst is over
    assert _health(S, 1) == (after_first if who_dies == "zealot" else 0.0)


def _beam_scene():
    """A colossus (unit 0) 3 from a zergling (unit 1, its target), a second zergling (unit 2) beside the
    target across the line of fire, a third (unit 3) far off."""
    utype = np.concatenate([U.type_ids(("colossus",)), U.type_ids(("zergling",) * 3, enemy=True)])
    S = np.zeros((1, 4, U.N_STATE))
    for i, t in enumerate(utype):
        S[0, i, U.S_HP], S[0, i, U.S_SH] = U.PROPS[t, U.HP], U.PROPS[t, U.SHIELD]
        S[0, i, [U.S_TGT, U.S_LA, U.S_HT, U.S_WT, U.S_MT]] = -1
    S[0, :, U.S_Y] = 10.0
    S[0, 0, U.S_X] = 10.0
    S[0, 1, U.S_X] = 14.0
    S[0, 2, U.S_X], S[0, 2, U.S_Y] = 14.0, 10.9  # 0.9 from the target along the beam
    S[0, 3, U.S_X] = 30.0
    return S, utype, np.array([7], dtype=np.uint64)


def test_the_colossus_sweeps_land_their_expire_delay_after_the_wind_up_on_the_target_and_beside_it():
    """ThermalLances: two sweeps, each 20 on the target at its ExpireDelay (0.375 s = 6 loops) and 20 on the
    units its searches find beside it (landed at the same loop here)."""
    w = table_row("colossus")
    delay = round(w["sweep"]["expire_delay_s"] * 16)
    wind = round(w["damage_point_s"] * 16)
    assert (delay, wind) == (6, 1) and U.PROPS[U.type_ids(("colossus",))[0], U.EFFECT_DELAY] == delay
    S, utype, rng = _beam_scene()
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    health = [S[0, 1:, U.S_HP].copy()]
    for _ in range(wind + delay + 2):
        _missile(0, 0, 1, U.PROPS, utype, S)
        _wind_up(0, 0, 1, U.PROPS, utype, S)
        health.append(S[0, 1:, U.S_HP].copy())
    landed = next(k for k, h in enumerate(health) if h[0] < 35)
    assert landed == wind + delay
    np.testing.assert_array_equal(health[landed - 1], [35, 35, 35])  # nothing before
    np.testing.assert_array_equal(health[landed], [0, 0, 35])  # 2 x 20 on both; the far one untouched
    assert S[0, 0, U.S_ML] == 0 and S[0, 0, U.S_MT] == -1


def test_a_sweep_is_lost_with_its_colossus_and_still_hits_beside_a_target_that_died():
    S, utype, rng = _beam_scene()
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    _wind_up(0, 0, 1, U.PROPS, utype, S)  # the effect: the sweeps begin
    S[0, 0, U.S_HP] = 0.0  # the colossus dies before they land (Channeled)
    for _ in range(8):
        _missile(0, 0, 1, U.PROPS, utype, S)
    np.testing.assert_array_equal(S[0, 1:, U.S_HP], [35, 35, 35])
    S, utype, rng = _beam_scene()
    _start_attack(0, 0, 1, 1, U.PROPS, utype, S, rng)
    _wind_up(0, 0, 1, U.PROPS, utype, S)
    S[0, 1, U.S_HP] = 0.0  # the target dies before they land: the unit beside it is still hit
    for _ in range(8):
        _missile(0, 0, 1, U.PROPS, utype, S)
    np.testing.assert_array_equal(S[0, 1:, U.S_HP], [0, 0, 35])


def _step_with_attack_order(S, utype, rng, act_from_loop=1):
    """One agent step of unit 0 under an attack order on unit 1 (which stands still): each loop its
    regeneration and cooldown countdown, then (from loop ``act_from_loop`` on) its action; then the step's
    end. Returns the random delay its attack drew (from a copy of the stream)."""
    from marl.envs.smac.sim.kernel import _regen
    from marl.envs.smac.sim.physics import rand_uniform
    from marl.envs.smac.sim.stepper import _settle_cooldowns
    from marl.envs.smac.sim.units import ATTACK

    S[0, 0, U.S_OK], S[0, 0, U.S_TGT] = ATTACK, 1
    delay = U.CD_JITTER_LO + (U.CD_JITTER_HI - U.CD_JITTER_LO) * rand_uniform(rng.copy(), 0)
    for loop in range(1, U.LOOPS_PER_STEP + 1):
        _regen(0, 0, U.PROPS, utype, S, loop == U.LOOPS_PER_STEP)
        if loop >= act_from_loop:
            _ally_act(0, 0, 1, U.PROPS, utype, GRID, NAV, S, rng)
    _settle_cooldowns(0, S)
    return delay


@pytest.mark.parametrize("seed", [1, 7, 123])
def test_a_fresh_attack_shows_period_plus_delay_minus_7_after_the_step(seed):
    """D (benchmarks/fidelity/recorded_cooldowns.py): a ready marine ordered to attack an enemy in range shows
    ``Period + delay - 7`` at the next state, the delay any real value in [-1, +2] loops."""
    S, utype, _ = duel("marine", "marine", 1.0)
    rng = np.array([seed], dtype=np.uint64)
    delay = _step_with_attack_order(S, utype, rng)
    period = U.PROPS[utype[0], U.COOLDOWN]
    assert period == pytest.approx(0.8608 * 16)  # X's Period, not rounded to whole loops
    assert S[0, 0, U.S_CD] == pytest.approx(period + delay - 7)
    assert U.CD_JITTER_LO <= delay <= U.CD_JITTER_HI and delay != round(delay)


@pytest.mark.parametrize("c", [0.3, 2.75, 6.9])
def test_a_shot_that_follows_the_last_counts_its_cooldown_from_the_moment_the_last_ran_out(c):
    """D: a marine that keeps attacking, with ``c`` loops of cooldown at the step's start, shows ``Period +
    delay - 8 + c``: the part of the loop after its weapon came ready is carried, not rounded away."""
    S, utype, _ = duel("marine", "marine", 1.0)
    S[0, 0, U.S_CD] = c
    delay = _step_with_attack_order(S, utype, np.array([5], dtype=np.uint64))
    assert S[0, 0, U.S_CD] == pytest.approx(U.PROPS[utype[0], U.COOLDOWN] + delay - 8 + c)


def test_a_weapon_ready_and_unused_carries_nothing_and_never_shows_below_zero():
    """The carried part lives only in the loop the weapon came ready: a marine whose cooldown ran out in
    loop 1 but that acts only from loop 3 starts a plain ``Period + delay``; one never ordered shows 0."""
    S, utype, _ = duel("marine", "marine", 1.0)
    S[0, 0, U.S_CD] = 0.3
    delay = _step_with_attack_order(S, utype, np.array([9], dtype=np.uint64), act_from_loop=3)
    assert S[0, 0, U.S_CD] == pytest.approx(U.PROPS[utype[0], U.COOLDOWN] + delay - 5)  # started in loop 3
    from marl.envs.smac.sim.kernel import _regen
    from marl.envs.smac.sim.stepper import _settle_cooldowns

    S, utype, _ = duel("marine", "marine", 1.0)
    S[0, 0, U.S_CD] = 6.6
    for loop in range(1, U.LOOPS_PER_STEP + 1):
        _regen(0, 0, U.PROPS, utype, S, loop == U.LOOPS_PER_STEP)
        if loop == 7:
            assert S[0, 0, U.S_CD] == pytest.approx(-0.4)  # came ready 0.4 loop before loop 7's end ...
    assert S[0, 0, U.S_CD] == 0.0 and S[0, 0, U.S_RC] == 0.0  # ... unused in it: nothing carried
    _settle_cooldowns(0, S)
    assert S[0, 0, U.S_CD] == 0.0  # the state shows 0, as the game's weapon_cooldown


@pytest.mark.parametrize("c", [7.05, 7.6, 8.0])
def test_a_weapon_that_comes_ready_in_the_last_loop_fires_in_the_next_step_counting_from_that_moment(c):
    """D (benchmarks/fidelity/recorded_cooldowns.py): a marine that keeps attacking with 7-8 loops of cooldown
    at a step's start begins no attack in that step (the state then shows 0), and its attack in the next step
    shows ``Period + delay - 16 + c``: counted from the moment the last cooldown ran out."""
    S, utype, _ = duel("marine", "marine", 1.0)
    S[0, 0, U.S_CD] = c
    hp = S[0, 1, U.S_HP]
    _step_with_attack_order(S, utype, np.array([5], dtype=np.uint64))
    assert S[0, 0, U.S_CD] == 0.0 and S[0, 0, U.S_WU] == 0.0 and S[0, 1, U.S_HP] == hp  # no attack begun
    rng = np.array([11], dtype=np.uint64)
    delay = _step_with_attack_order(S, utype, rng)
    assert S[0, 0, U.S_CD] == pytest.approx(U.PROPS[utype[0], U.COOLDOWN] + delay - 16 + c)
    assert S[0, 1, U.S_HP] < hp and S[0, 0, U.S_RC] == 0.0
