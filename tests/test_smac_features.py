"""SMAC semantics (marl/envs/smac/features.py) on hand-built unit tables, with numbers worked out by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from marl.envs.smac.features import UNIT_MAX_HEALTH_SHIELD, SmacFeatures, SmacOptions, Units, max_reward
from marl.envs.smac.maps import list_maps, load_map
from marl.envs.smac.types import SideTable, UnitTable

# map: (n_actions, obs, state) with SMAC's default flags (docs/smac.md §2).
SIZES = {
    "3m": (9, 30, 48),
    "8m": (14, 80, 168),
    "25m": (31, 250, 950),
    "5m_vs_6m": (12, 55, 98),
    "8m_vs_9m": (15, 85, 179),
    "10m_vs_11m": (17, 105, 243),
    "27m_vs_30m": (36, 285, 1170),
    "MMM": (16, 160, 290),
    "MMM2": (18, 176, 322),
    "2s3z": (11, 80, 120),
    "3s5z": (14, 128, 216),
    "3s5z_vs_3s6z": (15, 136, 230),
    "3s_vs_3z": (9, 36, 54),
    "3s_vs_4z": (10, 42, 61),
    "3s_vs_5z": (11, 48, 68),
    "1c3s5z": (15, 162, 270),
    "2m_vs_1z": (7, 16, 26),
    "corridor": (30, 156, 282),
    "6h_vs_8z": (14, 78, 140),
    "2s_vs_1sc": (7, 17, 27),
    "so_many_baneling": (38, 202, 397),
    "bane_vs_bane": (30, 336, 984),
    "2c_vs_64zg": (70, 332, 342),
}


def side(types, pos, health=None, shield=None, cooldown=None, energy=None) -> SideTable:
    """A SideTable at nominal maxima; health/shield default to full."""
    n = len(types)
    hmax = np.array([UNIT_MAX_HEALTH_SHIELD[u][0] for u in types], dtype=float)
    smax = np.array([UNIT_MAX_HEALTH_SHIELD[u][1] for u in types], dtype=float)
    return SideTable(
        tuple(types),
        np.array(pos, dtype=float).reshape(n, 2),
        hmax.copy() if health is None else np.array(health, dtype=float),
        hmax,
        smax.copy() if shield is None else np.array(shield, dtype=float),
        smax,
        np.zeros(n) if cooldown is None else np.array(cooldown, dtype=float),
        np.zeros(n) if energy is None else np.array(energy, dtype=float),
    )


def table_for(spec, ally_pos, enemy_pos, **kw) -> UnitTable:
    a = {k[2:]: v for k, v in kw.items() if k.startswith("a_")}
    e = {k[2:]: v for k, v in kw.items() if k.startswith("e_")}
    return UnitTable(side(spec.ally_types, ally_pos, **a), side(spec.enemy_types, enemy_pos, **e))


def feats(name: str, **flags) -> SmacFeatures:
    return SmacFeatures(load_map(name), SmacOptions.from_flags(**flags))


def obs_of(f: SmacFeatures, t: UnitTable, last=None, steps=0) -> np.ndarray:
    last = np.zeros((f.n_agents, f.n_actions)) if last is None else last
    return f.observations(t, f.avail_actions(t), last, steps)


def test_sizes_for_every_map_match_spec_table():
    assert sorted(SIZES) == list_maps()
    for name, (n_act, obs, state) in SIZES.items():
        f = feats(name)
        assert (f.n_actions, f.obs_size, f.state_size) == (n_act, obs, state), name


def test_sizes_match_actual_vectors_under_all_flag_combinations():
    rng = np.random.default_rng(0)
    for name in ("3m", "2s3z", "MMM", "2m_vs_1z"):
        spec = load_map(name)
        for flags in (
            {},
            {
                "obs_last_action": True,
                "obs_pathing_grid": True,
                "obs_terrain_height": True,
                "obs_timestep_number": True,
                "state_timestep_number": True,
            },
            {"obs_all_health": False, "obs_own_health": False, "state_last_action": False},
            {"obs_instead_of_state": True},
        ):
            f = SmacFeatures(spec, SmacOptions(**flags))
            t = table_for(
                spec, rng.uniform(8, 24, (spec.n_agents, 2)), rng.uniform(8, 24, (spec.n_enemies, 2))
            )
            last = np.zeros((f.n_agents, f.n_actions))
            o = obs_of(f, t)
            assert o.shape == (f.n_agents, f.obs_size) and o.dtype == np.float32
            assert f.state(t, last, 3, o).shape == (f.state_size,)
    # obs_own_health=False alone is overridden by obs_all_health (SMAC forces it on).
    assert feats("3m", obs_own_health=False).obs_size == 30
    assert feats("3m", obs_all_health=False, obs_own_health=False).obs_size == 4 + 3 * 4 + 2 * 4


def test_max_reward_examples():
    for name, expected in (("3m", 365), ("8m", 640), ("2s3z", 1020), ("MMM", 1015)):
        assert max_reward(load_map(name), SmacOptions()) == expected


def _three_marines():
    spec = load_map("3m")
    # a0 at the band's top: its north cell (10, 25) is outside the arena (cells y 7-24).
    ally = [(10.0, 24.2), (13.0, 20.2), (1.0, 24.2)]  # a1 at distance 5, a2 at exactly 9 (not visible)
    enemy = [(16.0, 24.2), (14.0, 17.2), (12.0, 24.2)]  # e0 at exactly 6, e1 at sqrt(65), e2 dead
    return spec, table_for(spec, ally, enemy, a_health=[45, 30, 45], e_health=[40, 20, 0])


def test_hand_computed_observation_3m():
    spec, t = _three_marines()
    f = SmacFeatures(spec, SmacOptions())
    o = obs_of(f, t)[0]
    d1 = math.sqrt(65)
    expected = [
        0,
        1,
        1,
        1,  # north blocked by the wall
        1,
        6 / 9,
        6 / 9,
        0,
        40 / 45,  # e0: attackable at distance 6
        0,
        d1 / 9,
        4 / 9,
        -7 / 9,
        20 / 45,  # e1: visible, not attackable
        0,
        0,
        0,
        0,
        0,  # e2 dead
        1,
        5 / 9,
        3 / 9,
        -4 / 9,
        30 / 45,  # a1
        0,
        0,
        0,
        0,
        0,  # a2 at distance 9: cut (strict < 9)
        1.0,
    ]  # own health
    np.testing.assert_allclose(o, np.array(expected, dtype=np.float32), rtol=1e-6, atol=1e-7)
    # Agent 2 sees nobody (everyone at >= 9) but still has its own health and move flags.
    o2 = obs_of(f, t)[2]
    assert o2[4:29].sum() == 0 and o2[29] == 1.0
    # A dead agent gets all zeros.
    t.allies.health[1] = 0
    assert not obs_of(f, t)[1].any()


def test_enemy_type_index_quirk_2s3z():
    spec = load_map("2s3z")
    assert spec.ally_types == ("stalker",) * 2 + ("zealot",) * 3
    assert spec.enemy_types == ("stalker",) * 2 + ("zealot",) * 3
    f = SmacFeatures(spec, SmacOptions())
    ally = [(9.0, 16.0 + 0.5 * i) for i in range(5)]
    enemy = [(12.0, 16.0 + 0.5 * i) for i in range(5)]
    t = table_for(spec, ally, enemy, e_shield=[40, 80, 50, 25, 50])
    o = obs_of(f, t)[0]
    rows = o[4 : 4 + 5 * 8].reshape(5, 8)  # [avail, dist, dx, dy, health, shield, type0, type1]
    np.testing.assert_array_equal(rows[:2, 6:], [[0, 1], [0, 1]])  # enemy stalkers -> index 1
    np.testing.assert_array_equal(rows[2:, 6:], [[1, 0]] * 3)  # enemy zealots -> index 0
    np.testing.assert_allclose(rows[:, 5], [0.5, 1.0, 1.0, 0.5, 1.0])  # shield / max (80 or 50)
    np.testing.assert_array_equal(o[-4:], [1, 1, 1, 0])  # own [health, shield, stalker=0 one-hot]
    allies = o[44:76].reshape(4, 8)
    np.testing.assert_array_equal(allies[:, 6:], [[1, 0], [0, 1], [0, 1], [0, 1]])
    st = f.state(t, np.zeros((5, 11)), 0)
    enemy_rows = st[5 * 7 : 5 * 7 + 5 * 6].reshape(5, 6)  # [health, rx, ry, shield, type0, type1]
    np.testing.assert_array_equal(enemy_rows[:, 4:], [[0, 1]] * 2 + [[1, 0]] * 3)


def test_state_layout_3m():
    spec = load_map("3m")
    f = SmacFeatures(spec, SmacOptions())
    t = table_for(
        spec,
        [(8, 16), (20, 10), (4, 28)],
        [(24, 16), (16, 16), (0, 0)],
        a_health=[45, 9, 0],
        a_cooldown=[7.5, 15, 3],
        e_health=[45, 22.5, 45],
    )
    last = np.zeros((3, 9))
    last[0, 6], last[1, 1] = 1, 1
    s = f.state(t, last, 5)
    # positions from the map's centre (16, 16) over the playable extent, 28 (SMAC's max_distance_x), not 32
    w = 28
    np.testing.assert_allclose(
        s[:12].reshape(3, 4), [[1, 0.5, -8 / w, 0], [0.2, 1, 4 / w, -6 / w], [0] * 4], rtol=1e-6
    )
    np.testing.assert_allclose(
        s[12:21].reshape(3, 3), [[1, 8 / w, 0], [0.5, 0, 0], [1, -16 / w, -16 / w]], rtol=1e-6
    )
    np.testing.assert_array_equal(s[21:].reshape(3, 9), last)
    s2 = SmacFeatures(spec, SmacOptions(state_timestep_number=True)).state(t, last, 15)
    assert s2.shape == (49,) and s2[-1] == pytest.approx(15 / 60)


def test_state_mmm_medivac_energy_and_type_bits():
    spec = load_map("MMM")
    assert spec.ally_types == ("marauder",) * 2 + ("marine",) * 7 + ("medivac",)
    f = SmacFeatures(spec, SmacOptions())
    pos = [(9.0, 12.0 + i) for i in range(10)]
    cd = [5, 0, 3] + [0] * 7
    t = table_for(spec, pos, [(23.0, 12.0 + i) for i in range(10)], a_cooldown=cd, a_energy=[0] * 9 + [100])
    rows = f.state(t, np.zeros((10, 16)), 0)[:70].reshape(10, 7)  # [h, cd/energy, rx, ry, t0, t1, t2]
    assert rows[0, 1] == pytest.approx(5 / 25) and rows[2, 1] == pytest.approx(3 / 15)
    assert rows[9, 1] == pytest.approx(100 / 200)
    np.testing.assert_array_equal(rows[[0, 2, 9], 4:], np.eye(3))
    assert f.agent_features == ["health", "energy/cooldown", "rel_x", "rel_y", "type_0", "type_1", "type_2"]
    assert f.enemy_features == ["health", "rel_x", "rel_y", "type_0", "type_1", "type_2"]


def test_avail_dead_walls_range_and_bounds():
    spec, t = _three_marines()
    f = SmacFeatures(spec, SmacOptions())
    av = f.avail_actions(t)
    np.testing.assert_array_equal(av[0], [0, 1, 0, 1, 1, 1, 1, 0, 0])  # wall north; e0 at exactly 6
    t.enemies.pos[0] = (16.01, 24.2)
    assert f.avail_actions(t)[0, 6] == 0  # just beyond 6
    t.allies.health[0] = 0
    np.testing.assert_array_equal(f.avail_actions(t)[0], [1] + [0] * 8)  # dead: only no-op
    open_f = feats("3s_vs_3z")
    ot = table_for(open_f.spec, [(29.5, 16), (2.5, 2.5), (5, 5)], [(20, 20)] * 3)
    oav = open_f.avail_actions(ot)
    assert oav[0, 4] == 0 and oav[0, 5] == 1  # east cell 30 lies outside the playable area (cells 2-29)
    assert oav[1, 3] == 0 and oav[1, 5] == 0 and oav[1, 2] == 1 and oav[1, 4] == 1
    # SMAC truncates towards zero: int(0.5 - 1) = 0 is inside the map, so on a map walkable to its edges
    # west and south stay available there, and east of 31.5 is out of bounds.
    edge = SmacFeatures(replace(open_f.spec, pathing_grid=np.ones((32, 32), dtype=bool)), SmacOptions())
    eav = edge.avail_actions(table_for(edge.spec, [(31.5, 16), (0.5, 0.5), (5, 5)], [(20, 20)] * 3))
    assert eav[0, 4] == 0 and eav[0, 5] == 1 and eav[1, 3] == 1 and eav[1, 5] == 1
    walled = feats("2s_vs_1sc")
    wt = table_for(walled.spec, [(8.5, 16), (19.6, 23.4)], [(13.92, 20.04)])
    np.testing.assert_array_equal(walled.avail_actions(wt)[:, 2:6], [[1, 1, 1, 0], [0, 1, 0, 1]])


def test_avail_medivac_heal_rules():
    spec = load_map("MMM")
    f = SmacFeatures(spec, SmacOptions())
    pos = [(9.0, 16.0)] * 10
    pos[0] = (15.5, 16.0)  # marauder 6.5 away: out of heal range
    pos[3] = (15.0, 16.0)  # marine exactly 6 away: in range
    t = table_for(spec, pos, [(10.0, 17.0)] * 10, a_health=[125, 0] + [45] * 8)  # agent 1 dead
    av = f.avail_actions(t)
    heal = av[9, 6:]
    np.testing.assert_array_equal(heal, [0, 0, 1, 1, 1, 1, 1, 1, 1, 0])  # not dead 1, not itself, not far 0
    assert av[2, 6:].sum() == 10  # a marine can attack all 10 enemies within 6


def test_reward_damage_kills_and_only_positive():
    spec = load_map("3m")
    f = SmacFeatures(spec, SmacOptions())
    pos = [(9, 16)] * 3
    prev = table_for(spec, pos, pos, a_health=[45, 20, 45])
    cur = table_for(spec, pos, pos, a_health=[40, 0, 45], e_health=[39, 0, 45])
    da, de = np.zeros(3, bool), np.zeros(3, bool)
    assert f.battle_reward(prev, cur, da, de) == pytest.approx(6 + 45 + 10)  # ally losses ignored
    np.testing.assert_array_equal(de, [0, 1, 0])
    np.testing.assert_array_equal(da, [0, 1, 0])
    assert f.battle_reward(cur, cur, da, de) == 0  # a death is counted once
    neg = SmacFeatures(spec, SmacOptions(reward_only_positive=False))
    da, de = np.zeros(3, bool), np.zeros(3, bool)
    # 51 damage + 10 kill - 0.5*10 ally death - 0.5*(5 + 20) ally damage
    assert neg.battle_reward(prev, cur, da, de) == pytest.approx(51 + 10 - 5 - 12.5)
    sparse = SmacFeatures(spec, SmacOptions(reward_sparse=True))
    assert sparse.battle_reward(prev, cur, np.zeros(3, bool), np.zeros(3, bool)) == 0


def test_reward_abs_turns_shield_regen_positive():
    spec = load_map("2s3z")
    pos = [(9, 16)] * 5
    prev = table_for(spec, pos, pos, e_shield=[70, 80, 50, 50, 50])
    cur = table_for(spec, pos, pos, e_shield=[72, 80, 50, 50, 50])
    z = lambda: np.zeros(5, bool)  # noqa: E731
    assert SmacFeatures(spec, SmacOptions()).battle_reward(prev, cur, z(), z()) == pytest.approx(2.0)
    raw = SmacFeatures(spec, SmacOptions(reward_only_positive=False))
    assert raw.battle_reward(prev, cur, z(), z()) == pytest.approx(-2.0)


def test_end_codes_including_mmm_medivac_rules():
    f = feats("3m")
    t = table_for(f.spec, [(9, 16)] * 3, [(9, 16)] * 3)
    assert f.end_code(t) is None
    t.enemies.health[:] = 0
    assert f.end_code(t) == 1
    t.allies.health[:] = 0
    assert f.end_code(t) == 0  # draw
    t.enemies.health[1] = 5
    assert f.end_code(t) == -1
    m = feats("MMM")
    t = table_for(m.spec, [(9, 16)] * 10, [(9, 16)] * 10)
    t.enemies.health[:9] = 0  # only the enemy medivac (id 9) left
    assert m.end_code(t) == 1
    t.enemies.health[8] = 10  # medivac + a marine: still running
    assert m.end_code(t) is None
    t.allies.health[:9] = 0  # only our medivac left: a loss, even with enemies left
    assert m.end_code(t) == -1
    t.allies.health[:] = 0
    t.enemies.health[:] = 0
    assert m.end_code(t) == -1  # SMAC: on MMM maps a mutual wipe-out is a loss


def test_visibility_matrix():
    spec, t = _three_marines()
    v = SmacFeatures(spec, SmacOptions()).visibility(t)
    assert v.shape == (3, 6) and v.dtype == bool
    np.testing.assert_array_equal(v[0], [0, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(v[1], [1, 0, 0, 1, 1, 0])
    np.testing.assert_array_equal(v[2], [0, 0, 0, 0, 0, 0])


def test_optional_obs_blocks():
    spec, t = _three_marines()
    f = SmacFeatures(spec, SmacOptions(obs_last_action=True, obs_pathing_grid=True, obs_timestep_number=True))
    last = np.zeros((3, 9))
    last[1, 7] = 1
    o = f.observations(t, f.avail_actions(t), last, 30)[0]
    assert o.shape == (30 + 8 + 2 * 9 + 1,)
    # pathing at int(10, 23.2) + offsets: (10,27) out of band -> 0, (10,19) 1, (14,23) 1, (6,23) 1,
    # (12,25) 0, (8,21) 1, (12,21) 1, (8,25) 0
    np.testing.assert_array_equal(o[4:12], [0, 1, 1, 1, 0, 1, 1, 0])
    ally1 = o[12 + 15 : 12 + 15 + 14]
    np.testing.assert_array_equal(ally1[5:], last[1])
    assert o[-1] == pytest.approx(0.5)


def test_options_validation():
    with pytest.raises(ValueError, match="obs_last_action"):
        SmacOptions.from_flags(obs_last_actions=True)
    with pytest.raises(ValueError, match="must be a bool"):
        SmacOptions(reward_sparse="yes")
    with pytest.raises(ValueError, match="reward_scale_rate"):
        SmacOptions(reward_scale_rate=0)
    assert SmacOptions(reward_win=100).reward_win == 100.0


def test_reward_clip_at_zero_smacv2_rule_compiled_matches_reference():
    spec = load_map("2s3z")
    pos = [(9, 16)] * 5
    prev = table_for(spec, pos, pos, e_shield=[70, 80, 50, 50, 50])
    regen = table_for(spec, pos, pos, e_shield=[72, 80, 50, 50, 50])
    hit = table_for(spec, pos, pos, e_shield=[60, 80, 50, 50, 50])
    for compiled in (True, False):
        f = SmacFeatures(spec, SmacOptions(), compiled=compiled)
        f.reward_clip_at_zero = True
        for cur, want in ((regen, 0.0), (hit, 10.0)):
            dead = np.zeros((1, 10), dtype=bool)
            r = f.reward_and_end(Units.from_table(prev), Units.from_table(cur), dead)[0]
            assert r[0] == pytest.approx(want)
