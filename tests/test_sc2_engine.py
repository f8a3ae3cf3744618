"""The real-game SMAC engine (``marl.envs.smac.sc2``) against a protocol-level fake of StarCraft II that
answers with real s2clientprotocol messages; real-game tests at the end run only where SC2 is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pysc2", reason="pysc2 is not installed (pip install -e '.[sc2]')")

from sc2_fakes import (  # noqa: E402
    PB,
    RL_BASE_ID,
    STOCK_IDS,
    FakeController,
    FakeLauncher,
    FakeUnit,
    ally_type_id,
    game_info,
    spawner,
    tag_source,
    units_from_table,
)

from marl.envs.smac import StarCraft2Env, list_maps  # noqa: E402
from marl.envs.smac.features import UNIT_MAX_HEALTH_SHIELD  # noqa: E402
from marl.envs.smac.maps import load_map  # noqa: E402
from marl.envs.smac.sc2 import (  # noqa: E402
    EpisodeAborted,
    Sc2Engine,
    Sc2MapMismatch,
    Sc2Unavailable,
    find_sc2,
    resolve_backend,
)
from marl.envs.smac.sc2.translate import decode_game_info  # noqa: E402
from marl.envs.smac.types import SideTable, UnitTable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
f32 = np.float32


def make_side(types, rng, alive_frac=1.0, x=(8, 24), y=(10, 22)) -> SideTable:
    """Random float32-exact rows; allies of one type come sorted by (x, y) as SMAC orders agents."""
    n = len(types)
    pos = np.stack([rng.uniform(*x, n), rng.uniform(*y, n)], 1).astype(f32).astype(float)
    hmax = np.array([UNIT_MAX_HEALTH_SHIELD[u][0] for u in types], float)
    smax = np.array([UNIT_MAX_HEALTH_SHIELD[u][1] for u in types], float)
    health = np.round(rng.uniform(0.2, 1.0, n) * hmax, 1).astype(f32).astype(float)
    health[rng.uniform(size=n) > alive_frac] = 0.0
    shield = np.where(health > 0, np.round(rng.uniform(0, 1, n) * smax), 0.0)
    cooldown = rng.integers(0, 15, n).astype(float)
    energy = np.array([float(rng.integers(0, 200)) if u == "medivac" else 0.0 for u in types])
    return SideTable(tuple(types), pos, health, hmax, shield, smax, cooldown, energy)


def sort_allies(side: SideTable, spec) -> SideTable:
    """Reorder rows by (type rank, x, y), the agent order of the game."""
    rank = {u: k for k, u in enumerate(dict.fromkeys(spec.ally_types))}
    idx = sorted(range(len(side.unit_type)), key=lambda i: (rank[side.unit_type[i]], *side.pos[i]))
    return SideTable(
        tuple(side.unit_type[i] for i in idx),
        side.pos[idx],
        side.health[idx],
        side.health_max[idx],
        side.shield[idx],
        side.shield_max[idx],
        side.cooldown[idx],
        side.energy[idx],
    )


def make_table(spec, rng, alive_frac=1.0) -> UnitTable:
    return UnitTable(
        sort_allies(make_side(spec.ally_types, rng, alive_frac), spec),
        make_side(spec.enemy_types, rng, alive_frac),
    )


def game(spec, table, seed=0, **kw):
    """An Sc2Engine on a fake game whose armies are ``table`` (allies listed in a shuffled raw order)."""
    tags = tag_source()
    launcher = FakeLauncher(lambda: FakeController(spawner(spec, table, tags, shuffle_allies=seed), **kw))
    return Sc2Engine(spec, seed=seed, launcher=launcher), launcher


def assert_tables_equal(a: UnitTable, b: UnitTable) -> None:
    for sa, sb in ((a.allies, b.allies), (a.enemies, b.enemies)):
        assert sa.unit_type == sb.unit_type
        for f in ("pos", "health", "health_max", "shield", "shield_max", "cooldown", "energy"):
            np.testing.assert_array_equal(getattr(sa, f), getattr(sb, f), err_msg=f)


# ---------------------------------------------------------------- launch, extraction, ordering
def test_launch_sends_smac_create_and_join_requests():
    spec = load_map("3m")
    eng, launcher = game(spec, make_table(spec, np.random.default_rng(0)), seed=123)
    eng.reset()
    ctrl = launcher.current
    (create,) = ctrl.requests("create_game")
    assert create.local_map.map_path == "SMAC_Maps/3m.SC2Map"
    assert create.local_map.map_data == b"SC2Map:SMAC_Maps/3m.SC2Map"
    assert not create.realtime and create.random_seed == 123
    p1, p2 = create.player_setup
    assert p1.type == PB.sc_pb.Participant
    assert (p2.type, p2.race, p2.difficulty) == (PB.sc_pb.Computer, PB.common_pb.Terran, PB.sc_pb.VeryHard)
    (join,) = ctrl.requests("join_game")
    assert join.race == PB.common_pb.Terran and join.options.raw and not join.options.score
    assert eng.get_stats() == {"restarts": 0, "launches": 1}
    spec2 = load_map("2s_vs_1sc")
    eng2, l2 = game(spec2, make_table(spec2, np.random.default_rng(0)))
    eng2.difficulty = "A"
    eng2.reset()
    (create2,) = l2.current.requests("create_game")
    assert create2.player_setup[1].race == PB.common_pb.Zerg
    assert create2.player_setup[1].difficulty == PB.sc_pb.CheatInsane
    assert l2.current.requests("join_game")[0].race == PB.common_pb.Protoss


@pytest.mark.parametrize("map_name", ["3m", "MMM", "2s3z", "1c3s5z", "bane_vs_bane"])
def test_unit_table_from_raw_observation(map_name):
    spec = load_map(map_name)
    table = make_table(spec, np.random.default_rng(1))
    neutral = FakeUnit(tag=5, unit_type=341, owner=16, x=1.0, y=1.0, health=100, health_max=100)
    eng, launcher = game(spec, table, seed=7, spawn_delay=2, extra_units=[neutral])
    got = eng.reset()
    assert_tables_equal(got, table)  # allies re-sorted from a shuffled raw list, neutral ignored
    assert got.allies.unit_type == spec.ally_types
    # SMAC waits (observe + step(1)) until both armies are complete
    assert launcher.current.requests("step") == [1, 1]


def test_ally_types_follow_smallest_rl_id_and_agents_sort_by_type_x_y():
    spec = load_map("MMM")
    tags = tag_source()
    allies = []
    # marines (RL id base+1) listed first, at smaller x than the marauders: type decides before x
    for k, (name, x, y) in enumerate(
        [
            ("marine", 5.0, 9.0),
            ("marine", 5.0, 7.0),
            ("medivac", 1.0, 1.0),
            ("marauder", 12.0, 3.0),
            ("marauder", 11.0, 30.0),
        ]
        + [("marine", 6.0 + k2, 1.0) for k2 in range(5)]
    ):
        allies.append(FakeUnit(tags(), ally_type_id(spec, name), 1, x, y, 50, 125, energy=float(k)))
    enemies = [
        FakeUnit(tags(), STOCK_IDS[u], 2, 20.0 + j, 16.0, 40, 125) for j, u in enumerate(spec.enemy_types)
    ]
    launcher = FakeLauncher(lambda: FakeController(lambda: allies + enemies))
    eng = Sc2Engine(spec, launcher=launcher)
    t = eng.reset()
    assert t.allies.unit_type == ("marauder",) * 2 + ("marine",) * 7 + ("medivac",)
    np.testing.assert_array_equal(t.allies.pos[:4], [[11, 30], [12, 3], [5, 7], [5, 9]])
    assert eng._tracker.min_ally_type == RL_BASE_ID


def test_enemies_keep_raw_order_within_a_type_and_take_their_types_slots():
    spec = load_map("2s3z")  # enemies: stalker, stalker, zealot, zealot, zealot
    tags = tag_source()
    allies = [
        FakeUnit(tags(), ally_type_id(spec, u), 1, 8.0 + i, 16.0, 80, 80, 80, 80)
        for i, u in enumerate(spec.ally_types)
    ]
    raw = [("zealot", 30.0), ("stalker", 26.0), ("zealot", 21.0), ("stalker", 22.0), ("zealot", 25.0)]
    enemies = [FakeUnit(tags(), STOCK_IDS[u], 2, x, 16.0, 70, 100, 50, 50) for u, x in raw]
    eng = Sc2Engine(spec, launcher=FakeLauncher(lambda: FakeController(lambda: allies + enemies)))
    t = eng.reset()
    assert t.enemies.unit_type == spec.enemy_types
    np.testing.assert_array_equal(t.enemies.pos[:, 0], [26.0, 22.0, 30.0, 21.0, 25.0])
    # same-type enemies are never sorted: observation order is kept (SMAC)
    spec3 = load_map("3m")
    e3 = [FakeUnit(tags(), 48, 2, x, 16.0, 45, 45) for x in (30.0, 20.0, 25.0)]
    a3 = [FakeUnit(tags(), RL_BASE_ID, 1, 9.0, y, 45, 45) for y in (14.0, 16.0, 18.0)]
    t3 = Sc2Engine(spec3, launcher=FakeLauncher(lambda: FakeController(lambda: a3 + e3))).reset()
    np.testing.assert_array_equal(t3.enemies.pos[:, 0], [30.0, 20.0, 25.0])


def test_map_mismatch_is_reported():
    spec = load_map("3m")
    tags = tag_source()
    allies = [FakeUnit(tags(), RL_BASE_ID, 1, 9.0, 14.0 + i, 45, 45) for i in range(3)]
    wrong = [FakeUnit(tags(), STOCK_IDS["zealot"], 2, 23.0, 14.0 + i, 100, 100) for i in range(3)]
    eng = Sc2Engine(spec, launcher=FakeLauncher(lambda: FakeController(lambda: allies + wrong)))
    with pytest.raises(Sc2MapMismatch, match="more enemy zealots"):
        eng.reset()
    mmm = load_map("MMM")
    odd = [FakeUnit(tags(), RL_BASE_ID + 5 * (i == 0), 1, 9.0, 10.0 + i, 45, 45) for i in range(10)]
    foes = [FakeUnit(tags(), STOCK_IDS[u], 2, 23.0, 10.0 + j, 45, 45) for j, u in enumerate(mmm.enemy_types)]
    with pytest.raises(Sc2MapMismatch, match="RL types"):
        Sc2Engine(mmm, launcher=FakeLauncher(lambda: FakeController(lambda: odd + foes))).reset()


# ---------------------------------------------------------------- stepping: tags, deaths, commands
def test_tags_are_tracked_and_missing_units_are_dead():
    spec = load_map("3m")
    table = make_table(spec, np.random.default_rng(2))
    eng, launcher = game(spec, table)
    t0 = eng.reset()
    ctrl = launcher.current
    ally_tags = [int(t) for t in eng._tracker.ally_tags]
    enemy_tags = [int(t) for t in eng._tracker.enemy_tags]

    def script(c: FakeController, n: int) -> None:
        assert n == 8  # step_mul
        by_tag = {u.tag: u for u in c.units}
        by_tag[ally_tags[2]].x += 1.5
        by_tag[enemy_tags[0]].health = 10.0
        # ally 1 and enemy 2 die (vanish); the rest come back in reversed raw order
        c.units = [u for u in reversed(c.units) if u.tag not in (ally_tags[1], enemy_tags[2])]

    ctrl.on_step = script
    t1 = eng.step(np.array([1, 1, 1]))
    np.testing.assert_array_equal(t1.allies.health, [t0.allies.health[0], 0.0, t0.allies.health[2]])
    assert t1.allies.pos[2, 0] == t0.allies.pos[2, 0] + 1.5
    np.testing.assert_array_equal(t1.enemies.health, [10.0, t0.enemies.health[1], 0.0])
    assert t1.enemies.shield[2] == 0.0 and t1.allies.shield[1] == 0.0
    ctrl.on_step = None
    t2 = eng.step(np.array([1, 0, 1]))
    assert_tables_equal(t2, t1)  # nothing changed; the dead stay dead
    assert t0.allies.health[1] > 0  # returned tables are copies


def test_actions_become_raw_commands():
    spec = load_map("MMM")
    table = make_table(spec, np.random.default_rng(3))
    eng, launcher = game(spec, table)
    t = eng.reset()
    ally_tags, enemy_tags = list(eng._tracker.ally_tags), list(eng._tracker.enemy_tags)
    # agents 0-1 marauders, 2-8 marines, 9 medivac
    acts = np.array([0, 1, 2, 3, 4, 5, 6 + 4, 6 + 9, 0, 6 + 3])
    eng.step(acts)
    (req,) = launcher.current.requests("actions")
    cmds = [a.action_raw.unit_command for a in req.actions]
    assert len(cmds) == 8  # the two no-ops send nothing
    by_unit = {c.unit_tags[0]: c for c in cmds}
    assert all(len(c.unit_tags) == 1 and not c.queue_command for c in cmds)
    assert ally_tags[0] not in by_unit and ally_tags[8] not in by_unit
    assert by_unit[ally_tags[1]].ability_id == 4
    x, y = t.allies.pos[:, 0], t.allies.pos[:, 1]
    for agent, (dx, dy) in zip((2, 3, 4, 5), ((0, 2), (0, -2), (2, 0), (-2, 0)), strict=True):
        c = by_unit[ally_tags[agent]]
        assert c.ability_id == 16
        assert (c.target_world_space_pos.x, c.target_world_space_pos.y) == pytest.approx(
            (x[agent] + dx, y[agent] + dy), abs=1e-5
        )
    assert (by_unit[ally_tags[6]].ability_id, by_unit[ally_tags[6]].target_unit_tag) == (23, enemy_tags[4])
    assert (by_unit[ally_tags[7]].ability_id, by_unit[ally_tags[7]].target_unit_tag) == (23, enemy_tags[9])
    # the Medivac's 6+j heals ally j
    assert (by_unit[ally_tags[9]].ability_id, by_unit[ally_tags[9]].target_unit_tag) == (386, ally_tags[3])
    assert launcher.current.requests("step")[-1] == 8


# ---------------------------------------------------------------- episodes, restarts, replays
def test_fast_restart_between_episodes():
    spec = load_map("3m")
    table = make_table(spec, np.random.default_rng(4))
    eng, launcher = game(spec, table, respawn_delay=3)
    eng.reset()
    ctrl = launcher.current
    old = set(map(int, eng._tracker.ally_tags)) | set(map(int, eng._tracker.enemy_tags))
    dead_enemy = int(eng._tracker.enemy_tags[0])
    ctrl.units = [u for u in ctrl.units if u.tag != dead_enemy]
    eng.step(np.array([1, 1, 1]))
    n_steps = len(ctrl.requests("step"))
    t = eng.reset()
    (kill,) = ctrl.requests("debug")
    assert sorted(kill[0].kill_unit.tag) == sorted(old - {dead_enemy})
    # step(2), then observe + step(1) until the trigger respawns the armies 3 loops later
    assert ctrl.requests("step")[n_steps:] == [2, 1, 1, 1]
    new = set(map(int, eng._tracker.ally_tags)) | set(map(int, eng._tracker.enemy_tags))
    assert not new & old
    assert_tables_equal(t, table)
    assert eng.get_stats() == {"restarts": 0, "launches": 1} and len(launcher.controllers) == 1


def test_stale_units_are_not_taken_for_the_new_army():
    spec = load_map("3m")
    table = make_table(spec, np.random.default_rng(5))
    eng, launcher = game(spec, table)
    eng.reset()
    ctrl = launcher.current
    old = set(map(int, eng._tracker.ally_tags))
    pending: list[int] = []
    ctrl.debug = lambda cmds: pending.extend(cmds[0].kill_unit.tag)  # the kill is processed late
    real_step = FakeController.step

    def late_kill(count=1):
        if count == 1 and pending:  # the killed units are still observed right after step(2)
            ctrl.units = [u for u in ctrl.units if u.tag not in pending]
            pending.clear()
        return real_step(ctrl, count)

    ctrl.step = late_kill
    t = eng.reset()
    assert not set(map(int, eng._tracker.ally_tags)) & old
    assert_tables_equal(t, table)


def test_connection_failure_in_step_relaunches_and_ends_the_episode():
    spec = load_map("3m")
    table = make_table(spec, np.random.default_rng(6))
    eng, launcher = game(spec, table)
    eng.reset()
    first = launcher.current
    first.fail["step"] = len(first.requests("step")) + 1
    with pytest.raises(EpisodeAborted, match="relaunched"):
        eng.step(np.array([1, 1, 1]))
    assert eng.get_stats() == {"restarts": 1, "launches": 2}
    assert launcher.closes == 1 and len(launcher.controllers) == 2
    t = eng.reset()  # the fresh game needs no kill: its armies are just spawning
    second = launcher.current
    assert second.requests("debug") == [] and len(second.requests("create_game")) == 1
    assert_tables_equal(t, table)
    eng.step(np.array([1, 1, 1]))


def test_connection_failure_in_reset_relaunches():
    spec = load_map("3m")
    table = make_table(spec, np.random.default_rng(7))
    n = {"k": 0}

    def make():
        n["k"] += 1
        c = FakeController(spawner(spec, table, tag_source()))
        if n["k"] == 1:
            c.fail["observe"] = 1
        return c

    launcher = FakeLauncher(make)
    eng = Sc2Engine(spec, launcher=launcher, max_relaunches=2)
    assert_tables_equal(eng.reset(), table)
    assert eng.get_stats() == {"restarts": 1, "launches": 2}

    always = FakeLauncher(lambda: _failing(spec, table))
    eng2 = Sc2Engine(spec, launcher=always, max_relaunches=2)
    with pytest.raises(PB.protocol.ConnectionError):
        eng2.reset()
    assert eng2.get_stats()["restarts"] == 2


def _failing(spec, table):
    c = FakeController(spawner(spec, table, tag_source()))
    c.fail["observe"] = 1
    return c


def test_respawn_timeout_and_step_before_reset_are_errors():
    spec = load_map("3m")
    eng = Sc2Engine(spec, launcher=FakeLauncher(lambda: FakeController(lambda: [])), respawn_timeout_loops=5)
    with pytest.raises(RuntimeError, match="did not"):
        eng.reset()
    eng2, _ = game(spec, make_table(spec, np.random.default_rng(0)))
    with pytest.raises(RuntimeError, match="reset"):
        eng2.step(np.array([1, 1, 1]))
    with pytest.raises(RuntimeError, match="reset"):
        eng2.save_replay()
    with pytest.raises(ValueError, match="difficulty"):
        Sc2Engine(spec, difficulty="11", launcher=FakeLauncher(FakeController))
    with pytest.raises(ValueError, match="step_mul"):
        Sc2Engine(spec, step_mul=0, launcher=FakeLauncher(FakeController))


def test_save_replay_and_close(tmp_path):
    spec = load_map("3m")
    eng, launcher = game(spec, make_table(spec, np.random.default_rng(8)))
    eng.reset()
    path = Path(eng.save_replay(tmp_path / "rep", prefix="run1"))
    assert path.suffix == ".SC2Replay" and path.name.startswith("run1_")
    assert path.read_bytes() == b"SC2Replay-fake-" + str(launcher.current.loop).encode()
    path2 = Path(eng.save_replay(tmp_path / "rep", prefix="run1"))
    assert path2 != path and path2.exists()
    eng.close()
    assert launcher.current.closed and launcher.closes == 1


# ---------------------------------------------------------------- map geometry from game_info
def test_game_info_decoding_matches_smac_conventions():
    # hand-packed 16x8 1-bit grid: rows of y, MSB first: (x=0,y=0) and (x=9,y=1) walkable
    data = bytearray(16)
    data[0] = 0x80
    data[2 + 1] = 0x40
    size = PB.common_pb.Size2DI(x=16, y=8)
    heights = bytes(range(128))  # row-major rows of y
    info = PB.sc_pb.ResponseGameInfo(
        start_raw=PB.raw_pb.StartRaw(
            map_size=size,
            pathing_grid=PB.common_pb.ImageData(bits_per_pixel=1, size=size, data=bytes(data)),
            terrain_height=PB.common_pb.ImageData(bits_per_pixel=8, size=size, data=heights),
            playable_area=PB.common_pb.RectangleI(
                p0=PB.common_pb.PointI(x=1, y=2), p1=PB.common_pb.PointI(x=15, y=7)
            ),
        )
    )
    g = decode_game_info(info)
    assert g.map_size == (16, 8) and g.max_distance == (14.0, 5.0)
    assert g.pathing_grid.shape == (16, 8)
    assert {tuple(c) for c in np.argwhere(g.pathing_grid)} == {(0, 0), (9, 1)}
    # SMAC flips the heights along y: [x][y] = byte at row (7 - y), column x, over 255
    assert g.terrain_height[3, 0] == pytest.approx((7 * 16 + 3) / 255)
    assert g.terrain_height[5, 7] == pytest.approx(5 / 255)
    # legacy 8-bit grid: 0 = walkable, flipped along y
    legacy = np.full(128, 255, np.uint8)
    legacy[7 * 16 + 2] = 0  # row 7, column 2 -> (x=2, y=0) after the flip
    info.start_raw.pathing_grid.CopyFrom(
        PB.common_pb.ImageData(bits_per_pixel=8, size=size, data=legacy.tobytes())
    )
    assert {tuple(c) for c in np.argwhere(decode_game_info(info).pathing_grid)} == {(2, 0)}


def test_game_spec_uses_the_games_grid():
    spec = load_map("3m")
    grid = np.zeros((32, 32), bool)
    grid[2:30, 6:26] = True
    eng, _ = game(spec, make_table(spec, np.random.default_rng(9)), info=game_info(grid_xy=grid))
    with pytest.raises(RuntimeError, match="reset"):
        eng.game_spec()
    eng.reset()
    gs = eng.game_spec()
    np.testing.assert_array_equal(gs.pathing_grid, grid)
    assert gs.terrain_height.shape == (32, 32) and gs.terrain_height[0, 0] == pytest.approx(128 / 255)
    assert gs.ally_types == spec.ally_types and gs.map_size == (32, 32)
    assert gs.extent == (28.0, 28.0)  # the fake reports SMAC's playable area, (2, 2)-(30, 30)


def test_state_divides_positions_by_the_games_playable_area(caplog):
    # SMAC's get_state: (x - map_x / 2) / max_distance_x, the playable area's width the game reports
    spec = load_map("3m")
    table = make_table(spec, np.random.default_rng(4))
    info = game_info(grid_xy=spec.pathing_grid, playable=((1, 3), (31, 27)))  # 30 x 24, not the file's
    units = units_from_table(spec, table, lambda o, i: 100 * o + i + 1)
    launcher = FakeLauncher(lambda: FakeController(lambda: units, info=info))
    with caplog.at_level("WARNING"):
        env = StarCraft2Env("3m", engine=Sc2Engine(spec, launcher=launcher))
        _, state = env.reset()
    assert "playable area is (30.0, 24.0), the map file's (28.0, 28.0)" in caplog.text
    assert env.spec.extent == (30.0, 24.0)
    rows = state[:12].reshape(3, 4)  # allies [health, cooldown, x, y]
    want = (table.allies.pos - 16) / [30, 24]
    np.testing.assert_allclose(
        rows[np.lexsort(rows[:, 2:].T[::-1])][:, 2:], want[np.lexsort(want.T[::-1])], rtol=1e-5
    )


# ---------------------------------------------------------------- same SMAC features from both engines
class TableEngine:
    """The embedded engine's stand-in: replays a fixed sequence of unit tables."""

    def __init__(self, tables):
        self.tables, self.k = tables, 0

    def reset(self):
        self.k = 0
        return self.tables[0].copy()

    def step(self, actions):
        self.k += 1
        return self.tables[self.k].copy()

    def seed(self, s):
        pass


