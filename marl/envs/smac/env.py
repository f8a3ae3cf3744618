"""``StarCraft2Env``: SMAC's environment class over an engine that produces :class:`UnitTable` s.

The engine only simulates (``reset() -> UnitTable``, ``step(actions) -> UnitTable``, ``seed(s)``); every
SMAC rule — observations, state, available actions, reward, episode end, statistics — lives in
:mod:`marl.envs.smac.features` and here, so the embedded simulator and the real game share them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from marl.envs.base import MultiAgentEnv, check_agent_id
from marl.envs.smac.env_fused import FusedPath, FusedSingle, frame_table
from marl.envs.smac.features import N_ACTIONS_NO_ATTACK, RUNNING, SmacFeatures, SmacOptions, Units, max_reward
from marl.envs.smac.maps import load_map
from marl.envs.smac.options import LaunchOptions
from marl.envs.smac.render import episode_frames, outcome, render_frame, replay_format_error, save_frames
from marl.envs.smac.sc2 import EpisodeAborted, resolve_backend
from marl.envs.smac.types import MapSpec, UnitTable
from marl.envs.smac.version import ENGINE_VERSION, engine_record
from marl.untrusted import check_name, safe_name

BACKENDS = ("sim", "auto", "sc2")
_log = logging.getLogger("marl.envs.smac")
_ANNOUNCED: set[str] = set()  # backend choices and notes already printed in this process
_ACTION_NAMES = ("no-op", "stop", "move north", "move south", "move east", "move west")


def _announce(text: str) -> None:
    """Print ``text`` once per process, not once per env."""
    if text not in _ANNOUNCED:
        _ANNOUNCED.add(text)
        print(text, flush=True)


class Engine(Protocol):
    """What ``StarCraft2Env`` needs from an engine."""

    def reset(self) -> UnitTable: ...
    def step(self, actions_N: np.ndarray) -> UnitTable: ...
    def seed(self, seed: int) -> None: ...


def make_engine(
    spec: MapSpec,
    backend: str,
    seed: int | None,
    difficulty: str = "7",
    step_mul: int = 8,
    launch: LaunchOptions | None = None,
) -> Engine:
    """The engine for ``backend``: "sim" (embedded), "sc2" (the real game; an error saying how to install
    it when absent) or "auto" (the game when it and the map are found, else the embedded engine).
    ``launch``: the game's version and window size (the embedded engine has neither)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown SMAC backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    backend, _ = resolve_backend(backend, spec.name)
    if backend == "sc2":
        from marl.envs.smac.sc2.engine import Sc2Engine

        launch = LaunchOptions() if launch is None else launch
        return Sc2Engine(
            spec, seed=seed, difficulty=difficulty, step_mul=step_mul, game_version=launch.game_version,
            window_size=launch.window_size,
        )  # fmt: skip
    from marl.envs.smac.sim.engine import SimEngine

    return SimEngine(spec, seed=seed)


