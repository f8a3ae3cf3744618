"""The SMAC map files (maps/*.yaml) and their loader (marl/envs/smac/maps.py)."""

from __future__ import annotations

import copy
from collections import deque

import numpy as np
import pytest
import yaml

from marl.envs.smac.maps import MAPS_DIR, list_maps, load_map, parse_map

# map: (allies, enemies, limit, races, unit_type_bits, map_type) from docs/smac.md §2 (SMAC's map registry).
TABLE = {
    "3m": ("3 marine", "3 marine", 60, "TT", 0, "marines"),
    "8m": ("8 marine", "8 marine", 120, "TT", 0, "marines"),
    "25m": ("25 marine", "25 marine", 150, "TT", 0, "marines"),
    "5m_vs_6m": ("5 marine", "6 marine", 70, "TT", 0, "marines"),
    "8m_vs_9m": ("8 marine", "9 marine", 120, "TT", 0, "marines"),
    "10m_vs_11m": ("10 marine", "11 marine", 150, "TT", 0, "marines"),
    "27m_vs_30m": ("27 marine", "30 marine", 180, "TT", 0, "marines"),
    "MMM": ("2 marauder,7 marine,1 medivac", "2 marauder,7 marine,1 medivac", 150, "TT", 3, "MMM"),
    "MMM2": ("2 marauder,7 marine,1 medivac", "3 marauder,8 marine,1 medivac", 180, "TT", 3, "MMM"),
    "2s3z": ("2 stalker,3 zealot", "2 stalker,3 zealot", 120, "PP", 2, "stalkers_and_zealots"),
    "3s5z": ("3 stalker,5 zealot", "3 stalker,5 zealot", 150, "PP", 2, "stalkers_and_zealots"),
    "3s5z_vs_3s6z": ("3 stalker,5 zealot", "3 stalker,6 zealot", 170, "PP", 2, "stalkers_and_zealots"),
    "3s_vs_3z": ("3 stalker", "3 zealot", 150, "PP", 0, "stalkers"),
    "3s_vs_4z": ("3 stalker", "4 zealot", 200, "PP", 0, "stalkers"),
    "3s_vs_5z": ("3 stalker", "5 zealot", 250, "PP", 0, "stalkers"),
    "1c3s5z": (
        "1 colossus,3 stalker,5 zealot",
        "1 colossus,3 stalker,5 zealot",
        180,
        "PP",
        3,
        "colossi_stalkers_zealots",
    ),
    "2m_vs_1z": ("2 marine", "1 zealot", 150, "TP", 0, "marines"),
    "corridor": ("6 zealot", "24 zergling", 400, "PZ", 0, "zealots"),
    "6h_vs_8z": ("6 hydralisk", "8 zealot", 150, "ZP", 0, "hydralisks"),
    "2s_vs_1sc": ("2 stalker", "1 spine_crawler", 300, "PZ", 0, "stalkers"),
    "so_many_baneling": ("7 zealot", "32 baneling", 100, "PZ", 0, "zealots"),
    "bane_vs_bane": ("4 baneling,20 zergling", "4 baneling,20 zergling", 200, "ZZ", 2, "bane"),
    "2c_vs_64zg": ("2 colossus", "64 zergling", 400, "PZ", 0, "colossus"),
}