@pytest.mark.parametrize("map_name", ["3m", "MMM", "2s3z", "3s_vs_5z", "2s_vs_1sc"])
def test_both_engines_give_identical_observations_and_states(map_name):
    spec = load_map(map_name)
    rng = np.random.default_rng(10)
    t0 = make_table(spec, rng)
    # the next tables keep positions close (so attacks stay available) and kill a few units
    tables = [t0]
    for _ in range(3):
        nxt = tables[-1].copy()
        for side in (nxt.allies, nxt.enemies):
            side.pos += rng.uniform(-0.5, 0.5, side.pos.shape).astype(f32)
            side.pos[:] = side.pos.astype(f32)
            hit = rng.integers(0, 30, len(side.health))
            side.health[:] = np.where(side.health > 0, np.maximum(side.health - hit, 0.0), 0.0)
            side.shield[:] = np.where(side.health > 0, side.shield, 0.0)
        tables.append(nxt)
    row_tag = {(o, i): 1000 + 10 * o + 100 * i for o in (1, 2) for i in range(80)}
    k = {"step": 0}

    def spawn():
        return units_from_table(spec, tables[0], lambda o, i: row_tag[(o, i)])

    def advance(c: FakeController, n: int) -> None:
        if n == spec_step_mul:
            k["step"] += 1
            c.units = units_from_table(spec, tables[k["step"]], lambda o, i: row_tag[(o, i)])[::-1]

    spec_step_mul = 8
    # the game reports the map file's own walls and a flat terrain, so both engines see one map
    info = game_info(grid_xy=spec.pathing_grid, height_xy=np.zeros(spec.map_size, np.uint8))
    launcher = FakeLauncher(lambda: FakeController(spawn, info=info))
    game_env = StarCraft2Env(map_name, engine=Sc2Engine(spec, launcher=launcher))
    sim_env = StarCraft2Env(map_name, engine=TableEngine(tables))
    obs_g, state_g = game_env.reset()
    launcher.current.on_step = advance
    obs_s, state_s = sim_env.reset()
    np.testing.assert_array_equal(np.stack(obs_g), np.stack(obs_s))
    np.testing.assert_array_equal(state_g, state_s)
    assert game_env.max_reward == sim_env.max_reward
    for _ in range(3):
        avail = np.array(sim_env.get_avail_actions())
        np.testing.assert_array_equal(np.array(game_env.get_avail_actions()), avail)
        acts = [int(rng.choice(np.flatnonzero(a))) for a in avail]
        r_g, d_g, i_g = game_env.step(acts)
        r_s, d_s, i_s = sim_env.step(acts)
        assert (r_g, d_g, i_g) == (r_s, d_s, i_s)
        np.testing.assert_array_equal(np.stack(game_env.get_obs()), np.stack(sim_env.get_obs()))
        np.testing.assert_array_equal(game_env.get_state(), sim_env.get_state())
        if d_g:
            break
    assert len(launcher.current.requests("actions")) >= 1


