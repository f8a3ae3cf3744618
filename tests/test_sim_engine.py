"""Scripted scenarios for the embedded engine whose outcome follows from the unit arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_specs import engine, spec_of  # tests/ is on sys.path under pytest

from marl.envs.smac.sim.engine import SimEngine, spawn_layout
from marl.envs.smac.sim.units import CONTACT, S_CD, S_EN, S_HP, S_SH, S_SINCE, S_X, S_Y
from marl.envs.smac.types import EnemyOrder


def test_three_marines_focus_kill_time_follows_cooldown_bounds():
    # 45 HP / 6 dmg -> 8 hits; 3 marines fire in the first loop then every 14 + [-1, 2] loops, so the
    # 8th hit lands at loop 1 + two cooldowns in [1 + 26, 1 + 32] = [27, 33] -> agent step 4 or 5.
    spec = spec_of([("marine", 3, (9, 16))], [("marine", 1, (13, 16))])
    for seed in range(8):
        eng, _ = engine(spec, seed)
        step = 0
        while eng._batch.hp[0, 3] > 0 and step < 10:
            eng.step(np.array([6, 6, 6]))
            step += 1
        assert step in (4, 5), f"seed {seed}: killed at step {step}"


def test_zealot_two_hits_minus_armour_and_shields_first():
    spec = spec_of([("zealot", 1, (9, 16))], [("marauder", 1, (10, 16)), ("stalker", 1, (30, 30))])
    eng, S = engine(spec)
    tab = eng.step(np.array([6]))  # one attack in the first 8 loops (cooldown 19 +- jitter)
    assert tab.enemies.health[0] == pytest.approx(125 - 2 * 7)  # 8 - 1 armour, twice
    # stalker with 4 shield left: hit 1 -> 4 absorbed, 4 - 1 armour = 3 HP; hit 2 -> 7 HP
    S[2, S_X : S_Y + 1] = S[0, S_X : S_Y + 1] + (1.0, 0.0)
    S[1, S_HP] = 0.0
    S[2, S_SH] = 4.0
    S[2, S_SINCE] = 0.0  # just damaged: no shield regeneration before the blades land, whatever the order
    S[0, S_CD] = 0.0
    tab = eng.step(np.array([7]))
    assert tab.enemies.shield[1] == 0.0
    assert tab.enemies.health[1] == pytest.approx(80 - 3 - 7)


def test_bonus_damage_by_attribute():
    spec = spec_of([("marauder", 1, (9, 16))], [("stalker", 1, (13, 16)), ("marine", 1, (9, 12))])
    eng, _ = engine(spec)
    tab = eng.step(np.array([6]))
    assert tab.enemies.shield[0] == pytest.approx(80 - 20)  # 10 +10 vs Armored, shields have no armour


def test_shields_take_the_damage_the_attributes_give():
    # Liquipedia, "Plasma Shield": a Marauder deals 20 to a Stalker's shields but 10 to a Zealot's
    spec = spec_of([("marauder", 1, (9, 16))], [("zealot", 1, (13, 16)), ("marine", 1, (9, 12))])
    eng, _ = engine(spec)
    tab = eng.step(np.array([6]))
    assert tab.enemies.shield[0] == pytest.approx(50 - 10)


def test_shield_regen_after_ten_game_seconds():
    spec = spec_of([("stalker", 1, (5, 5))], [("zealot", 1, (28, 28))])
    eng, S = engine(spec)
    S[0, S_SH] = 10.0
    S[0, S_SINCE] = 0.0
    for _ in range(20):  # 160 loops: not yet
        tab = eng.step(np.array([1]))
    assert tab.allies.shield[0] == 10.0
    tab = eng.step(np.array([1]))  # loops 161..168 regenerate 2 per 16 loops
    assert tab.allies.shield[0] == pytest.approx(11.0)
    tab = eng.step(np.array([1]))
    assert tab.allies.shield[0] == pytest.approx(12.0)


def test_medivac_heal_costs_energy():
    spec = spec_of([("marine", 1, (9, 16)), ("medivac", 1, (10, 16))], [("marine", 1, (30, 30))])
    eng, S = engine(spec)
    S[0, S_HP] = 20.0
    assert S[1, S_EN] == pytest.approx(50 + 0.5625 / 16)  # 50 at creation, then the reset's first loop
    tab = eng.step(np.array([1, 6]))  # medivac heals ally 0
    assert tab.allies.health[0] == pytest.approx(20 + 8 * 9 / 16)
    assert tab.allies.energy[1] == pytest.approx(50 - 8 * 9 / 16 / 3 + 9 * 0.5625 / 16)
    # energy spent mid-heal: the running heal takes what one loop regenerates (3 HP per energy), then
    # ends, and the 7 loops' trickle that follows is far below the 5 a new heal needs
    S[1, S_EN] = 0.0
    before = tab.allies.health[0]
    tab = eng.step(np.array([1, 6]))
    assert tab.allies.health[0] - before == pytest.approx(3 * 0.5625 / 16)
    assert tab.allies.energy[1] == pytest.approx(7 * 0.5625 / 16)


def test_a_heal_needs_five_energy_to_start_but_not_to_go_on():
    # Liquipedia, "Heal": at least 5 energy to start
    spec = spec_of([("marine", 1, (9, 16)), ("medivac", 1, (10, 16))], [("marine", 1, (30, 30))])
    eng, S = engine(spec)
    S[0, S_HP] = 20.0
    S[1, S_EN] = 4.0  # + 8 loops x 0.035 = 4.28 < 5: never starts
    tab = eng.step(np.array([1, 6]))
    assert tab.allies.health[0] == 20.0
    assert tab.allies.energy[1] == pytest.approx(4.0 + 8 * 0.5625 / 16)
    S[1, S_EN] = 5.0  # enough to start; the heal then runs on below 5 energy
    tab = eng.step(np.array([1, 6]))
    assert tab.allies.health[0] == pytest.approx(20 + 8 * 9 / 16)
    assert tab.allies.energy[1] < 5.0
    tab = eng.step(np.array([1, 6]))
    assert tab.allies.health[0] == pytest.approx(20 + 16 * 9 / 16)


def test_baneling_dies_when_it_attacks_with_area_damage():
    spec = spec_of([("baneling", 1, (9, 16))], [("zergling", 2, (11, 16)), ("zergling", 1, (20, 16))])
    eng, _ = engine(spec)
    for _ in range(4):
        tab = eng.step(np.array([6]))
    assert tab.allies.health[0] == 0.0
    assert np.all(tab.enemies.health[:2] == 0.0)  # 20 + 15 vs Light = 35 = zergling HP
    assert tab.enemies.health[2] == 35.0


def test_colossus_line_splash_hits_units_beside_the_target():
    # ThermalLances: 20 x 2, no bonus; the beam reaches 1.25 + 0.15 along, 0.15 across (edge distances)
    spec = spec_of([("colossus", 1, (10, 16))], [("zealot", 2, (16, 16)), ("zealot", 1, (16, 22))])
    eng, S = engine(spec)
    S[1, S_X : S_Y + 1] = (16.0, 15.4)
    S[2, S_X : S_Y + 1] = (16.0, 16.6)  # 1.2 along the beam: hit
    S[3, S_X : S_Y + 1] = (16.0, 17.9)  # 2.5 along: edge 2.0 from the target, beyond 1.25 + 0.15
    S[0, S_X : S_Y + 1] = (10.0, 15.4)
    tab = eng.step(np.array([6]))
    assert tab.enemies.shield[0] == pytest.approx(50 - 2 * 20)
    assert tab.enemies.shield[1] == pytest.approx(50 - 2 * 20)
    assert tab.enemies.shield[2] == 50.0 and tab.enemies.health[2] == 100.0


def test_moves_go_two_units_and_walls_block():
    grid = np.zeros((32, 32), dtype=bool)
    grid[8:20, 8:24] = True
    spec = spec_of([("marine", 1, (16, 12)), ("marine", 1, (12, 20))], [("marine", 1, (30, 30))], grid=grid)
    eng, S = engine(spec)
    x0 = S[:2, S_X].copy()
    y0 = S[:2, S_Y].copy()
    tab = eng.step(np.array([4, 2]))  # east, north
    assert tab.allies.pos[0, 0] == pytest.approx(x0[0] + 2.25 / 2)  # 1.125 per agent step
    tab = eng.step(np.array([0, 0]))  # no-op keeps the order: arrives after 2 units and stops
    assert tab.allies.pos[0, 0] == pytest.approx(x0[0] + 2.0)
    assert tab.allies.pos[1, 1] == pytest.approx(y0[1] + 2.0)
    for _ in range(6):
        tab = eng.step(np.array([4, 2]))
    assert tab.allies.pos[0, 0] < 20.0 and tab.allies.pos[1, 1] < 24.0
    assert tab.allies.pos[0, 0] > 19.0 and tab.allies.pos[1, 1] > 23.0
    assert tab.allies.pos[0, 1] == pytest.approx(y0[0]) and tab.allies.pos[1, 0] == pytest.approx(x0[1])
    tab = eng.step(np.array([1, 1]))  # stop clears the order
    before = tab.allies.pos.copy()
    tab = eng.step(np.array([0, 0]))
    np.testing.assert_allclose(tab.allies.pos, before)


def test_units_touch_at_the_games_contact_distance():
    """D: the game lets two marines stand 0.6885 apart (CONTACT x both radii) and pushes closer ones back
    to it; the engine does the same, whatever stands between 0.6885 and 0.75 stays put."""
    spec = spec_of([("marine", 2, (10, 10))], [("marine", 1, (30, 30))])
    eng, S = engine(spec)
    contact = CONTACT * 2 * 0.375
    assert contact == pytest.approx(0.6885, abs=5e-4)
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y] = 10.0, 10.0, 10.72, 10.0
    tab = eng.step(np.array([1, 1]))  # both stop: 0.72 apart, overlapping by the radii but not pushed
    assert np.linalg.norm(tab.allies.pos[0] - tab.allies.pos[1]) == pytest.approx(0.72)
    S[1, S_X] = 10.5
    tab = eng.step(np.array([1, 1]))  # 0.5 apart: pushed back to the contact distance, half each
    assert np.linalg.norm(tab.allies.pos[0] - tab.allies.pos[1]) == pytest.approx(contact)
    assert tab.allies.pos[0, 0] + tab.allies.pos[1, 0] == pytest.approx(20.5)


def test_a_firing_unit_stands_and_a_walker_goes_round_it():
    """D: the game's allies firing in a walking ally's way do not move; the walker goes round them."""
    spec = spec_of([("marine", 2, (10, 10))], [("marine", 1, (30, 30))])
    eng, S = engine(spec)
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y] = 10.0, 10.0, 8.0, 10.0
    S[2, S_X], S[2, S_Y] = 14.5, 10.0  # within ally 0's reach (5.75), straight ahead of ally 1's walk
    for _ in range(4):
        tab = eng.step(np.array([6, 4]))  # ally 0 fires at the enemy, ally 1 walks east through it
    assert tuple(tab.allies.pos[0]) == (10.0, 10.0)  # never pushed
    assert tab.allies.pos[1, 0] > 10.0 and abs(tab.allies.pos[1, 1] - 10.0) > 0.3  # went round it
    assert tab.enemies.health[0] < 45


def test_an_idle_unit_gives_way_to_a_walking_one():
    """D: stopped allies in a walking ally's way move, and the walker loses next to nothing."""
    spec = spec_of([("marine", 2, (10, 10))], [("marine", 1, (30, 30))])
    eng, S = engine(spec)
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y] = 10.0, 10.0, 8.9, 10.0
    tab = eng.step(np.array([1, 4]))  # ally 0 stops, ally 1 walks east into it
    assert tab.allies.pos[1, 0] == pytest.approx(8.9 + 2.25 / 2)  # a full step of 8 loops
    assert tab.allies.pos[0, 0] > 10.0  # pushed ahead of it


