"""A protocol-level stand-in for StarCraft II: a fake pysc2 controller answering with real s2clientprotocol
messages (``ResponseObservation`` with raw units, ``ResponseGameInfo`` with ``start_raw``).

The fake game keeps a list of units, advances a game loop, applies debug ``kill_unit`` commands, respawns
both armies (with new tags) a few loops after every unit is gone — like the SMAC maps' trigger — and lets a
test script what happens on each ``step`` (``on_step``) or make a call fail like a dropped websocket.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from marl.envs.smac.options import UNIT_MAX_HEALTH_SHIELD
from marl.envs.smac.sc2.proto import load_pysc2
from marl.envs.smac.types import GEN_RL_UNIT_ORDER, MapSpec, UnitTable

PB = load_pysc2()
RL_BASE_ID = 1970  # a made-up id for the first RL unit type; real ids depend on the game build
STOCK_IDS = {
    "colossus": 4,
    "baneling": 9,
    "marine": 48,
    "marauder": 51,
    "medivac": 54,
    "zealot": 73,
    "stalker": 74,
    "spine_crawler": 98,
    "zergling": 105,
    "hydralisk": 107,
}
RL_ORDER = {
    "MMM": ("marauder", "marine", "medivac"),
    "stalkers_and_zealots": ("stalker", "zealot"),
    "colossi_stalkers_zealots": ("colossus", "stalker", "zealot"),
    "bane": ("baneling", "zergling"),
}


@dataclass
class FakeUnit:
    tag: int
    unit_type: int
    owner: int
    x: float
    y: float
    health: float
    health_max: float
    shield: float = 0.0
    shield_max: float = 0.0
    energy: float = 0.0
    cooldown: float = 0.0

    def proto(self):
        alliance = {1: PB.raw_pb.Self, 2: PB.raw_pb.Enemy}.get(self.owner, PB.raw_pb.Neutral)
        return PB.raw_pb.Unit(
            display_type=PB.raw_pb.Visible,
            alliance=alliance,
            tag=self.tag,
            unit_type=self.unit_type,
            owner=self.owner,
            pos=PB.common_pb.Point(x=self.x, y=self.y, z=8.0),
            facing=0.0,
            radius=0.5,
            build_progress=1.0,
            health=self.health,
            health_max=self.health_max,
            shield=self.shield,
            shield_max=self.shield_max,
            energy=self.energy,
            weapon_cooldown=self.cooldown,
        )


def ally_type_id(spec: MapSpec, name: str) -> int:
    """The RL-unit id the fake game uses for an ally (RL_BASE_ID + index in the map type's order)."""
    return RL_BASE_ID + RL_ORDER.get(spec.map_type, (name,)).index(name)


def units_from_table(spec: MapSpec, table: UnitTable, tag_of: Callable[[int, int], int]) -> list[FakeUnit]:
    """Fake units for the living rows of ``table`` (allies owner 1 with RL ids, enemies owner 2 stock ids);
    ``tag_of(owner, row)`` gives each unit's tag."""
    out = []
    for owner, side in ((1, table.allies), (2, table.enemies)):
        for i, name in enumerate(side.unit_type):
            if side.health[i] <= 0:
                continue
            uid = ally_type_id(spec, name) if owner == 1 else STOCK_IDS[name]
            out.append(
                FakeUnit(
                    tag_of(owner, i),
                    uid,
                    owner,
                    float(side.pos[i, 0]),
                    float(side.pos[i, 1]),
                    float(side.health[i]),
                    float(side.health_max[i]),
                    float(side.shield[i]),
                    float(side.shield_max[i]),
                    float(side.energy[i]),
                    float(side.cooldown[i]),
                )
            )
    return out


def encode_grid_1bit(grid_xy: np.ndarray) -> bytes:
    """Pack a [x][y] bool grid the way SC2 sends it: rows of y, most significant bit first."""
    return np.packbits(np.asarray(grid_xy, dtype=bool).T.reshape(-1)).tobytes()


def game_info(map_size=(32, 32), grid_xy=None, height_xy=None, playable=((2, 2), (30, 30))):
    """A real ``ResponseGameInfo`` with ``start_raw`` map size, playable area, pathing grid and heights."""
    mx, my = map_size
    grid_xy = np.ones((mx, my), dtype=bool) if grid_xy is None else grid_xy
    height_xy = np.full((mx, my), 128, dtype=np.uint8) if height_xy is None else height_xy
    size = PB.common_pb.Size2DI(x=mx, y=my)
    start_raw = PB.raw_pb.StartRaw(
        map_size=size,
        pathing_grid=PB.common_pb.ImageData(bits_per_pixel=1, size=size, data=encode_grid_1bit(grid_xy)),
        terrain_height=PB.common_pb.ImageData(
            bits_per_pixel=8, size=size, data=np.flip(np.asarray(height_xy, np.uint8), 1).T.tobytes()
        ),
        playable_area=PB.common_pb.RectangleI(
            p0=PB.common_pb.PointI(x=playable[0][0], y=playable[0][1]),
            p1=PB.common_pb.PointI(x=playable[1][0], y=playable[1][1]),
        ),
    )
    return PB.sc_pb.ResponseGameInfo(map_name="fake", start_raw=start_raw)


class FakeController:
    """Implements the pysc2 ``RemoteController`` calls that ``Sc2Engine`` makes."""

    def __init__(
        self,
        spawn: Callable[[], list[FakeUnit]],
        info=None,
        spawn_delay: int = 1,
        respawn_delay: int = 3,
        extra_units: list[FakeUnit] | None = None,
    ) -> None:
        self.spawn, self.info = spawn, info if info is not None else game_info()
        self.spawn_delay, self.respawn_delay = spawn_delay, respawn_delay
        self.extra_units = list(extra_units or [])
        self.units: list[FakeUnit] = []
        self.loop = 0
        self.respawn_at: int | None = None
        self.calls: list[tuple[str, object]] = []
        self.on_step: Callable[[FakeController, int], None] | None = None
        self.fail: dict[str, int] = {}  # method name -> raise ConnectionError on that call number (1-based)
        self._count: dict[str, int] = {}
        self.closed = False

    def _call(self, name: str, arg: object = None) -> None:
        self._count[name] = self._count.get(name, 0) + 1
        self.calls.append((name, arg))
        if self.fail.get(name) == self._count[name]:
            raise PB.protocol.ConnectionError(f"fake websocket closed during {name}")

    def requests(self, name: str) -> list:
        return [arg for n, arg in self.calls if n == name]

    def create_game(self, req):
        self._call("create_game", req)
        return PB.sc_pb.ResponseCreateGame()

    def join_game(self, req):
        self._call("join_game", req)
        self.respawn_at = self.loop + self.spawn_delay
        return PB.sc_pb.ResponseJoinGame(player_id=1)

    def game_info(self):
        self._call("game_info")
        return self.info

    def observe(self):
        self._call("observe")
        units = [u.proto() for u in self.units + self.extra_units]
        raw = PB.raw_pb.ObservationRaw(units=units)
        obs = PB.sc_pb.Observation(game_loop=self.loop, raw_data=raw)
        return PB.sc_pb.ResponseObservation(observation=obs)

    def actions(self, req):
        self._call("actions", req)
        return PB.sc_pb.ResponseAction()

    def step(self, count: int = 1):
        self._call("step", count)
        for _ in range(count):
            self.loop += 1
            if self.respawn_at is not None and self.loop >= self.respawn_at:
                self.units, self.respawn_at = self.spawn(), None
        if self.on_step is not None:
            self.on_step(self, count)
        if not any(u.owner in (1, 2) for u in self.units) and self.respawn_at is None:
            self.respawn_at = self.loop + self.respawn_delay  # the map trigger: everyone died
        return PB.sc_pb.ResponseStep(simulation_loop=self.loop)

    def debug(self, commands):
        self._call("debug", commands)
        for cmd in commands:
            dead = set(cmd.kill_unit.tag)
            self.units = [u for u in self.units if u.tag not in dead]

    def save_replay(self) -> bytes:
        self._call("save_replay")
        return b"SC2Replay-fake-" + str(self.loop).encode()

    def quit(self):
        self._call("quit")
        self.closed = True


class FakeLauncher:
    """Stands in for ``Pysc2Launcher``: every ``start()`` is a new game (a new ``FakeController``)."""

    def __init__(self, make_controller: Callable[[], FakeController]) -> None:
        self.make_controller = make_controller
        self.controllers: list[FakeController] = []
        self.closes = 0
        self.map_paths: list[str] = []

    def start(self) -> FakeController:
        ctrl = self.make_controller()
        self.controllers.append(ctrl)
        return ctrl

    def map_data(self, map_path: str) -> bytes:
        self.map_paths.append(map_path)
        return b"SC2Map:" + map_path.encode()

    def close(self) -> None:
        self.closes += 1

    @property
    def current(self) -> FakeController:
        return self.controllers[-1]


def tag_source(start: int = 0x100000001) -> Callable[[], int]:
    """Fresh unit tags (64-bit style, like the game's)."""
    counter = itertools.count(start, 7)
    return lambda: next(counter)


def spawner(spec: MapSpec, table: UnitTable, tags: Callable[[], int], shuffle_allies: int | None = None):
    """A spawn function producing the units of ``table`` with fresh tags each time (a new army); the allies
    are listed in a shuffled order when ``shuffle_allies`` is a seed, the enemies always in table order."""

    def spawn() -> list[FakeUnit]:
        memo: dict[tuple[int, int], int] = {}
        units = units_from_table(spec, table, lambda o, i: memo.setdefault((o, i), tags()))
        if shuffle_allies is not None:
            allies = [u for u in units if u.owner == 1]
            order = np.random.default_rng(shuffle_allies).permutation(len(allies))
            units = [allies[k] for k in order] + [u for u in units if u.owner != 1]
        return units

    return spawn


class FakeGenController(FakeController):
    """SMACv2's map 32x32_flat: nothing spawns by itself; debug ``create_unit`` commands create units (with
    fresh tags, full health) ``create_delay`` loops later, the k-th unit created on an occupied point moved
    ``spread * k`` along x (as the game places units that would overlap); ``data()`` answers a real
    ``ResponseData`` of ``n_types`` unit types (through pysc2's ``StaticData``), the last 9 the RL types."""

    def __init__(self, n_types: int = 1970, create_delay: int = 1, spread: float = 0.75, info=None) -> None:
        super().__init__(lambda: [], info=info)
        self.n_types, self.create_delay, self.spread = n_types, create_delay, spread
        self.pending: list[tuple[int, FakeUnit]] = []
        self.created: list[tuple[FakeUnit, tuple[float, float]]] = []  # this episode's units, their points
        self.new_tag = tag_source()
        self.ignore_creates = self.ignore_kills = False  # a game that drops those debug commands

    def unit_name(self, unit_type: int) -> str:
        rl = unit_type - (self.n_types - len(GEN_RL_UNIT_ORDER))
        if 0 <= rl < len(GEN_RL_UNIT_ORDER):
            return GEN_RL_UNIT_ORDER[rl]
        return {v: k for k, v in STOCK_IDS.items()}[unit_type]

    def join_game(self, req):
        self._call("join_game", req)
        return PB.sc_pb.ResponseJoinGame(player_id=1)

    def data(self):
        from pysc2.lib import static_data
        from s2clientprotocol import data_pb2

        self._call("data")
        units = [data_pb2.UnitTypeData(unit_id=i, name=f"Unit{i}") for i in range(self.n_types)]
        return static_data.StaticData(PB.sc_pb.ResponseData(units=units))

    def debug(self, commands):
        self._call("debug", commands)
        for cmd in commands:
            if cmd.HasField("kill_unit") and not self.ignore_kills:
                dead = set(cmd.kill_unit.tag)
                self.units = [u for u in self.units if u.tag not in dead]
                self.created = [(u, p) for u, p in self.created if u.tag not in dead]
            if cmd.HasField("create_unit") and not self.ignore_creates:
                c = cmd.create_unit
                hp, sh = UNIT_MAX_HEALTH_SHIELD[self.unit_name(c.unit_type)]
                point = (c.pos.x, c.pos.y)
                for _ in range(c.quantity):
                    taken = sum(1 for _, p in self.created if p == point)
                    x = c.pos.x + self.spread * taken
                    u = FakeUnit(self.new_tag(), c.unit_type, c.owner, x, c.pos.y, hp, hp, sh, sh)
                    self.created.append((u, point))
                    self.pending.append((self.loop + self.create_delay, u))

    def step(self, count: int = 1):
        self._call("step", count)
        for _ in range(count):
            self.loop += 1
            self.units += [u for t, u in self.pending if t <= self.loop]
            self.pending = [(t, u) for t, u in self.pending if t > self.loop]
        if self.on_step is not None:
            self.on_step(self, count)
        return PB.sc_pb.ResponseStep(simulation_loop=self.loop)


def moved(u: FakeUnit, **changes) -> FakeUnit:
    return replace(u, **changes)
