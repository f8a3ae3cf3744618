"""Engine-neutral SMAC data: the map description and the unit table.

Both engines (the embedded simulator in ``sim/`` and the real game in ``sc2/``) produce a
:class:`UnitTable` after every step; ``features.py`` turns a table into SMAC's observations, state,
available actions and reward without knowing which engine made it. A :class:`MapSpec` is one
``maps/<name>.yaml`` file, loaded and validated by ``maps.py``.

Coordinates are SC2 world units on the map (x to the east, y to the north); the pathing grid is
indexed ``[x][y]`` by integer cell, ``True`` = walkable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Canonical unit names shared by both engines and the map files.
UNIT_NAMES = (
    "marine",
    "marauder",
    "medivac",
    "stalker",
    "zealot",
    "colossus",
    "hydralisk",
    "zergling",
    "baneling",
    "spine_crawler",
)

# The game reports every SMAC map's playable area (``playable_area`` in ``ResponseGameInfo.start_raw``) as
# its stored size less 2 cells on each side: 28 x 28 on 3m (measured from recorded games, docs/fidelity.md
# source D), and every SMAC map file and SMACv2's 32x32_flat stores the same size and bounds (32 x 32,
# (0, 0)-(32, 32)); that the same trim holds on maps of another size is our extrapolation.
PLAYABLE_TRIM = 4


def default_extent(map_size: tuple[int, int]) -> tuple[float, float]:
    """The playable area's (width, height) of a map of ``map_size`` whose file does not give one."""
    return (float(map_size[0] - PLAYABLE_TRIM), float(map_size[1] - PLAYABLE_TRIM))


RACES = ("T", "P", "Z")
MAP_TYPES = (
    "marines",
    "MMM",
    "stalkers_and_zealots",
    "stalkers",
    "colossi_stalkers_zealots",
    "zealots",
    "hydralisks",
    "bane",
    "colossus",
    # SMACv2's generated-team maps 10gen_<race> (oxwhirl/smacv2 smac_maps.py; docs/smacv2.md)
    "protoss_gen",
    "terran_gen",
    "zerg_gen",
)
# SMACv2's 10gen maps (map file 32x32_flat) define one RL copy of each of these units; their unit-type ids are
# the game's last 9, in this (alphabetical) order (smacv2 starcraft2.py ``_init_ally_unit_types``), and agents
# are sorted by (unit id, x, y) (``init_units``).
GEN_RL_UNIT_ORDER = (
    "baneling",
    "colossus",
    "hydralisk",
    "marauder",
    "marine",
    "medivac",
    "stalker",
    "zealot",
    "zergling",
)
# Map types whose Medivacs heal (action 6 + j targets ally j) and whose end rule ignores a lone Medivac
# (oxwhirl/smac ``only_medivac_left``; SMACv2 applies the same to terran_gen).
MEDIVAC_MAP_TYPES = ("MMM", "terran_gen")


@dataclass(frozen=True)
class UnitGroup:
    """``count`` units of one type created around ``spawn`` (x, y)."""

    unit: str
    count: int
    spawn: tuple[float, float]


@dataclass(frozen=True)
class EnemyOrder:
    """The order enemies get at every (re)spawn.

    kind: ``attack_move`` (to ``target``), ``attack_move_between`` (to a uniformly random point on the
    segment ``target``–``target2``), ``attack_group`` (attack-move to the allies' centroid),
    ``attack_nearest`` (SMACv2's map trigger: each idle enemy attacks the closest living ally) or ``none``.
    """

    kind: str
    target: tuple[float, float] | None = None
    target2: tuple[float, float] | None = None


@dataclass(frozen=True)
class MapSpec:
    """One SMAC scenario (docs/smac.md §2).

    ``allies`` are listed in agent-id order (SMAC sorts agents by unit type); ``enemies`` in enemy-id
    order. ``pathing_grid`` is a (map_x, map_y) bool array, ``True`` where a ground unit may walk.
    ``playable_extent`` is the playable area's (width, height), SMAC's ``max_distance_x``/``_y``: the
    global state divides positions by it (None: :func:`default_extent` of ``map_size``).
    """

    name: str
    ally_race: str
    enemy_race: str
    episode_limit: int
    unit_type_bits: int
    map_type: str
    allies: tuple[UnitGroup, ...]
    enemies: tuple[UnitGroup, ...]
    enemy_order: EnemyOrder
    pathing_grid: np.ndarray = field(repr=False, compare=False)
    map_size: tuple[int, int] = (32, 32)
    terrain_height: np.ndarray | None = field(default=None, repr=False, compare=False)
    description: str = ""
    playable_extent: tuple[float, float] | None = None

    @property
    def extent(self) -> tuple[float, float]:
        """The playable area's (width, height): the divisor of the state's positions (SMAC's get_state)."""
        return self.playable_extent if self.playable_extent is not None else default_extent(self.map_size)

    @property
    def n_agents(self) -> int:
        return sum(g.count for g in self.allies)

    @property
    def n_enemies(self) -> int:
        return sum(g.count for g in self.enemies)

    @property
    def ally_types(self) -> tuple[str, ...]:
        """Unit name of every agent, in agent-id order."""
        return tuple(g.unit for g in self.allies for _ in range(g.count))

    @property
    def enemy_types(self) -> tuple[str, ...]:
        """Unit name of every enemy, in enemy-id order."""
        return tuple(g.unit for g in self.enemies for _ in range(g.count))


@dataclass
class SideTable:
    """The units of one side, one row per unit, in id order.

    health/shield are current values (health 0 = dead); ``cooldown`` is the weapon cooldown left in
    game loops; ``energy`` is Medivac energy (0 for other units).
    """

    unit_type: tuple[str, ...]
    pos: np.ndarray  # (n, 2) float
    health: np.ndarray  # (n,)
    health_max: np.ndarray  # (n,)
    shield: np.ndarray  # (n,)
    shield_max: np.ndarray  # (n,)
    cooldown: np.ndarray  # (n,) game loops
    energy: np.ndarray  # (n,)

    @property
    def alive(self) -> np.ndarray:
        return self.health > 0

    def copy(self) -> SideTable:
        return SideTable(
            self.unit_type,
            self.pos.copy(),
            self.health.copy(),
            self.health_max.copy(),
            self.shield.copy(),
            self.shield_max.copy(),
            self.cooldown.copy(),
            self.energy.copy(),
        )


@dataclass
class UnitTable:
    """Both sides at one moment: what every engine hands to ``features.py``."""

    allies: SideTable
    enemies: SideTable

    def copy(self) -> UnitTable:
        return UnitTable(self.allies.copy(), self.enemies.copy())