# ---------------------------------------------------------------- finding the game; protobuf isolation
def _fake_install(root: Path, maps=("3m",)) -> None:
    (root / "Versions" / "Base75689").mkdir(parents=True)
    (root / "Versions" / "Base75689" / "SC2_x64").write_bytes(b"")
    (root / "Maps" / "SMAC_Maps").mkdir(parents=True)
    for m in maps:
        (root / "Maps" / "SMAC_Maps" / f"{m}.SC2Map").write_bytes(b"")


def test_backend_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "none"))
    which, line = resolve_backend("auto", "3m")
    assert which == "sim" and "embedded engine" in line and "not installed" in line
    with pytest.raises(Sc2Unavailable, match="install_sc2.sh") as err:
        resolve_backend("sc2", "3m")
    assert "backend='sim'" in str(err.value) and "4.10" in str(err.value)
    _fake_install(tmp_path / "sc2")
    monkeypatch.setenv("SC2PATH", str(tmp_path / "sc2"))
    assert find_sc2("3m").ok and find_sc2("3m").versions == ("Base75689",)
    which, line = resolve_backend("auto", "3m")
    assert which == "sc2" and "StarCraft II" in line
    assert resolve_backend("sc2", "3m")[0] == "sc2"
    which, line = resolve_backend("auto", "8m")
    assert which == "sim" and "8m.SC2Map is missing" in line
    assert resolve_backend("sim", "3m")[0] == "sim"
    with pytest.raises(ValueError, match="allowed"):
        resolve_backend("gpu", "3m")