class StarCraft2Env(FusedPath, MultiAgentEnv):
    """SMAC's ``StarCraft2Env`` (oxwhirl/smac v1 interface; Samvelyan et al., 2019, arXiv:1902.04043).

    ``smac_flags`` are SMAC's options (see :class:`SmacOptions`). ``engine`` replaces the backend's
    engine with any object that has ``reset``/``step``/``seed`` (tests, custom simulators); ``spec`` replaces
    the map file (generated scenarios, :mod:`marl.envs.smac.smacv2`). On the embedded engine (no ``engine``,
    ``spec`` or ``heuristic_ai``) a step is one compiled call (``env_fused.py``); ``fused=False`` runs the
    table-by-table path that every engine shares, with the same results.
    """

    def __init__(
        self,
        map_name: str = "8m",
        backend: str = "auto",
        seed: int | None = None,
        replay_dir: str | None = None,
        replay_prefix: str | None = None,
        engine: Engine | None = None,
        difficulty: str = "7",
        step_mul: int = 8,
        spec: MapSpec | None = None,
        fused: bool = True,
        **smac_flags: Any,
    ) -> None:
        self.map_name = map_name
        self.spec = load_map(map_name) if spec is None else spec
        self.opts = SmacOptions.from_flags(**smac_flags)
        self.launch, _ = LaunchOptions.split(smac_flags)
        if backend not in BACKENDS:
            raise ValueError(f"unknown SMAC backend {backend!r}; allowed: {', '.join(BACKENDS)}")
        if engine is None:
            # "sc2" without the game raises the install instructions now, not at reset()
            resolved, why = resolve_backend(backend, map_name)
            if backend == "auto":
                _announce(why)
            backend = resolved
        elif backend == "auto":
            backend = "sim"
        self.backend = backend
        if backend == "sim" and self.launch.game_version is not None:
            _announce(
                f"game_version={self.launch.game_version} applies to the real game; the embedded engine plays"
                f" its own dynamics (engine {ENGINE_VERSION})"
            )
        self._fused_ok = bool(fused) and backend == "sim" and engine is None and spec is None
        self._fused_ok = self._fused_ok and not self.opts.heuristic_ai
        self._fused: FusedSingle | None = None
        self._smac_flags = dict(smac_flags)
        self.difficulty, self.step_mul = str(difficulty), step_mul
        self.features = SmacFeatures(self.spec, self.opts)
        self.n_agents, self.n_enemies = self.spec.n_agents, self.spec.n_enemies
        self.n_actions = self.features.n_actions
        self.episode_limit = self.spec.episode_limit
        self.replay_dir = Path(replay_dir) if replay_dir else Path("replays")
        # a replay's file name starts with it: one name, never a path (replay_dir says where)
        prefix = check_name(replay_prefix, "replay_prefix") if replay_prefix else safe_name(map_name)
        self.replay_prefix = prefix
        self._seed = seed
        self._engine = engine
        self.max_reward = max_reward(self.spec, self.opts)  # replaced by the engine's maxima at first reset
        self._max_reward_from_table = False
        self.battles_won = self.battles_game = self.timeouts = self.restarts = 0
        self._episode_count = 0
        self._table = None
        # (unit table, or on the fused path an engine snapshot: see frame_table; the actions that led there)
        self._frames: list[tuple[Any, np.ndarray | None]] = []
        self._last_frames: list[tuple[Any, np.ndarray | None]] = []

    # ------------------------------------------------------------------ episode control
    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Start an episode; returns (per-agent observations, state)."""
        if seed is not None:
            self.seed(seed)
        if self._fused_ok:
            return self._reset_fused()
        if self._engine is None:
            self._engine = make_engine(
                self.spec, self.backend, self._seed, self.difficulty, self.step_mul, self.launch
            )
        table = self._engine.reset()
        if hasattr(self._engine, "game_spec") and not self._max_reward_from_table:
            self._adopt_game_map(self._engine.game_spec())
        self._check_table(table)
        if not self._max_reward_from_table:  # SMAC adds the enemies' health+shield maxima on the first reset
            self.max_reward = max_reward(self.spec, self.opts, table.enemies)
            self._max_reward_from_table = True
        self._episode_steps = 0
        self._terminated = False
        self.last_action = np.zeros((self.n_agents, self.n_actions), dtype=np.float32)
        self._dead = np.zeros((1, self.n_agents + self.n_enemies), dtype=bool)  # SMAC's death trackers
        self._heuristic_targets: list[int | None] = [None] * self.n_agents
        if self._frames:
            self._last_frames = self._frames
        self._frames = [(table.copy(), None)]
        self._set_table(table)
        return self.get_obs(), self.get_state()

    def _engine_actions(self, acts: np.ndarray) -> np.ndarray:
        """What the engine runs for the agents' actions ``acts`` (SMAC: the actions themselves)."""
        return acts

    def _adopt_game_map(self, spec: MapSpec) -> None:
        """The real game: SMAC reads the pathing grid and heights from the game, not the map file."""
        self.spec = spec
        self.features = SmacFeatures(self.spec, self.opts)

    def step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        """Apply one joint action; returns (reward, terminated, info) with SMAC's info keys."""
        if not self._started():
            raise RuntimeError("call reset() before step()")
        if self._terminated:
            raise RuntimeError("the episode has ended; call reset() to start a new one")
        reward, terminated, info = (
            self._step_fused(actions) if self._fused is not None else self._step(actions)
        )
        if self.launch.debug:
            _log.debug(
                "%s step %d: actions %s, reward %.4f, terminated %s, %s", self.map_name, self._episode_steps,
                np.asarray(actions).reshape(-1).tolist(), reward, terminated, info,
            )  # fmt: skip
        return reward, terminated, info

    def _step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        """A step on the table-by-table path (every engine)."""
        acts = self._check_actions(actions)
        self.last_action = np.eye(self.n_actions, dtype=np.float32)[acts]
        if self.opts.heuristic_ai:
            acts = self.features.batch_heuristic(
                self._units,
                [self._heuristic_targets],
                self._avail[None],
                self.opts.heuristic_rest,
                self.features.batch_geometry(self._units),
            )[0]
        prev = self._units
        engine_acts = self._engine_actions(acts)
        try:
            table = self._engine.step(engine_acts.copy())
        except EpisodeAborted:  # the connection failed and SC2 was relaunched: SMAC returns (0, True, {})
            self._terminated = True
            self._episode_count += 1
            return 0.0, True, {}
        self._check_table(table)
        self._episode_steps += 1
        self._frames.append((table.copy(), engine_acts))
        self._set_table(table)

        reward_E, code_E, dead_a, dead_e = self.features.reward_and_end(prev, self._units, self._dead)
        reward, code = float(reward_E[0]), int(code_E[0])
        info: dict[str, Any] = {
            "battle_won": False,
            "dead_allies": int(dead_a[0]),
            "dead_enemies": int(dead_e[0]),
        }
        terminated = False
        if code != RUNNING:
            terminated = True
            self.battles_game += 1
            if code == 1:
                self.battles_won += 1
                info["battle_won"] = True
                reward = 1.0 if self.opts.reward_sparse else reward + self.opts.reward_win
            elif code == -1:
                reward = -1.0 if self.opts.reward_sparse else reward + self.opts.reward_defeat
        elif self._episode_steps >= self.episode_limit:
            terminated = True
            if self.opts.continuing_episode:
                info["episode_limit"] = True
            self.battles_game += 1
            self.timeouts += 1
        if terminated:
            self._episode_count += 1
            self._terminated = True
        if self.opts.reward_scale:
            reward /= self.max_reward / self.opts.reward_scale_rate
        return float(reward), terminated, info

    @property
    def death_tracker_ally(self) -> np.ndarray:
        """SMAC's per-agent "has died" flags (a view of the tracker)."""
        return self._dead[0, : self.n_agents]

    @property
    def death_tracker_enemy(self) -> np.ndarray:
        """SMAC's per-enemy "has died" flags (a view of the tracker)."""
        return self._dead[0, self.n_agents :]

    def _check_actions(self, actions: Any) -> np.ndarray:
        acts = np.asarray(actions).reshape(-1)
        if acts.shape[0] != self.n_agents:
            raise ValueError(
                f"expected {self.n_agents} actions (one per agent) on {self.map_name}, got {acts.shape[0]}"
            )
        if not np.issubdtype(acts.dtype, np.integer):
            if not np.all(np.equal(np.mod(acts, 1), 0)):
                raise ValueError(f"actions must be integers, got {actions!r}")
        acts = acts.astype(np.int64)
        for i, a in enumerate(acts):
            if not 0 <= a < self.n_actions:
                raise ValueError(f"agent {i}: action {a} is out of range 0..{self.n_actions - 1}")
            if not self.opts.heuristic_ai and not self._avail[i, a]:
                ok = np.flatnonzero(self._avail[i]).tolist()
                raise ValueError(
                    f"agent {i} cannot take action {a} ({self.action_name(i, int(a))}); "
                    f"available actions: {ok}"
                )
        return acts

    def action_name(self, agent_id: int, action: int) -> str:
        """Readable name of an action of one agent."""
        agent_id = check_agent_id(agent_id, self.n_agents)
        if action < N_ACTIONS_NO_ATTACK:
            return _ACTION_NAMES[action]
        if self.features.ally_medivac[agent_id]:
            return f"heal ally {action - N_ACTIONS_NO_ATTACK}"
        return f"attack enemy {action - N_ACTIONS_NO_ATTACK}"

    def _check_table(self, table: UnitTable) -> None:
        if len(table.allies.health) != self.n_agents or len(table.enemies.health) != self.n_enemies:
            raise RuntimeError(
                f"engine returned {len(table.allies.health)} allies and "
                f"{len(table.enemies.health)} enemies; {self.map_name} has "
                f"{self.n_agents} and {self.n_enemies}"
            )

    def _set_table(self, table: UnitTable) -> None:
        """Cache what every getter needs: availability, observations and state of ``table``."""
        self._table = table
        self._units = Units.from_table(table)
        avail, obs, state = self.features.observe(
            self._units, self.last_action[None], np.array([self._episode_steps])
        )
        self._avail, self._obs, self._state = avail[0], obs[0], state[0]

    def _require(self) -> UnitTable:
        self._require_view()
        return self._table

    # ------------------------------------------------------------------ SMAC getters
    def get_obs(self) -> list[np.ndarray]:
        self._require_view()
        return list(self._obs)

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        self._require_view()
        return self._obs[check_agent_id(agent_id, self.n_agents)]

    def get_obs_size(self) -> int:
        return self.features.obs_size

    def get_state(self) -> np.ndarray:
        self._require_view()
        return self._state.copy()

    def get_state_size(self) -> int:
        return self.features.state_size

    @property
    def unit_table(self) -> UnitTable:
        """The current table of units (both sides' positions, health, shields), whichever engine made it."""
        return self._require()

    def get_state_dict(self) -> dict[str, np.ndarray]:
        """State blocks as arrays: allies (n_agents, nf_al), enemies, last_action, timestep (when on)."""
        if self.opts.obs_instead_of_state:
            raise ValueError("get_state_dict is not defined with obs_instead_of_state=True")
        s = self.get_state()
        f = self.features
        na, ne = self.n_agents * f.ally_state_size, self.n_enemies * f.enemy_state_size
        out = {
            "allies": s[:na].reshape(self.n_agents, -1),
            "enemies": s[na : na + ne].reshape(self.n_enemies, -1),
        }
        if self.opts.state_last_action:
            out["last_action"] = self.last_action.copy()
        if self.opts.state_timestep_number:
            out["timestep"] = s[-1:]
        return out

    def get_avail_actions(self) -> list[list[int]]:
        self._require_view()
        return self._avail.tolist()

    def get_avail_agent_actions(self, agent_id: int) -> list[int]:
        self._require_view()
        return self._avail[check_agent_id(agent_id, self.n_agents)].tolist()

    def get_total_actions(self) -> int:
        return self.n_actions

    def get_obs_move_feats_size(self) -> int:
        return self.features.move_size

    def get_obs_enemy_feats_size(self) -> tuple[int, int]:
        return self.n_enemies, self.features.enemy_feat_size

    def get_obs_ally_feats_size(self) -> tuple[int, int]:
        return self.n_agents - 1, self.features.ally_feat_size

    def get_obs_own_feats_size(self) -> int:
        return self.features.own_size + int(self.opts.obs_timestep_number)

    def get_env_info(self) -> dict[str, Any]:
        return {
            "state_shape": self.get_state_size(),
            "obs_shape": self.get_obs_size(),
            "n_actions": self.n_actions,
            "n_agents": self.n_agents,
            "episode_limit": self.episode_limit,
            "agent_features": list(self.features.agent_features),
            "enemy_features": list(self.features.enemy_features),
            "engine_version": self.engine_version,  # extra keys: EnvInfo and SMAC's consumers ignore them
            "backend": self.backend,
        }

    @property
    def engine_version(self) -> str:
        """The version of the engine's dynamics and SMAC's layer over it (``marl.envs.smac.version``)."""
        return ENGINE_VERSION

    def engine_info(self) -> dict[str, Any]:
        """The engine record results carry: engine version and the resolved backend (``sim`` or ``sc2``
        with the game's version); see :func:`marl.envs.smac.version.engine_record`."""
        return engine_record(self.backend, self.map_name)

    def get_stats(self) -> dict[str, Any]:
        return {
            "battles_won": self.battles_won,
            "battles_game": self.battles_game,
            "battles_draw": self.timeouts,
            "win_rate": self.battles_won / self.battles_game if self.battles_game else 0.0,
            "timeouts": self.timeouts,
            "restarts": self.restarts + self._engine_restarts(),
        }

    def _engine_restarts(self) -> int:
        stats = self._engine.get_stats() if hasattr(self._engine, "get_stats") else {}
        return int(stats.get("restarts", 0))

    def get_visibility_matrix(self) -> np.ndarray:
        """(n_agents, n_agents + n_enemies) bool matrix of who each living agent sees."""
        self._require()
        return self.features.batch_visibility(self._units, self.features.batch_geometry(self._units))[0]

    def get_unit_types(self) -> list[str]:
        """Unit name of every agent, in agent-id order."""
        return list(self.spec.ally_types)

    # ------------------------------------------------------------------ misc
    def seed(self, seed: int | None = None) -> int | None:
        """Set the engine's random seed (used from the next reset)."""
        self._seed = seed
        if self._engine is not None and seed is not None:
            self._engine.seed(seed)
        if self._fused is not None and seed is not None:
            self._fused.seed(seed)
        return self._seed

    def feature_bounds(self) -> dict[str, tuple[float, float]]:
        """Observations lie in [-1, 1] (SMAC normalises every feature). So does the state, except an ally's
        weapon cooldown divided by SMAC's per-type normaliser (``options.MAX_COOLDOWN``), which the engine's
        cooldowns (``sim/units.py``, plus jitter) can exceed, e.g. 15/10 for a hydralisk; on the real game
        the cooldown's largest value is not known here, so the state is unbounded above."""
        if self.backend != "sim":
            return {"obs": (-1.0, 1.0), "state": (-1.0, np.inf)}
        from marl.envs.smac.options import DEFAULT_MAX_COOLDOWN, MAX_COOLDOWN
        from marl.envs.smac.sim.units import CD_JITTER_HI, COOLDOWN, PROPS, type_ids

        cd_max = PROPS[type_ids(self.spec.ally_types), COOLDOWN] + CD_JITTER_HI
        norm = [MAX_COOLDOWN.get(t, DEFAULT_MAX_COOLDOWN) for t in self.spec.ally_types]
        types = self.spec.ally_types
        ratios = [c / m for c, m, t in zip(cd_max, norm, types, strict=True) if t != "medivac"]
        ratio = max(ratios, default=1.0)
        return {"obs": (-1.0, 1.0), "state": (-1.0, max(1.0, float(ratio)))}

    def render(self, mode: str = "rgb_array") -> np.ndarray:
        """RGB uint8 top-down image of the current moment."""
        if mode != "rgb_array":
            raise ValueError(f"render mode {mode!r} is not supported; use 'rgb_array'")
        table = self._require()
        last = self._frames[-1][1] if self._frames else None
        result = outcome(table) if self._terminated else None
        step = max(0, len(self._frames) - 1)
        return render_frame(self.spec, table, last, medivac_heals=True, step=step, result=result)

    def save_replay(self, replay_format: str = "gif") -> str:
        """Save a replay and return its path: on the real game SC2's ``.SC2Replay`` of everything since
        launch; on the embedded engine the last finished episode (or the one running) as an animated GIF or,
        with ``replay_format="mp4"``, an MP4 video (``ValueError`` when imageio-ffmpeg is missing)."""
        if hasattr(self._engine, "save_replay"):
            return self._engine.save_replay(self.replay_dir, self.replay_prefix)
        if (reason := replay_format_error(replay_format)) is not None:
            raise ValueError(reason)
        ended = self._terminated or bool(self._last_frames)
        frames = self._frames if (self._terminated or not self._last_frames) else self._last_frames
        tables = [frame_table(t) for t, _ in frames]
        images = episode_frames(self.spec, tables, [a for _, a in frames], ended, self.episode_limit)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.replay_dir / f"{self.replay_prefix}_{stamp}_{self._episode_count}.{replay_format}"
        return str(save_frames(images, path))

    def close(self) -> None:
        """Release the engine (quitting the game on the real-game backend) and the stored frames."""
        if self._engine is not None and hasattr(self._engine, "close"):
            self._engine.close()
        self._engine = None
        self._fused = None
        self._table = None
        self._frames, self._last_frames = [], []
