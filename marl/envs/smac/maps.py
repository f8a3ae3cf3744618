"""The SMAC map registry: one ``maps/<name>.yaml`` per scenario, loaded into a :class:`MapSpec`.

A map file gives the races, episode limit, unit-type bits, map type, the ally groups (agent-id order),
the enemy groups (enemy-id order), the enemy order at spawn and the walkable arena, described as shapes::

    arena:
      walkable: [{rect: [x0, y0, x1, y1]}, {polygon: [[x, y], ...]}]
      blocked:  [{rect: ...}]            # optional, removed from the walkable union
    map_size: [32, 32]                   # optional (every SMAC map is 32 x 32)
    playable_extent: [28, 28]            # optional: the playable area SMAC's state divides by

The loader rasterises the arena into ``MapSpec.pathing_grid`` (bool, shape (map_x, map_y), indexed
``[x][y]``): cell (i, j) is walkable iff its centre (i + 0.5, j + 0.5) is inside some walkable shape,
inside no blocked shape, and inside the playable area (the ``playable_extent`` centred on the map: no unit
leaves it; on 3m the game's recorded episodes show the cells beside it blocked, ``docs/fidelity.md``).
Everything is validated strictly; errors name the file and what is allowed.
"""

from __future__ import annotations

import difflib
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from marl.envs.smac.types import (
    MAP_TYPES,
    RACES,
    UNIT_NAMES,
    EnemyOrder,
    MapSpec,
    UnitGroup,
    default_extent,
)

# The map files live in the repository's maps/; map_files is a link to it, so that a wheel (`pip install .`)
# carries them (pyproject.toml's package-data).
MAPS_DIR = Path(__file__).resolve().parent / "map_files"

_TOP_KEYS = {
    "name",
    "description",
    "races",
    "episode_limit",
    "unit_type_bits",
    "map_type",
    "allies",
    "enemies",
    "enemy_order",
    "arena",
    "map_size",
    "playable_extent",
}
_REQUIRED = _TOP_KEYS - {"description", "map_size", "playable_extent"}
_ORDER_KINDS = {"attack_move": 1, "attack_move_between": 2, "attack_group": 0, "attack_nearest": 0, "none": 0}


def list_maps() -> list[str]:
    """Sorted names of every map file in ``maps/``."""
    return sorted(p.stem for p in MAPS_DIR.glob("*.yaml"))


def load_map(name: str) -> MapSpec:
    """The validated :class:`MapSpec` of ``name`` (cached); unknown names list the known maps."""
    known = list_maps()
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown SMAC map {name!r}.{hint} Known maps: {', '.join(known)}")
    return _load_cached(name)


@functools.cache
def _load_cached(name: str) -> MapSpec:
    path = MAPS_DIR / f"{name}.yaml"
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: unreadable map file ({str(exc).splitlines()[0]})") from None
    spec = parse_map(raw, source=str(path))
    if spec.name != name:
        raise ValueError(f"{path}: name {spec.name!r} does not match the file name {name!r}")
    return spec