@pytest.mark.skipif(not (shutil.which("curl") or shutil.which("wget")), reason="needs curl or wget")
def test_install_script_with_local_archives(tmp_path):
    """scripts/install_sc2.sh end to end on small local stand-ins for the game and map archives."""
    src = tmp_path / "src"
    _fake_install(src / "StarCraftII", maps=())
    maps = sorted(list_maps())  # the script checks for every map the project ships a file for
    assert len(maps) == 23
    game_zip, maps_zip = tmp_path / "SC2.4.10.zip", tmp_path / "SMAC_Maps.zip"
    with zipfile.ZipFile(game_zip, "w") as z:
        z.write(src / "StarCraftII/Versions/Base75689/SC2_x64", "StarCraftII/Versions/Base75689/SC2_x64")
    with zipfile.ZipFile(maps_zip, "w") as z:
        for m in maps[:-1]:
            z.writestr(f"SMAC_Maps/{m}.SC2Map", b"map")
    target = tmp_path / "games" / "StarCraftII"
    env = {
        **os.environ,
        "SC2PATH": str(target),
        "SC2_URL": game_zip.as_uri(),
        "SMAC_MAPS_URL": maps_zip.as_uri(),
    }
    script = str(ROOT / "scripts" / "install_sc2.sh")
    r = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "maps missing" in r.stderr and maps[-1] in r.stderr, r.stderr
    with zipfile.ZipFile(maps_zip, "a") as z:
        z.writestr(f"SMAC_Maps/{maps[-1]}.SC2Map", b"map")
    r = subprocess.run(
        ["bash", script], env={**env, "FORCE": "1"}, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "23 SMAC maps" in r.stdout
    assert find_sc2("MMM", target).ok, find_sc2("MMM", target).explain()
    assert (target / "Maps" / "SMAC_Maps" / "2c_vs_64zg.SC2Map").read_bytes() == b"map"


def _run(code: str, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_marl_leaves_protobuf_alone():
    r = _run("""
        import os, sys
        import marl, marl.envs.smac, marl.envs.smac.sc2
        from marl.envs.smac.sc2 import resolve_backend
        resolve_backend("auto", "3m")
        assert not any(m.startswith(("google.protobuf", "pysc2", "s2clientprotocol")) for m in sys.modules)
        assert "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION" not in os.environ
        print("clean")
    """)
    assert r.returncode == 0 and "clean" in r.stdout, r.stderr


def test_pysc2_and_mindspore_work_together_in_either_order():
    code = """
        import numpy as np
        {first}
        {second}
        from google.protobuf.internal import api_implementation
        assert api_implementation.Type() == "python"
        from s2clientprotocol import raw_pb2
        assert raw_pb2.Unit(tag=3).tag == 3
        assert float((mindspore.Tensor(np.ones(3, np.float32)) * 2).sum().asnumpy()) == 6.0
        print("ok")
    """
    load = "from marl.envs.smac.sc2 import load_pysc2; load_pysc2()"
    for first, second in ((load, "import mindspore"), ("import mindspore", load)):
        r = _run(code.format(first=first, second=second))
        assert r.returncode == 0 and "ok" in r.stdout, (first, r.stderr[-2000:])


def test_protobuf_loaded_with_upb_first_gives_a_clear_error():
    r = _run("""
        from google.protobuf import descriptor_pb2  # loads protobuf's upb backend
        from marl.envs.smac.sc2 import Sc2Unavailable, load_pysc2
        try:
            load_pysc2()
        except Sc2Unavailable as e:
            print("ERR", e)
    """)
    assert "ERR pysc2 needs protobuf's pure-Python implementation" in r.stdout, r.stderr
    assert "'upb'" in r.stdout


# ---------------------------------------------------------------- the real game (skipped without it)
_HAVE_SC2 = find_sc2("3m")


@pytest.mark.sc2
@pytest.mark.skipif(not _HAVE_SC2.ok, reason=f"StarCraft II + SMAC maps not found: {_HAVE_SC2.explain()}")
def test_real_game_two_episodes_on_3m(tmp_path):
    spec = load_map("3m")
    eng = Sc2Engine(spec, seed=0)
    env = StarCraft2Env("3m", engine=eng)
    rng = np.random.default_rng(0)
    try:
        for _ in range(2):
            obs, state = env.reset()
            assert len(obs) == 3 and obs[0].shape == (30,) and state.shape == (48,)
            done, steps = False, 0
            while not done:
                avail = np.array(env.get_avail_actions())
                _, done, _ = env.step([int(rng.choice(np.flatnonzero(a))) for a in avail])
                steps += 1
            assert steps <= spec.episode_limit
        assert eng.get_stats()["launches"] == 1
        assert Path(eng.save_replay(tmp_path)).stat().st_size > 0
    finally:
        eng.close()


# ------------------------------------------------------ StarCraft2Env wiring (after the env.py patch)
def test_env_backend_choice_prints_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SC2PATH", str(tmp_path))  # no game there
    import marl.envs.smac.env as env_module

    monkeypatch.setattr(env_module, "_ANNOUNCED", set())  # the choice is printed once per process
    env = StarCraft2Env("3m", backend="auto")
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "embedded engine" in out[0] and "install_sc2.sh" in out[0], out
    assert env.backend == "sim"
    env.reset()
    with pytest.raises(Sc2Unavailable, match="install_sc2.sh"):
        StarCraft2Env("3m", backend="sc2")
    StarCraft2Env("3m", backend="sim")
    assert capsys.readouterr().out == ""


def test_env_aborted_step_restarts_replay_and_close(tmp_path):
    spec = load_map("3m")
    eng, launcher = game(spec, make_table(spec, np.random.default_rng(0)))
    env = StarCraft2Env("3m", engine=eng, replay_dir=str(tmp_path))
    env.reset()
    c = launcher.current
    c.fail["step"] = len(c.requests("step")) + 1
    assert env.step([1, 1, 1]) == (0.0, True, {})  # SMAC's answer to a lost connection
    assert env.get_stats()["restarts"] == 1
    env.reset()
    env.step([1, 1, 1])
    assert env.save_replay().endswith(".SC2Replay")
    env.close()
    assert launcher.current.closed