def test_attack_approaches_to_range_plus_radii_then_fires():
    spec = spec_of([("marine", 1, (5, 16))], [("marine", 1, (17, 16))])
    eng, _ = engine(spec)
    reach = 5 + 0.375 + 0.375
    for _ in range(20):
        tab = eng.step(np.array([6]))
        d = np.linalg.norm(tab.allies.pos[0] - tab.enemies.pos[0])
        if tab.enemies.health[0] < 45:
            break
        assert d > reach - 2.25 / 16 - 1e-9
    assert tab.enemies.health[0] < 45
    assert reach - 2.25 / 16 - 1e-9 <= d <= reach + 1e-9


def test_passive_allies_do_not_retaliate_but_enemies_acquire():
    spec = spec_of([("marine", 1, (9, 16))], [("marine", 1, (13, 16))])
    eng, _ = engine(spec)
    for _ in range(5):
        tab = eng.step(np.array([1]))
    assert tab.allies.health[0] < 45  # the enemy acquired the ally in its range and fired
    assert tab.enemies.health[0] == 45 and tab.allies.cooldown[0] == 0


def test_enemies_attack_move_to_the_target_and_acquire():
    grid = np.zeros((32, 32), dtype=bool)
    grid[:, 8:24] = True
    spec = spec_of(
        [("marine", 3, (9, 16))], [("marine", 3, (23, 16))], EnemyOrder("attack_move", (9, 16)), grid
    )
    eng, _ = engine(spec)
    xs = []
    for _ in range(40):
        tab = eng.step(np.where(eng._batch.hp[0, :3] > 0, 1, 0))
        xs.append(tab.enemies.pos[:, 0].mean())
    assert xs[1] < xs[0] - 1.0  # walking west at 1.125 per step
    assert np.all(tab.allies.health == 0) and np.all(tab.enemies.health == 45)