class _Checker:
    """Raises ``ValueError`` messages that start with the map file."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, msg: str) -> None:
        raise ValueError(f"{self.source}: {msg}")

    def keys(self, d: Any, where: str, allowed: set[str], required: set[str]) -> None:
        if not isinstance(d, dict):
            self.fail(f"{where} must be a mapping, got {type(d).__name__}")
        unknown = sorted(set(d) - allowed)
        if unknown:
            k = unknown[0]
            close = difflib.get_close_matches(str(k), sorted(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(f"unknown key {k!r} in {where}{hint}; allowed: {', '.join(sorted(allowed))}")
        missing = sorted(required - set(d))
        if missing:
            self.fail(f"missing key(s) {', '.join(missing)} in {where}")

    def numbers(self, v: Any, n: int, where: str, form: str) -> tuple[float, ...]:
        """``v`` as ``n`` finite numbers (not booleans), or a failure naming ``where`` and ``form``."""
        ok = isinstance(v, (list, tuple)) and len(v) == n
        ok = ok and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in v)
        if not ok or not all(math.isfinite(c) for c in v):
            self.fail(f"{where} must be {form} of finite numbers, got {v!r}")
        return tuple(float(c) for c in v)

    def point(self, v: Any, where: str) -> tuple[float, float]:
        x, y = self.numbers(v, 2, where, "a point [x, y]")
        return x, y

    def choice(self, v: Any, where: str, allowed: tuple[str, ...]) -> str:
        if v not in allowed:
            close = difflib.get_close_matches(str(v), list(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(f"{where} is {v!r}{hint}; allowed: {', '.join(allowed)}")
        return str(v)

    def int_(self, v: Any, where: str, lo: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            self.fail(f"{where} must be an int >= {lo}, got {v!r}")
        return int(v)


def _groups(chk: _Checker, raw: Any, where: str) -> tuple[UnitGroup, ...]:
    if not isinstance(raw, list) or not raw:
        chk.fail(f"{where} must be a non-empty list of unit groups")
    out = []
    for i, g in enumerate(raw):
        w = f"{where}[{i}]"
        chk.keys(g, w, {"unit", "count", "spawn"}, {"unit", "count", "spawn"})
        unit = chk.choice(g["unit"], f"{w}.unit", UNIT_NAMES)
        count = chk.int_(g["count"], f"{w}.count", 1)
        out.append(UnitGroup(unit, count, chk.point(g["spawn"], f"{w}.spawn")))
    return tuple(out)


def _extent(chk: _Checker, raw: Any, map_size: tuple[int, int]) -> tuple[float, float]:
    """The playable area's (width, height): the file's ``playable_extent`` or the SMAC maps' trim of
    ``map_size`` (types.default_extent); each in (0, map size]."""
    extent = default_extent(map_size) if raw is None else chk.point(raw, "playable_extent")
    for axis, (w, size) in enumerate(zip(extent, map_size, strict=True)):
        if not 0 < w <= size:
            given = f"playable_extent[{axis}] is {w:g}" if raw is not None else f"the default extent {extent}"
            chk.fail(f"{given}; it must be in (0, map_size[{axis}] = {size}] (set playable_extent: [w, h])")
    return extent


def _order(chk: _Checker, raw: Any) -> EnemyOrder:
    chk.keys(raw, "enemy_order", {"kind", "target", "target2"}, {"kind"})
    kind = chk.choice(raw["kind"], "enemy_order.kind", tuple(_ORDER_KINDS))
    n_points = _ORDER_KINDS[kind]
    given = [k for k in ("target", "target2") if k in raw]
    if len(given) != n_points:
        chk.fail(f"enemy_order kind {kind!r} takes {n_points} point(s) (target, target2), got {given}")
    pts = [chk.point(raw[k], f"enemy_order.{k}") for k in ("target", "target2")[:n_points]]
    return EnemyOrder(kind, *pts)


def _shape_mask(chk: _Checker, shape: Any, where: str, cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
    """Bool mask of cell centres (cx, cy) inside one ``{rect: ...}`` or ``{polygon: ...}`` shape."""
    if not (isinstance(shape, dict) and len(shape) == 1 and next(iter(shape)) in ("rect", "polygon")):
        chk.fail(f"{where} must be {{rect: [x0, y0, x1, y1]}} or {{polygon: [[x, y], ...]}}, got {shape!r}")
    kind, v = next(iter(shape.items()))
    if kind == "rect":
        x0, y0, x1, y1 = chk.numbers(v, 4, f"{where}.rect", "[x0, y0, x1, y1]")
        if x1 <= x0 or y1 <= y0:
            chk.fail(f"{where}.rect needs x0 < x1 and y0 < y1, got {v!r}")
        return (cx >= x0) & (cx <= x1) & (cy >= y0) & (cy <= y1)
    if not (isinstance(v, list) and len(v) >= 3):
        chk.fail(f"{where}.polygon needs at least 3 points, got {v!r}")
    pts = np.array([chk.point(p, f"{where}.polygon") for p in v])
    inside = np.zeros(cx.shape, dtype=bool)
    # Even-odd ray casting towards +x, vectorised over all cell centres.
    for (x0, y0), (x1, y1) in zip(pts, np.roll(pts, -1, axis=0), strict=True):
        crosses = (y0 > cy) != (y1 > cy)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_at = x0 + (cy - y0) * (x1 - x0) / (y1 - y0)
        inside ^= crosses & (cx < x_at)
    return inside


def rasterise_arena(chk: _Checker, arena: Any, map_size: tuple[int, int]) -> np.ndarray:
    """The (map_x, map_y) bool pathing grid of an ``arena`` mapping."""
    chk.keys(arena, "arena", {"walkable", "blocked"}, {"walkable"})
    ii, jj = np.meshgrid(np.arange(map_size[0]), np.arange(map_size[1]), indexing="ij")
    cx, cy = ii + 0.5, jj + 0.5
    grid = np.zeros(map_size, dtype=bool)
    for key, value in (("walkable", True), ("blocked", False)):
        shapes = arena.get(key, [])
        if not isinstance(shapes, list) or (key == "walkable" and not shapes):
            chk.fail(f"arena.{key} must be a {'non-empty ' if key == 'walkable' else ''}list of shapes")
        for i, shape in enumerate(shapes):
            grid[_shape_mask(chk, shape, f"arena.{key}[{i}]", cx, cy)] = value
    return grid


def playable_cells(map_size: tuple[int, int], extent: tuple[float, float]) -> np.ndarray:
    """(map_x, map_y) bool: the cells whose centre lies in the playable area (``extent`` centred on the
    map)."""
    out = np.ones(map_size, dtype=bool)
    for axis, (size, w) in enumerate(zip(map_size, extent, strict=True)):
        centre = np.arange(size) + 0.5
        inside = np.abs(centre - size / 2) < w / 2
        out &= inside[:, None] if axis == 0 else inside[None, :]
    return out


def parse_map(raw: Any, source: str = "<map>") -> MapSpec:
    """Validate a parsed map YAML mapping and build its :class:`MapSpec`."""
    chk = _Checker(source)
    chk.keys(raw, "the map", _TOP_KEYS, _REQUIRED)
    name = raw["name"]
    if not isinstance(name, str) or not name:
        chk.fail(f"name must be a non-empty string, got {name!r}")
    chk.keys(raw["races"], "races", {"ally", "enemy"}, {"ally", "enemy"})
    ally_race = chk.choice(raw["races"]["ally"], "races.ally", RACES)
    enemy_race = chk.choice(raw["races"]["enemy"], "races.enemy", RACES)
    limit = chk.int_(raw["episode_limit"], "episode_limit", 1)
    bits = chk.int_(raw["unit_type_bits"], "unit_type_bits", 0)
    map_type = chk.choice(raw["map_type"], "map_type", MAP_TYPES)
    allies = _groups(chk, raw["allies"], "allies")
    enemies = _groups(chk, raw["enemies"], "enemies")
    size_raw = raw.get("map_size", [32, 32])
    if not (isinstance(size_raw, list) and len(size_raw) == 2):
        chk.fail(f"map_size must be [map_x, map_y], got {size_raw!r}")
    map_size = (chk.int_(size_raw[0], "map_size[0]", 1), chk.int_(size_raw[1], "map_size[1]", 1))
    for side, groups in (("allies", allies), ("enemies", enemies)):
        n_types = len({g.unit for g in groups})
        if bits > 0 and n_types > bits:
            chk.fail(f"{side} have {n_types} unit types but unit_type_bits is {bits}")
    extent = _extent(chk, raw.get("playable_extent"), map_size)
    grid = rasterise_arena(chk, raw["arena"], map_size) & playable_cells(map_size, extent)
    order = _order(chk, raw["enemy_order"])
    points = [(f"allies spawn {g.unit}", g.spawn) for g in allies]
    points += [(f"enemies spawn {g.unit}", g.spawn) for g in enemies]
    targets = (("target", order.target), ("target2", order.target2))
    points += [(f"enemy_order.{k}", p) for k, p in targets if p]
    for what, (x, y) in points:
        i, j = int(x), int(y)
        if not (0 <= i < map_size[0] and 0 <= j < map_size[1]) or not grid[i, j]:
            chk.fail(f"{what} point ({x:g}, {y:g}) is not on a walkable cell of the arena")
    description = raw.get("description", "")
    if not isinstance(description, str):
        chk.fail("description must be a string")
    return MapSpec(
        name=name,
        ally_race=ally_race,
        enemy_race=enemy_race,
        episode_limit=limit,
        unit_type_bits=bits,
        map_type=map_type,
        allies=allies,
        enemies=enemies,
        enemy_order=order,
        pathing_grid=grid,
        map_size=map_size,
        description=description.strip(),
        playable_extent=extent,
    )
