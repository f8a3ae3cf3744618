"""Raw-interface translation: SC2 observations → :class:`UnitTable`, agent actions → raw unit commands.

Follows oxwhirl/smac v1 (docs/smac.md §1.2, §3.3, §4):

* agents are the player-1 units sorted by ``(unit_type, pos.x, pos.y)``; enemies are the player-2 units in
  raw-observation order. Units are tracked by tag; a tracked unit missing from an observation is dead.
* ally unit types are the maps' editor copies (``Marine_RL``, …) whose ids differ between game builds, so
  (as SMAC does) the smallest ally type id is the first type of the map type's order and the others follow
  (MMM: marauder, marine, medivac). Enemies are stock units with fixed ids.
* One deliberate refinement: enemies of *different* types are placed in the slots that the map file gives
  their type (observation order kept within a type), so the type one-hot that ``features.py`` derives from
  the map file always matches the unit in that slot. SMAC keeps the raw order, which for the shipped maps
  already groups enemies by type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl.envs.smac.types import GEN_RL_UNIT_ORDER, MapSpec, SideTable, UnitTable

ABILITY_STOP, ABILITY_MOVE, ABILITY_ATTACK, ABILITY_HEAL = 4, 16, 23, 386
MOVE_AMOUNT = 2.0
N_ACTIONS_NO_ATTACK = 6
# Stock unit type ids (pysc2 units.py) of every unit that appears as an enemy in a SMAC map.
STOCK_TYPE_IDS = {
    4: "colossus",
    9: "baneling",
    48: "marine",
    51: "marauder",
    54: "medivac",
    73: "zealot",
    74: "stalker",
    98: "spine_crawler",
    105: "zergling",
    107: "hydralisk",
}
# Order of the RL-unit ids per map type: ally name = order[unit_type - smallest ally unit_type] [S].
ALLY_RL_ORDER = {
    "marines": ("marine",),
    "MMM": ("marauder", "marine", "medivac"),
    "stalkers_and_zealots": ("stalker", "zealot"),
    "colossi_stalkers_zealots": ("colossus", "stalker", "zealot"),
    "stalkers": ("stalker",),
    "zealots": ("zealot",),
    "hydralisks": ("hydralisk",),
    "colossus": ("colossus",),
    "bane": ("baneling", "zergling"),
    # SMACv2's 10gen maps: ids counted from the first of the 9 RL types (``UnitTracker.rl_base``), not from
    # the smallest id present (a generated team may lack the first types)
    "protoss_gen": GEN_RL_UNIT_ORDER,
    "terran_gen": GEN_RL_UNIT_ORDER,
    "zerg_gen": GEN_RL_UNIT_ORDER,
}
_DIRS = ((0.0, MOVE_AMOUNT), (0.0, -MOVE_AMOUNT), (MOVE_AMOUNT, 0.0), (-MOVE_AMOUNT, 0.0))  # N, S, E, W


class Sc2MapMismatch(ValueError):
    """The units in the game do not match the map file (wrong map, or a map file that differs)."""


def _side(units: Sequence[Any], names: tuple[str, ...]) -> SideTable:
    def col(attr: str) -> np.ndarray:
        return np.array([float(getattr(u, attr)) for u in units], dtype=float)

    pos = np.array([(float(u.pos.x), float(u.pos.y)) for u in units], dtype=float).reshape(len(units), 2)
    return SideTable(
        names,
        pos,
        col("health"),
        col("health_max"),
        col("shield"),
        col("shield_max"),
        col("weapon_cooldown"),
        col("energy"),
    )


class UnitTracker:
    """Assigns agent/enemy ids once per episode and follows the units by tag afterwards.

    ``rl_base``: the id of the first RL type when the game says it (SMACv2's maps); else, as SMAC, the
    smallest ally id present is taken for the map type's first RL type.
    """

    def __init__(self, spec: MapSpec, rl_base: int | None = None) -> None:
        if spec.map_type not in ALLY_RL_ORDER:
            raise ValueError(
                f"map type {spec.map_type!r} has no RL-unit order; known: {sorted(ALLY_RL_ORDER)}"
            )
        self.spec = spec
        self.ally_tags = np.zeros(0, dtype=np.uint64)
        self.enemy_tags = np.zeros(0, dtype=np.uint64)
        self.table: UnitTable | None = None
        self.min_ally_type: int | None = None
        self.rl_base = rl_base

    def ally_name(self, unit_type: int, min_type: int) -> str:
        order = ALLY_RL_ORDER[self.spec.map_type]
        k = unit_type - min_type
        if not 0 <= k < len(order):
            raise Sc2MapMismatch(
                f"{self.spec.name}: ally unit type id {unit_type} is {k} above the "
                f"first RL id {min_type}; map type {self.spec.map_type} has "
                f"{len(order)} RL types {order}"
            )
        return order[k]

    def start(self, units: Sequence[Any]) -> UnitTable | None:
        """Start an episode from raw units (stale ones already removed); None while the counts are short."""
        spec = self.spec
        allies = [u for u in units if u.owner == 1]
        enemies = [u for u in units if u.owner == 2]
        if len(allies) != spec.n_agents or len(enemies) != spec.n_enemies:
            return None
        allies.sort(key=lambda u: (u.unit_type, u.pos.x, u.pos.y))
        min_type = self.rl_base if self.rl_base is not None else min(u.unit_type for u in allies)
        ally_names = tuple(self.ally_name(u.unit_type, min_type) for u in allies)
        if ally_names != spec.ally_types:
            raise Sc2MapMismatch(
                f"{spec.name}: the game's agents are {ally_names}, the map file says {spec.ally_types}"
            )
        slots: list[Any] = [None] * spec.n_enemies
        for u in enemies:
            name = STOCK_TYPE_IDS.get(u.unit_type)
            if name is None:
                raise Sc2MapMismatch(
                    f"{spec.name}: enemy unit type id {u.unit_type} is not a SMAC unit; "
                    f"known ids: {STOCK_TYPE_IDS}"
                )
            free = [j for j, t in enumerate(spec.enemy_types) if t == name and slots[j] is None]
            if not free:
                raise Sc2MapMismatch(
                    f"{spec.name}: the game has more enemy {name}s than the map file ({spec.enemy_types})"
                )
            slots[free[0]] = u
        self.min_ally_type = min_type
        self.ally_tags = np.array([u.tag for u in allies], dtype=np.uint64)
        self.enemy_tags = np.array([u.tag for u in slots], dtype=np.uint64)
        self.table = UnitTable(_side(allies, ally_names), _side(slots, spec.enemy_types))
        return self.table.copy()

    def update(self, units: Sequence[Any]) -> UnitTable:
        """The table after a step: tracked units are refreshed by tag; a missing one is dead (health 0)."""
        if self.table is None:
            raise RuntimeError("UnitTracker.update before start")
        by_tag = {int(u.tag): u for u in units}
        for tags, side in ((self.ally_tags, self.table.allies), (self.enemy_tags, self.table.enemies)):
            for i, tag in enumerate(tags.tolist()):
                u = by_tag.get(tag)
                if u is None:
                    side.health[i] = 0.0
                    side.shield[i] = 0.0
                    continue
                side.pos[i] = (u.pos.x, u.pos.y)
                side.health[i], side.health_max[i] = u.health, u.health_max
                side.shield[i], side.shield_max[i] = u.shield, u.shield_max
                side.cooldown[i], side.energy[i] = u.weapon_cooldown, u.energy
        return self.table.copy()

    def living_tags(self) -> list[int]:
        """Tags of the tracked units still alive (what a fast restart kills)."""
        if self.table is None:
            return []
        alive = np.concatenate([self.table.allies.alive, self.table.enemies.alive])
        return [int(t) for t in np.concatenate([self.ally_tags, self.enemy_tags])[alive]]


def raw_commands(pb: Any, actions_N: np.ndarray, tracker: UnitTracker) -> list[Any]:
    """One ``sc_pb.Action`` per acting agent (no-op sends nothing), all with ``queue_command=False``.

    1 stop (ability 4); 2–5 move north/south/east/west to pos ± 2 (ability 16); 6+j attack enemy j
    (ability 23), or for a Medivac heal agent j (ability 386).
    """
    table = tracker.table
    if table is None:
        raise RuntimeError("no episode is running; call reset() first")
    out = []
    for i, a in enumerate(np.asarray(actions_N).reshape(-1).tolist()):
        if a == 0:
            continue
        tag = int(tracker.ally_tags[i])
        if a == 1:
            cmd = pb.raw_pb.ActionRawUnitCommand(
                ability_id=ABILITY_STOP, unit_tags=[tag], queue_command=False
            )
        elif a < N_ACTIONS_NO_ATTACK:
            dx, dy = _DIRS[a - 2]
            x, y = table.allies.pos[i]
            cmd = pb.raw_pb.ActionRawUnitCommand(
                ability_id=ABILITY_MOVE,
                unit_tags=[tag],
                queue_command=False,
                target_world_space_pos=pb.common_pb.Point2D(x=x + dx, y=y + dy),
            )
        else:
            j = a - N_ACTIONS_NO_ATTACK
            if table.allies.unit_type[i] == "medivac":
                ability, target = ABILITY_HEAL, int(tracker.ally_tags[j])
            else:
                ability, target = ABILITY_ATTACK, int(tracker.enemy_tags[j])
            cmd = pb.raw_pb.ActionRawUnitCommand(
                ability_id=ability, unit_tags=[tag], queue_command=False, target_unit_tag=target
            )
        out.append(pb.sc_pb.Action(action_raw=pb.raw_pb.ActionRaw(unit_command=cmd)))
    return out


@dataclass(frozen=True)
class GameMap:
    """The map as the game reports it (``ResponseGameInfo.start_raw``); grids are indexed ``[x][y]``."""

    map_size: tuple[int, int]
    playable_min: tuple[float, float]
    playable_max: tuple[float, float]
    pathing_grid: np.ndarray
    terrain_height: np.ndarray | None

    @property
    def max_distance(self) -> tuple[float, float]:
        """Width and height of the playable area (SMAC's max_distance_x/y)."""
        return (self.playable_max[0] - self.playable_min[0], self.playable_max[1] - self.playable_min[1])


def decode_game_info(info: Any) -> GameMap:
    """Decode map size, playable area, pathing grid and terrain height as SMAC does.

    Pathing: 1 bit per cell, rows of y, most significant bit first, 1 = walkable; the legacy 8-bit format
    is inverted and flipped along y. Height: 8 bits, flipped along y, divided by 255.
    """
    raw = info.start_raw
    mx, my = int(raw.map_size.x), int(raw.map_size.y)
    pg = raw.pathing_grid
    data = np.frombuffer(pg.data, dtype=np.uint8)
    if pg.bits_per_pixel == 1:
        if data.size * 8 < mx * my:
            raise ValueError(
                f"pathing grid has {data.size} bytes; a {mx}x{my} 1-bit grid needs {mx * my // 8}"
            )
        grid = np.unpackbits(data)[: mx * my].reshape(my, mx).T.astype(bool)
    else:
        grid = ~np.flip(data[: mx * my].reshape(my, mx).T.astype(bool), axis=1)
    height = None
    th = raw.terrain_height
    if th.data:
        h = np.frombuffer(th.data, dtype=np.uint8)[: mx * my].reshape(my, mx).T
        height = np.flip(h, axis=1) / 255.0
    p0, p1 = raw.playable_area.p0, raw.playable_area.p1
    return GameMap((mx, my), (float(p0.x), float(p0.y)), (float(p1.x), float(p1.y)), grid, height)