def test_spine_crawler_is_immobile_and_shoots():
    spec = spec_of([("stalker", 1, (9, 16))], [("spine_crawler", 1, (14, 16))])
    eng, _ = engine(spec)
    p0 = eng._batch.S[0, 1, S_X : S_Y + 1].copy()
    for _ in range(3):
        tab = eng.step(np.array([6]))
    np.testing.assert_allclose(tab.enemies.pos[0], p0)
    assert tab.allies.shield[0] < 80 and tab.enemies.health[0] < 300


def test_same_seed_same_episode_and_seed_changes_it():
    spec = spec_of([("marine", 3, (9, 16))], [("marine", 3, (23, 16))], EnemyOrder("attack_move", (9, 16)))

    def run(seed):
        eng = SimEngine(spec, seed)
        rs = np.random.default_rng(0)
        out = [eng.reset().allies.pos.copy()]
        for _ in range(30):
            tab = eng.step(rs.integers(1, 9, size=3))
            out.append(np.concatenate([tab.allies.pos.ravel(), tab.enemies.pos.ravel(), tab.allies.health]))
        return np.concatenate([o.ravel() for o in out])

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_bad_actions_fail_with_a_message():
    eng, _ = engine(spec_of([("marine", 2, (9, 16))], [("marine", 1, (13, 16))]))
    with pytest.raises(ValueError, match="actions must lie in"):
        eng.step(np.array([1, 9]))
    with pytest.raises(ValueError, match="unknown unit type"):
        SimEngine(spec_of([("tank", 1, (9, 16))], [("marine", 1, (13, 16))]))