def _expand(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for part in text.split(","):
        n, unit = part.split()
        out += [unit] * int(n)
    return tuple(out)


def _reachable(grid: np.ndarray, start: tuple[float, float]) -> np.ndarray:
    """Cells 4-connected to ``start`` through walkable cells."""
    seen = np.zeros_like(grid)
    q = deque([(int(start[0]), int(start[1]))])
    seen[q[0]] = True
    while q:
        x, y = q.popleft()
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < grid.shape[0] and 0 <= ny < grid.shape[1] and grid[nx, ny] and not seen[nx, ny]:
                seen[nx, ny] = True
                q.append((nx, ny))
    return seen


def test_all_23_maps_match_spec_table():
    assert list_maps() == sorted(TABLE)
    for name, (allies, enemies, limit, races, bits, mtype) in TABLE.items():
        s = load_map(name)
        assert s.name == name
        assert s.ally_types == _expand(allies), name  # agent-id order (SMAC sorts by RL unit type)
        assert s.enemy_types == _expand(enemies), name
        assert (s.episode_limit, s.ally_race + s.enemy_race, s.unit_type_bits, s.map_type) == (
            limit,
            races,
            bits,
            mtype,
        ), name
        assert s.pathing_grid.shape == (32, 32) and s.pathing_grid.dtype == bool
        assert s.description


def test_units_can_reach_each_other_on_every_map():
    for name in list_maps():
        s = load_map(name)
        seen = _reachable(s.pathing_grid, s.allies[0].spawn)
        points = [g.spawn for g in s.allies + s.enemies]
        points += [p for p in (s.enemy_order.target, s.enemy_order.target2) if p is not None]
        for x, y in points:
            assert seen[int(x), int(y)], f"{name}: ({x}, {y}) is cut off from the ally spawn"


def test_arena_geometry():
    band = load_map("3m").pathing_grid  # the game's recorded 3m: cells x 2-29 and y 7 pathable, y 6 blocked
    assert band[2:30, 7:25].all() and not band[:, :7].any() and not band[:, 25:].any()
    assert not band[:2].any() and not band[30:].any()  # outside the playable area (28 x 28, centred)
    assert load_map("8m").pathing_grid[2:30, 8:24].all()
    open_ = load_map("3s_vs_5z").pathing_grid
    assert open_[2:30, 2:30].all() and open_.sum() == 28 * 28
    walled = load_map("2s_vs_1sc").pathing_grid
    assert walled.sum() == 12 * 16 and walled[8:20, 8:24].all()
    ravine = load_map("2c_vs_64zg").pathing_grid
    assert not ravine[8:24, 12:14].any() and ravine[4:8, 12:14].all() and ravine[24:28, 12:14].all()
    corridor = load_map("corridor").pathing_grid
    assert corridor[12:30, 14:30].all() and corridor[2:12, 2:12].all()
    assert not corridor[2:10, 16:30].any()  # the upper-left is closed: the only way is the choke
    octagon = load_map("bane_vs_bane").pathing_grid
    assert octagon[16, 6] and not octagon[6, 6] and not octagon[25, 25] and octagon[16, 16]
    band = load_map("so_many_baneling").pathing_grid
    assert band[16, 16] and band[3, 3] and band[29, 29] and not band[2, 29] and not band[29, 2]


def test_cached_and_order():
    assert load_map("3m") is load_map("3m")
    o = load_map("2m_vs_1z").enemy_order
    assert (o.kind, o.target, o.target2) == ("attack_move_between", (13.0, 12.0), (19.0, 12.0))
    assert load_map("2s_vs_1sc").enemy_order.kind == "none"
    assert load_map("2c_vs_64zg").enemy_order.kind == "attack_group"
    assert load_map("corridor").enemy_order.target == (4.47, 4.33)


def test_unknown_map_lists_maps_and_suggests():
    with pytest.raises(ValueError, match=r"Did you mean '3s5z'.*Known maps: 10m_vs_11m") as err:
        load_map("3s5zz")
    assert "so_many_baneling" in str(err.value)


def _raw(name: str = "3m") -> dict:
    with open(MAPS_DIR / f"{name}.yaml") as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(episode_limt=5), "unknown key 'episode_limt'.*did you mean 'episode_limit'"),
        (lambda r: r["allies"][0].update(unit="marin"), "did you mean 'marine'"),
        (lambda r: r["races"].update(ally="X"), "races.ally is 'X'"),
        (lambda r: r.update(map_type="marine"), "map_type is 'marine'"),
        (lambda r: r["allies"][0].update(count=0), "count must be an int >= 1"),
        (lambda r: r["enemies"][0].update(spawn=[23, 30]), "not on a walkable cell"),
        (
            lambda r: r.update(
                unit_type_bits=1, allies=r["allies"] + [{"unit": "marauder", "count": 1, "spawn": [9, 16]}]
            ),
            "unit types",
        ),
        (lambda r: r["arena"]["walkable"].append({"circle": [1, 2]}), "must be {rect"),
        (lambda r: r.update(enemy_order={"kind": "attack_move"}), "takes 1 point"),
        (lambda r: r.pop("episode_limit"), "missing key"),
        (
            lambda r: r.update(playable_extent=[28, 33]),
            r"playable_extent\[1\] is 33; it must be in \(0, map_size",
        ),
        (lambda r: r.update(playable_extent=[0, 28]), r"playable_extent\[0\] is 0"),
        (lambda r: r.update(playable_extent=28), "playable_extent must be"),
    ],
)
def test_validation_errors(edit, message):
    raw = copy.deepcopy(_raw())
    edit(raw)
    with pytest.raises(ValueError, match=message):
        parse_map(raw, source="bad.yaml")


def test_playable_extent_is_smacs_28_on_every_map_and_can_be_given():
    # every SMAC map is 32 x 32 with a 28 x 28 playable area (docs/fidelity.md, source D and the map files)
    assert {(load_map(m).map_size, load_map(m).extent) for m in list_maps()} == {((32, 32), (28.0, 28.0))}
    raw = copy.deepcopy(_raw())
    raw["playable_extent"] = [30, 26.5]
    assert parse_map(raw).extent == (30.0, 26.5)
    raw = copy.deepcopy(_raw())
    raw.update(map_size=[40, 32], playable_extent=None)
    raw.pop("playable_extent")
    assert parse_map(raw).extent == (36.0, 28.0)  # the same 2-cell trim a side by default


def test_polygon_rasterisation_uses_cell_centres():
    raw = copy.deepcopy(_raw())
    raw["arena"] = {
        "walkable": [{"polygon": [[-8, 8], [40, 8], [16, 32]]}],
        "blocked": [{"rect": [0, 8, 2, 10]}],
    }
    g = parse_map(raw).pathing_grid
    # Edges x = y - 16 and x = 48 - y; a cell is in iff its centre is.
    assert g[15, 29] and not g[12, 29] and g[2, 17] and not g[31, 25] and g[29, 17]
    assert not g[15, 30] and not g[1, 17]  # inside the triangle but outside the playable area (2-30)
    assert not g[0, 8] and not g[1, 9] and g[2, 8]  # the blocked rect wins over the walkable triangle
    assert not g[:, :8].any()
