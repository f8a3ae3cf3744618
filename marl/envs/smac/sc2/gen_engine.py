"""``Sc2GenEngine``: SMACv2's generated episodes on the real StarCraft II (through pysc2).

The facts it follows are SMACv2's (oxwhirl/smacv2 ``smacv2/env/starcraft2/starcraft2.py`` and
``maps/smac_maps.py``):

* the maps ``10gen_<race>`` all load the map file ``SMAC_Maps/32x32_flat.SC2Map``; the agent and the built-in
  bot play the scenario's race (``a_race`` = ``b_race``);
* the map spawns nobody: at every reset SMACv2 creates each unit with the debug interface
  (``DebugCreateUnit``: unit type, owner 1 for agents / 2 for enemies, the drawn start position, quantity 1),
  steps one game loop and observes until all units are there (``init_units``); agents are the owner-1 units
  sorted by (unit type, x, y);
* the agents are the map's 9 RL unit types, whose ids are the game's last 9 (``_init_ally_unit_types``:
  first id = number of unit types in the game data - 9, then alphabetical order); enemies are stock units;
* between episodes SMACv2 kills every unit and steps 2 loops at a time until none is left (``_restart``).

Where SMACv2 can wait forever or fail (its reset loops until the map is empty and raises after 1000 loops
without the units), this engine bounds every wait and relaunches the game (``max_relaunches`` times, then a
clear error). Enemies are placed in the slots of their types in the generated team (observation order kept
within a type) as ``UnitTracker`` does for SMAC maps; SMACv2 keeps the raw observation order.
"""

from __future__ import annotations

import logging
from typing import Any

from marl.envs.smac.sc2.engine import Launcher, Sc2Engine
from marl.envs.smac.sc2.install import GEN_MAP, SMAC_MAP_DIR
from marl.envs.smac.sc2.translate import STOCK_TYPE_IDS, UnitTracker
from marl.envs.smac.types import GEN_RL_UNIT_ORDER, MapSpec, UnitTable

log = logging.getLogger(__name__)

STOCK_IDS = {name: uid for uid, name in STOCK_TYPE_IDS.items()}
GEN_MAP_TYPES = ("protoss_gen", "terran_gen", "zerg_gen")


class Sc2SpawnTimeout(RuntimeError):
    """The map was not cleared, or the generated units did not all appear, within the allowed game loops."""


