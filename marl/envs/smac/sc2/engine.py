"""``Sc2Engine``: the real StarCraft II game (through pysc2) as a SMAC engine producing :class:`UnitTable` s.

It only drives the game; every SMAC rule stays in ``features.py`` / ``env.py``, shared with the embedded
engine. Protocol follows oxwhirl/smac v1 (docs/smac.md §1.2): launch SC2 via pysc2's
run configs (``SC2PATH``), create ``SMAC_Maps/<map>.SC2Map`` against the built-in bot, join with the raw
interface; each step sends one ``RequestAction`` with a raw command per acting agent, then ``step(step_mul)``
and ``observe()``. Between episodes a fast restart kills the living units with the debug interface and
waits for the map's trigger to respawn both armies. A websocket/protocol failure relaunches the game and is
counted in ``get_stats()["restarts"]``; a failure inside ``step`` then raises :class:`EpisodeAborted`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from marl.envs.smac.sc2.install import SMAC_MAP_DIR
from marl.envs.smac.sc2.proto import load_pysc2
from marl.envs.smac.sc2.translate import GameMap, UnitTracker, decode_game_info, raw_commands
from marl.envs.smac.types import MapSpec, UnitTable

log = logging.getLogger(__name__)

# SMAC's difficulty codes → sc2api Difficulty names.
DIFFICULTIES = {
    "1": "VeryEasy",
    "2": "Easy",
    "3": "Medium",
    "4": "MediumHard",
    "5": "Hard",
    "6": "Harder",
    "7": "VeryHard",
    "8": "CheatVision",
    "9": "CheatMoney",
    "A": "CheatInsane",
}
RACES = {"T": "Terran", "Z": "Zerg", "P": "Protoss"}


class EpisodeAborted(RuntimeError):
    """The game connection failed during a step; the game was relaunched and the episode is over.

    SMAC answers such a step with ``(0, True, {})``; the next ``reset()`` starts a fresh episode.
    """


class Launcher(Protocol):
    """Starts the game process and hands out its controller (pysc2's ``RemoteController`` interface)."""

    def start(self) -> Any: ...
    def map_data(self, map_path: str) -> bytes: ...
    def close(self) -> None: ...


class Pysc2Launcher:
    """Launch the local StarCraft II through ``pysc2.run_configs`` (reads ``SC2PATH``)."""

    def __init__(self, game_version: str | None = None, window_size: tuple[int, int] = (1920, 1200)) -> None:
        self.game_version = game_version
        self.window_size = window_size
        self._run_config: Any = None
        self._proc: Any = None

    def start(self) -> Any:
        pb = load_pysc2()
        self._run_config = pb.run_configs.get(version=self.game_version)
        self._proc = self._run_config.start(window_size=self.window_size, want_rgb=False)
        return self._proc.controller

    def map_data(self, map_path: str) -> bytes:
        return self._run_config.map_data(map_path)

    def close(self) -> None:
        if self._proc is not None:
            self._proc.close()
            self._proc = None


class Sc2Engine:
    """The real game behind ``StarCraft2Env`` (``reset() -> UnitTable``, ``step(actions) -> UnitTable``).

    ``difficulty``: the built-in bot's level, SMAC codes "1".."9", "A" (default "7" = VeryHard).
    ``step_mul``: game loops per agent step (SMAC: 8). ``launcher`` replaces the pysc2 launcher (tests).
    ``seed`` is the game's random seed, applied when the game is (re)launched.
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
        respawn_timeout_loops: int = 2000,
        window_size: tuple[int, int] = (1920, 1200),
    ) -> None:
        difficulty = str(difficulty)
        if difficulty not in DIFFICULTIES:
            raise ValueError(
                f"unknown SC2 difficulty {difficulty!r}; allowed: {', '.join(DIFFICULTIES)} "
                f"({', '.join(f'{k}={v}' for k, v in DIFFICULTIES.items())})"
            )
        if isinstance(step_mul, bool) or not isinstance(step_mul, (int, np.integer)) or step_mul < 1:
            raise ValueError(f"step_mul must be a positive int (game loops per step), got {step_mul!r}")
        for side, race in (("ally", spec.ally_race), ("enemy", spec.enemy_race)):
            if race not in RACES:
                raise ValueError(f"{spec.name}: {side} race {race!r} is not one of {sorted(RACES)}")
        self.spec = spec
        self.difficulty = difficulty
        self.step_mul = int(step_mul)
        self.map_path = f"{SMAC_MAP_DIR}/{spec.name}.SC2Map"
        self.max_relaunches = max_relaunches
        self.respawn_timeout_loops = respawn_timeout_loops
        self._seed = seed
        self._launcher: Launcher = launcher or Pysc2Launcher(game_version, window_size)
        self._pb = load_pysc2()
        self._controller: Any = None
        self._tracker = UnitTracker(spec)
        self._stale_tags: set[int] = set()
        self._fresh = False  # the game was just (re)launched: its armies are already spawning
        self.game_map: GameMap | None = None
        self.restarts = 0
        self.launches = 0

    # ------------------------------------------------------------------ engine interface
    def seed(self, seed: int | None) -> None:
        """Game random seed for the next launch (SC2 fixes its randomness when the game is created)."""
        self._seed = seed

    def reset(self) -> UnitTable:
        """Start an episode: launch on first use, else fast-restart; returns the first table."""
        errors = self._pb.connection_errors
        for attempt in range(self.max_relaunches + 1):
            try:
                if self._controller is None:
                    self._launch()
                elif not self._fresh:
                    self._kill_all_units()
                table = self._wait_for_units()
                self._fresh = False
                return table
            except errors as err:
                if attempt == self.max_relaunches:
                    raise
                log.warning("SC2 connection failed during reset (%s); relaunching", err)
                self._relaunch()
        raise AssertionError("unreachable")

    def step(self, actions_N: np.ndarray) -> UnitTable:
        """Send the agents' raw commands, advance ``step_mul`` loops, observe; dead units get health 0."""
        if self._controller is None or self._tracker.table is None:
            raise RuntimeError("call reset() before step()")
        pb = self._pb
        request = pb.sc_pb.RequestAction(actions=raw_commands(pb, actions_N, self._tracker))
        try:
            self._controller.actions(request)
            self._controller.step(self.step_mul)
            obs = self._controller.observe()
        except pb.connection_errors as err:
            log.warning("SC2 connection failed during step (%s); relaunching", err)
            self._relaunch()
            raise EpisodeAborted(
                f"the StarCraft II connection failed ({err}); the game was relaunched "
                f"(restart {self.restarts}) and this episode ended"
            ) from err
        return self._tracker.update(obs.observation.raw_data.units)

    def get_stats(self) -> dict[str, int]:
        """``restarts``: forced relaunches after connection failures; ``launches``: games started."""
        return {"restarts": self.restarts, "launches": self.launches}

    def game_spec(self) -> MapSpec:
        """The map file's spec with the pathing grid, terrain height, size and playable area the game reported
        (after reset)."""
        if self.game_map is None:
            raise RuntimeError("the game has not been launched yet; call reset() first")
        g = self.game_map
        return dataclasses.replace(
            self.spec,
            pathing_grid=g.pathing_grid,
            terrain_height=g.terrain_height,
            map_size=g.map_size,
            playable_extent=g.max_distance,
        )

    def save_replay(self, replay_dir: str | Path = "replays", prefix: str | None = None) -> str:
        """Write the replay of everything since launch to ``<replay_dir>/<prefix>_<UTC time>.SC2Replay``."""
        if self._controller is None:
            raise RuntimeError("no game is running; call reset() before save_replay()")
        data = self._controller.save_replay()
        out_dir = Path(replay_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
        path = out_dir / f"{prefix or self.spec.name}_{stamp}.SC2Replay"
        n = 1
        while path.exists():
            n += 1
            path = out_dir / f"{prefix or self.spec.name}_{stamp}_{n}.SC2Replay"
        path.write_bytes(data)
        return str(path)

    def close(self) -> None:
        """Quit the game and stop its process."""
        if self._controller is not None:
            try:
                self._controller.quit()
            except self._pb.connection_errors:
                pass
            self._controller = None
        self._launcher.close()

    # ------------------------------------------------------------------ internals
    def _launch(self) -> None:
        pb = self._pb
        ctrl = self._launcher.start()
        self._controller = ctrl
        self.launches += 1
        local_map = pb.sc_pb.LocalMap(map_path=self.map_path, map_data=self._launcher.map_data(self.map_path))
        create = pb.sc_pb.RequestCreateGame(local_map=local_map, realtime=False)
        if self._seed is not None:
            create.random_seed = int(self._seed) % (1 << 32)
        create.player_setup.add(type=pb.sc_pb.Participant)
        create.player_setup.add(
            type=pb.sc_pb.Computer,
            race=getattr(pb.common_pb, RACES[self.spec.enemy_race]),
            difficulty=getattr(pb.sc_pb, DIFFICULTIES[self.difficulty]),
        )
        ctrl.create_game(create)
        join = pb.sc_pb.RequestJoinGame(
            race=getattr(pb.common_pb, RACES[self.spec.ally_race]),
            options=pb.sc_pb.InterfaceOptions(raw=True, score=False),
        )
        ctrl.join_game(join)
        self.game_map = decode_game_info(ctrl.game_info())
        self._check_map(self.game_map)
        self._stale_tags = set()
        self._fresh = True

    def _check_map(self, g: GameMap) -> None:
        if g.max_distance != tuple(self.spec.extent):
            log.warning(
                "%s: the game's playable area is %s, the map file's %s (the state divides positions by it)",
                self.spec.name,
                g.max_distance,
                self.spec.extent,
            )
        if g.map_size != tuple(self.spec.map_size):
            log.warning(
                "%s: the game's map is %s, the map file says %s",
                self.spec.name,
                g.map_size,
                self.spec.map_size,
            )
        elif g.pathing_grid.shape == self.spec.pathing_grid.shape:
            diff = int(np.sum(g.pathing_grid != self.spec.pathing_grid))
            if diff:
                log.info(
                    "%s: the game's pathing grid differs from the map file in %d cells", self.spec.name, diff
                )

    def _relaunch(self) -> None:
        """Full restart after a failure: drop the process, launch a new game, count it."""
        try:
            self._launcher.close()
        finally:
            self._controller = None
            self.restarts += 1
        self._launch()

    def _kill_all_units(self) -> None:
        """Fast restart: kill every tracked living unit and let the map trigger respawn both armies."""
        pb = self._pb
        tags = self._tracker.living_tags()
        tracked = np.concatenate([self._tracker.ally_tags, self._tracker.enemy_tags])
        self._stale_tags = {int(t) for t in tracked}
        if tags:
            self._controller.debug([pb.debug_pb.DebugCommand(kill_unit=pb.debug_pb.DebugKillUnit(tag=tags))])
        self._controller.step(2)

    def _wait_for_units(self) -> UnitTable:
        """Observe, stepping one loop at a time, until both armies (new tags) are complete."""
        for _ in range(self.respawn_timeout_loops):
            obs = self._controller.observe()
            units = [u for u in obs.observation.raw_data.units if int(u.tag) not in self._stale_tags]
            table = self._tracker.start(units)
            if table is not None:
                return table
            self._controller.step(1)
        raise RuntimeError(
            f"{self.spec.name}: the armies did not (re)spawn within "
            f"{self.respawn_timeout_loops} game loops; is {self.map_path} a SMAC map?"
        )