def test_spawn_is_compact_grid_around_spawn_point():
    eng, _ = engine(spec_of([("marine", 9, (9, 16))], [("marine", 1, (23, 16))]))
    pos = eng._batch.S[0, :9, S_X : S_Y + 1]
    assert np.abs(pos.mean(0) - (9, 16)).max() < 0.3
    assert np.abs(pos - (9, 16)).max() <= 0.85 + 0.25 + 1e-9
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1) + np.eye(9) * 9
    assert d.min() > 0.85 - 0.5 - 1e-9 and math.isfinite(d.min())


def test_the_first_unit_of_a_spawn_point_stands_on_it():
    # oxwhirl/smac issue #91: all units are created at one point; the first stands on it, the rest nearby
    for n in (2, 3, 4, 8, 9):
        spec = spec_of([("marine", n, (9, 16))], [("zealot", 2, (23, 16)), ("stalker", 1, (23, 16))])
        pos = spawn_layout(spec)
        assert tuple(pos[0]) == (9.0, 16.0), n
        assert tuple(pos[n]) == (23.0, 16.0), n
        assert not np.any(np.all(pos[1:n] == (9.0, 16.0), axis=1)), n


def test_zerg_regenerates_hp_and_enemy_medivac_heals_its_wounded():
    spec = spec_of([("marine", 1, (2, 2))], [("zergling", 1, (28, 28))])
    eng, S = engine(spec)
    S[1, S_HP] = 10.0
    for _ in range(16):  # 8 game-s at 0.2734 HP per game-s
        tab = eng.step(np.array([1]))
    assert tab.enemies.health[0] == pytest.approx(10 + 8 * 0.2734)

    spec = spec_of([("marine", 1, (2, 2))], [("marine", 1, (24, 24)), ("medivac", 1, (27, 27))])
    eng, S = engine(spec)
    S[1, S_HP] = 20.0
    for _ in range(4):  # flies ~2.1 units to reach heal range, then 9 HP per game-s
        tab = eng.step(np.array([1]))
    assert 20.0 < tab.enemies.health[0] <= 20 + 4 * 8 * 9 / 16
    assert tab.enemies.energy[1] < 50.0


def test_a_smac_reset_ends_with_the_loop_before_the_first_observation(monkeypatch):
    """D: at SMAC's first observation every enemy of 3m has walked one loop (2.25 / 16) towards the allies
    (its attack-move), and the allies stand where they were created (``stepper._first_loop``). Without the
    spawn noise (so that no two units overlap and the push moves nobody)."""
    import marl.envs.smac.sim.engine as sim_engine
    from marl.envs.smac.maps import load_map

    monkeypatch.setattr(sim_engine, "SPAWN_NOISE", 0.0)
    spec = load_map("3m")
    eng = sim_engine.BatchedSimEngine(spec, 4, seed=11)
    eng.reset()
    moved = eng.S[:, :, S_X : S_Y + 1] - spawn_layout(spec)[None]
    assert np.all(moved[:, :3] == 0.0)
    goal = np.array(spec.enemy_order.target, dtype=float)
    way = goal - spawn_layout(spec)[3:]
    expect = 2.25 / 16 * way / np.hypot(way[:, 0], way[:, 1])[:, None]
    assert np.allclose(moved[:, 3:], expect[None])