class Sc2GenEngine(Sc2Engine):
    """The real game for SMACv2 scenarios: one game (map 32x32_flat) whose units are created anew at every
    reset from the episode's map (:meth:`new_episode`: teams and start positions drawn by ``SMACv2Env``).

    ``spec`` is a first episode (it fixes the race and the counts); ``spawn_timeout_loops`` and
    ``clear_timeout_loops`` bound the waits of a reset. Other arguments as :class:`Sc2Engine`.
    """

    def __init__(
        self,
        spec: MapSpec,
        seed: int | None = None,
        difficulty: str = "7",
        step_mul: int = 8,
        game_version: str | None = None,
        launcher: Launcher | None = None,
        max_relaunches: int = 3,
        spawn_timeout_loops: int = 200,
        clear_timeout_loops: int = 400,
    ) -> None:
        if spec.map_type not in GEN_MAP_TYPES:
            raise ValueError(
                f"Sc2GenEngine plays SMACv2 episode maps ({GEN_MAP_TYPES}), got {spec.map_type!r}"
            )
        super().__init__(spec, seed, difficulty, step_mul, game_version, launcher, max_relaunches)
        self.map_path = f"{SMAC_MAP_DIR}/{GEN_MAP}.SC2Map"
        self.spawn_timeout_loops = int(spawn_timeout_loops)
        self.clear_timeout_loops = int(clear_timeout_loops)
        self.rl_base: int | None = None
        self._next = spec

    def new_episode(self, spec: MapSpec) -> None:
        """The map of the next episode (its units and start positions); same race and counts as the first."""
        first = self.spec
        if (spec.map_type, spec.n_agents, spec.n_enemies) != (
            first.map_type,
            first.n_agents,
            first.n_enemies,
        ):
            raise ValueError(
                f"an episode of {spec.map_type} {spec.n_agents} vs {spec.n_enemies} cannot follow "
                f"{first.map_type} {first.n_agents} vs {first.n_enemies} in one game"
            )
        self._next = spec

    # ------------------------------------------------------------------ engine interface
    def reset(self) -> UnitTable:
        """Launch (first use) or clear the map, create the episode's units, wait until all are there."""
        self.spec = self._next
        retry = (*self._pb.connection_errors, Sc2SpawnTimeout)
        for attempt in range(self.max_relaunches + 1):
            try:
                if self._controller is None:
                    self._launch()
                else:
                    self._clear_units()
                self._create_units()
                return self._wait_for_units()
            except retry as err:
                if attempt == self.max_relaunches:
                    raise Sc2SpawnTimeout(
                        f"SMACv2 reset failed after {self.max_relaunches} relaunches of the game: {err}"
                    ) from err
                log.warning("SMACv2 reset failed (%s); relaunching the game", err)
                self._relaunch()
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ internals
    def _launch(self) -> None:
        super()._launch()
        # smacv2 _init_ally_unit_types on 10gen maps: the first RL id = unit types in the game data - 9
        self.rl_base = len(self._controller.data().units) - len(GEN_RL_UNIT_ORDER)

    def _clear_units(self) -> None:
        """SMACv2's ``_restart``: kill every unit of both players, step 2 loops at a time until none is
        left."""
        pb = self._pb
        units = [u for u in self._controller.observe().observation.raw_data.units if u.owner in (1, 2)]
        self._stale_tags = {int(u.tag) for u in units}
        if units:
            kill = pb.debug_pb.DebugKillUnit(tag=[int(u.tag) for u in units])
            self._controller.debug([pb.debug_pb.DebugCommand(kill_unit=kill)])
        for _ in range(0, self.clear_timeout_loops, 2):
            raw = self._controller.observe().observation.raw_data.units
            if not any(u.owner in (1, 2) for u in raw):
                return
            self._controller.step(2)
        raise Sc2SpawnTimeout(f"the map still had units {self.clear_timeout_loops} game loops after the kill")

    def _create_units(self) -> None:
        """SMACv2's ``_create_new_team`` for both sides, then one game loop."""
        pb, spec = self._pb, self.spec
        assert self.rl_base is not None
        cmds = []
        for owner, groups in ((1, spec.allies), (2, spec.enemies)):
            for g in groups:
                uid = self.rl_base + GEN_RL_UNIT_ORDER.index(g.unit) if owner == 1 else STOCK_IDS[g.unit]
                create = pb.debug_pb.DebugCreateUnit(
                    unit_type=uid,
                    owner=owner,
                    pos=pb.common_pb.Point2D(x=float(g.spawn[0]), y=float(g.spawn[1])),
                    quantity=g.count,
                )
                cmds.append(pb.debug_pb.DebugCommand(create_unit=create))
        self._controller.debug(cmds)
        self._controller.step(1)
        self._tracker = UnitTracker(spec, rl_base=self.rl_base)

    def _wait_for_units(self) -> UnitTable:
        """Observe, one game loop at a time, until every created unit is there (bounded)."""
        for _ in range(self.spawn_timeout_loops):
            obs = self._controller.observe()
            units: list[Any] = [
                u for u in obs.observation.raw_data.units if int(u.tag) not in self._stale_tags
            ]
            table = self._tracker.start(units)
            if table is not None:
                return table
            self._controller.step(1)
        raise Sc2SpawnTimeout(
            f"{self.spec.name}: the {self.spec.n_agents} + {self.spec.n_enemies} created units did not all "
            f"appear within {self.spawn_timeout_loops} game loops"
        )
