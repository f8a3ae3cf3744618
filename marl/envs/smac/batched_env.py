"""``BatchedStarCraft2Env``: E copies of one SMAC map on the embedded engine, stepped by one call.

The engine is :class:`BatchedSimEngine` (Numba) and every SMAC rule is :class:`SmacFeatures`' ``batch_*``
code: the very code ``StarCraft2Env`` runs with E = 1. Env ``e`` of ``BatchedStarCraft2Env(map, E, seed=s)``
therefore behaves exactly as ``StarCraft2Env(map, backend="sim", seed=s + e)`` under the same actions and
resets: same observations, state, available actions, reward, end of episode and counters.
:class:`~marl.envs.smac.batched_vector.BatchedSmacVectorEnv` puts it behind the runner's vector-env interface
(``marl/envs/vector.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl.envs.base import check_agent_id
from marl.envs.smac.features import N_ACTIONS_NO_ATTACK, RUNNING, SmacFeatures, SmacOptions, max_reward
from marl.envs.smac.fused import FusedPlan, fused_plan, fused_reset, fused_step
from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.engine import BatchedSimEngine
from marl.envs.smac.sim.variants import parse_rules
from marl.envs.smac.version import ENGINE_VERSION, engine_record

_ACTION_NAMES = ("no-op", "stop", "move north", "move south", "move east", "move west")


class BatchedStarCraft2Env:
    """``n_envs`` SMAC envs of one map (Samvelyan et al., 2019, arXiv:1902.04043) on the embedded engine.

    Arrays have a leading env axis E. ``smac_flags`` are SMAC's options (:class:`SmacOptions`). Arrays
    returned by the getters belong to the env: a later masked step may overwrite their stepped rows.
    ``threads`` spreads the envs over that many cores (0 = all; ``marl/envs/smac/threads.py``); results do
    not depend on it. ``fused`` (default) steps in one compiled call (``marl/envs/smac/fused.py``);
    ``fused=False`` runs the readable reference, stage by stage, with the same results bit for bit.
    Candidate rules of the built-in AI for research (not the engine's) come through
    :func:`marl.envs.smac.research.variant_env`, never through this signature.
    """

    fused = False  # subclasses that do not call this __init__ (SMACv2) step stage by stage
    _units_value: Any = None
    _units_stale = False  # the engine moved on since _units_value was taken (a fused step)
    _plan_value: FusedPlan | None = None  # the fused calls' unchanging arguments, built when first needed
    _episode_limit: int = 0
    _max_reward: Any = 0.0
    _candidate_rules = ""  # research only: set by marl.envs.smac.research.variant_env's subclass

    def __init__(
        self,
        map_name: str = "8m",
        n_envs: int = 1,
        seed: int | None = None,
        threads: int = 1,
        fused: bool = True,
        **smac_flags: Any,
    ) -> None:
        if int(n_envs) < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        rules = parse_rules(self._candidate_rules)
        self.map_name = map_name
        self.fused = bool(fused) and not rules.any()  # the fused step runs the engine's own rules only
        self.spec = load_map(map_name)
        self.opts = SmacOptions.from_flags(**smac_flags)
        self.features = f = SmacFeatures(self.spec, self.opts, threads=threads)
        self.episode_limit = self.spec.episode_limit
        self.engine = BatchedSimEngine(self.spec, int(n_envs), seed, threads, rules=rules)
        self._hmax = self.engine.health_max.reshape(1, -1).astype(np.float64)  # the fused step's (1, U)
        self.max_reward = max_reward(self.spec, self.opts)  # replaced by the engine's maxima at first reset
        self._max_reward_from_table = False
        n, m = self.spec.n_agents, self.spec.n_enemies
        self._init_buffers(int(n_envs), n, m, f.n_actions, f.obs_size, f.state_size)

    def _init_buffers(self, E: int, n: int, m: int, A: int, obs_size: int, state_size: int) -> None:
        """Sizes, counters and per-env episode bookkeeping (shared with ``BatchedSMACv2Env``)."""
        self.n_envs, self.n_agents, self.n_enemies, self.n_actions = E, n, m, A
        self.battles_won = np.zeros(E, dtype=np.int64)
        self.battles_game = np.zeros(E, dtype=np.int64)
        self.timeouts = np.zeros(E, dtype=np.int64)
        self._eye = np.eye(A, dtype=np.float32)
        o = self.opts
        win, loss = (1.0, -1.0) if o.reward_sparse else (o.reward_win, o.reward_defeat)
        self._end_reward = np.array([0.0, win, 0.0, loss])
        self._flat_base = np.arange(E * n, dtype=np.int64).reshape(E, n) * A  # flat (env, agent) offsets
        self._all_envs = np.ones(E, dtype=bool)
        self._steps = np.zeros(E, dtype=np.int64)
        self._running = np.zeros(E, dtype=bool)  # reset and not yet ended
        self._last_action = np.zeros((E, n, A), dtype=np.float32)
        self._dead = np.zeros((E, n + m), dtype=bool)  # SMAC's death trackers, allies then enemies
        self._targets: list[list[int | None]] = [[None] * n for _ in range(E)]  # heuristic_ai targets
        self._units = None
        self._avail = np.zeros((E, n, A), dtype=np.int64)
        self._obs = np.zeros((E, n, obs_size), dtype=np.float32)
        self._state = np.zeros((E, state_size), dtype=np.float32)

    @property
    def episode_limit(self) -> int:
        """Steps after which an episode ends in a timeout (a caller may shorten it after construction)."""
        return self._episode_limit

    @episode_limit.setter
    def episode_limit(self, value: int) -> None:
        self._episode_limit, self._plan_value = value, None

    @property
    def max_reward(self) -> Any:
        """SMAC's reward scale numerator (from the engine's maxima after the first reset)."""
        return self._max_reward

    @max_reward.setter
    def max_reward(self, value: Any) -> None:
        self._max_reward, self._plan_value = value, None

    def __getstate__(self) -> dict[str, Any]:
        """A copy or pickle leaves the plan out (it holds this env's arrays); the copy builds its own."""
        return {**self.__dict__, "_plan_value": None}

    def _plan(self) -> FusedPlan:
        """The arguments that every fused call passes unchanged (``fused.py``), kept until the episode limit
        or the reward scale is set again."""
        if self._plan_value is None:
            self._plan_value = fused_plan(self)
        return self._plan_value

    # ------------------------------------------------------------------ episode control
    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        """Start an episode in every env; returns (obs_ENO, state_ES)."""
        return self.reset_envs(np.ones(self.n_envs, dtype=bool))

    def reset_envs(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start a new episode in the envs where ``mask`` (bool, (n_envs,)) is True; returns (obs, state)
        of all envs."""
        mask = self._mask(mask)
        if self.fused and self._max_reward_from_table:  # the first reset sets max_reward (below)
            for e in np.flatnonzero(mask):
                self._targets[e] = [None] * self.n_agents
            fused_reset(self, mask)
            return self._obs, self._state
        idx = None if mask.all() else np.flatnonzero(mask)
        self._units = self._respawn(mask)
        rows = slice(None) if idx is None else idx
        self._steps[rows] = 0
        self._running[rows] = True
        self._last_action[rows] = 0.0
        self._dead[rows] = False
        for e in np.flatnonzero(mask):
            self._targets[e] = [None] * self.n_agents
        self._observe(idx)
        return self._obs, self._state

    def _respawn(self, mask: np.ndarray) -> Any:
        """Respawn the envs of ``mask`` in the engine; the units of every env."""
        table = self.engine.reset_envs(mask)
        if not self._max_reward_from_table:  # SMAC adds the enemies' health+shield maxima on the first reset
            self.max_reward = max_reward(self.spec, self.opts, table.table(0).enemies)
            self._max_reward_from_table = True
        return table.units()

    def _engine_step(self, actions_EN: np.ndarray, mask: np.ndarray | None) -> Any:
        """Step the engine (the envs of ``mask``, None = all); the units of every env."""
        return self.engine.step(actions_EN, mask).units()

    def _engine_actions(self, actions_BN: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """What the engine runs for the actions of the envs ``rows`` (SMAC: the actions themselves)."""
        return actions_BN

    def _reward_and_end(self, prev: Any, cur: Any, dead: np.ndarray, rows: np.ndarray) -> tuple:
        """(reward before the end bonus, end code, dead allies, dead enemies) of the envs ``rows``."""
        return self.features.reward_and_end(prev, cur, dead)

    def _reward_divisor(self, rows: np.ndarray) -> Any:
        """SMAC's reward scale (max_reward / reward_scale_rate) of the envs ``rows``."""
        return self.max_reward / self.opts.reward_scale_rate

    def step(
        self, actions_EN: Any, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """One joint action per env; returns (reward_E, terminated_E, info) with info arrays ``battle_won``,
        ``dead_allies``, ``dead_enemies`` and ``episode_limit`` (a timeout with ``continuing_episode``).

        With ``mask`` only those envs are stepped (the others keep their state, random stream and outputs,
        and read 0/False in the returned arrays); their actions are ignored.
        """
        E, n = self.n_envs, self.n_agents
        a = np.asarray(actions_EN)
        if a.shape != (E, n):
            raise ValueError(f"actions must have shape (n_envs, n_agents) = ({E}, {n}), got {a.shape}")
        idx = None
        if mask is not None:
            mask = self._mask(mask)
            if not mask.all():
                idx = np.flatnonzero(mask)
        if idx is not None and not len(idx):  # nothing to step
            info = {k: np.zeros(E, dtype=bool) for k in ("battle_won", "episode_limit")}
            info.update({k: np.zeros(E, dtype=np.int64) for k in ("dead_allies", "dead_enemies")})
            return np.zeros(E), np.zeros(E, dtype=bool), info
        o = self.opts
        if self.fused and not o.heuristic_ai:  # checks that the stepped envs run in the compiled call
            return fused_step(self, a, None if idx is None else mask)
        rows = np.arange(E) if idx is None else idx
        self._require_running(rows)
        sub = self._check_actions(a if idx is None else a[idx], rows)
        self._last_action[rows] = self._eye[sub]  # in place: the fused calls hold this array
        if o.heuristic_ai:
            f = self.features
            u = self._units if idx is None else self._units.take(idx)
            sub = f.batch_heuristic(
                u, [self._targets[e] for e in rows], self._avail[rows], o.heuristic_rest, f.batch_geometry(u)
            )
        sub = self._engine_actions(sub, rows)
        if idx is None:
            full = sub
        else:
            full = np.zeros((E, n), dtype=np.int64)
            full[idx] = sub
        prev = self._units
        self._units = self._engine_step(full, mask)
        if idx is None:
            self._steps += 1
            cur, dead, steps = self._units, self._dead, self._steps
        else:
            self._steps[idx] += 1
            prev, cur, dead, steps = prev.take(idx), self._units.take(idx), self._dead[idx], self._steps[idx]
        reward, code, dead_a, dead_e = self._reward_and_end(prev, cur, dead, rows)
        if idx is not None:
            self._dead[idx] = dead
        # the end bonus by code (+1 win, 0 draw, 2 running, -1 loss = index 3); sparse: the reward itself
        reward = self._end_reward[code] if o.reward_sparse else reward + self._end_reward[code]
        won = code == 1
        timeout = (code == RUNNING) & (steps >= self.episode_limit)
        term = (code != RUNNING) | timeout
        where = slice(None) if idx is None else idx
        self.battles_game[where] += term
        self.battles_won[where] += won
        self.timeouts[where] += timeout
        self._running[where] = ~term
        if o.reward_scale:
            reward = reward / self._reward_divisor(rows)
        self._observe(idx)
        if idx is None:
            info = {
                "battle_won": won,
                "dead_allies": dead_a,
                "dead_enemies": dead_e,
                "episode_limit": timeout & o.continuing_episode,
            }
            return reward, term, info
        out_r, out_t = np.zeros(E), np.zeros(E, dtype=bool)
        out_r[idx], out_t[idx] = reward, term
        info = {}
        for k, v in (
            ("battle_won", won),
            ("dead_allies", dead_a),
            ("dead_enemies", dead_e),
            ("episode_limit", timeout & o.continuing_episode),
        ):
            info[k] = np.zeros(E, dtype=v.dtype)
            info[k][idx] = v
        return out_r, out_t, info

    def _require_running(self, rows: np.ndarray) -> None:
        """Raise if an env of ``rows`` is not running (never reset, or its episode ended)."""
        if not self._running[rows].all():
            bad = rows[~self._running[rows]].tolist()
            raise RuntimeError(
                f"env(s) {bad} are not running (never reset, or the episode ended); "
                "call reset() or reset_envs() first"
            )

    def _mask(self, mask: Any) -> np.ndarray:
        mask = np.asarray(mask)
        if mask.shape != (self.n_envs,) or mask.dtype != np.bool_:
            raise ValueError(
                f"mask must be a bool array of shape ({self.n_envs},), got {mask.dtype} {mask.shape}"
            )
        return mask

    def _check_actions(self, a: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Integer, in range and (unless heuristic_ai) available; the error names env, agent and action."""
        if a.dtype.kind not in "iu":
            if a.dtype.kind not in "fb" or not np.all(np.equal(np.mod(a, 1), 0)):
                raise ValueError(f"actions must be integers, got dtype {a.dtype}")
        a = a.astype(np.int64, copy=False)
        if not (a.view(np.uint64) < self.n_actions).all():  # negatives wrap to huge values
            k, i = np.argwhere((a < 0) | (a >= self.n_actions))[0]
            raise ValueError(
                f"env {rows[k]}, agent {i}: action {a[k, i]} is out of range 0..{self.n_actions - 1}"
            )
        if not self.opts.heuristic_ai:
            avail = self._avail[rows] if len(rows) < self.n_envs else self._avail
            ok = avail.reshape(-1)[self._flat_base[: len(rows)] + a]
            if not ok.all():
                k, i = np.argwhere(ok == 0)[0]
                act = int(a[k, i])
                raise ValueError(
                    f"env {rows[k]}, agent {i} cannot take action {act} "
                    f"({self.action_name(i, act, int(rows[k]))}); available actions: "
                    f"{np.flatnonzero(avail[k, i]).tolist()}"
                )
        return a

    def _observe(self, idx: np.ndarray | None) -> None:
        """Availability, observations and state of the envs ``idx`` (None = all) from the current units."""
        f = self.features
        u = self._units if idx is None else self._units.take(idx)
        last = self._last_action if idx is None else self._last_action[idx]
        steps = self._steps if idx is None else self._steps[idx]
        avail, obs, state = f.observe(u, last, steps)
        if idx is None:
            self._avail, self._obs, self._state = avail, obs, state
        else:
            self._avail[idx], self._obs[idx], self._state[idx] = avail, obs, state

    @property
    def _units(self) -> Any:
        """The units after the last reset or step (a fused step takes them from the engine when asked)."""
        if self._units_stale:
            self._units_value, self._units_stale = self.engine.snapshot().units(), False
        return self._units_value

    @_units.setter
    def _units(self, value: Any) -> None:
        self._units_value, self._units_stale = value, False

    # ------------------------------------------------------------------ getters
    @property
    def units(self) -> Any:
        """Every env's current units (positions, health, shields; views that the next step overwrites)."""
        return self._units

    def get_obs(self) -> np.ndarray:
        """(E, n_agents, obs_size) float32."""
        return self._obs

    def get_state(self) -> np.ndarray:
        """(E, state_size) float32."""
        return self._state

    def get_avail_actions(self) -> np.ndarray:
        """(E, n_agents, n_actions) int64 0/1."""
        return self._avail

    def action_name(self, agent_id: int, action: int, env: int = 0) -> str:
        """Readable name of an action of one agent (of env ``env``: the same on every env of a SMAC map)."""
        agent_id = check_agent_id(agent_id, self.n_agents)
        if action < N_ACTIONS_NO_ATTACK:
            return _ACTION_NAMES[action]
        kind = "heal ally" if self.features.ally_medivac[agent_id] else "attack enemy"
        return f"{kind} {action - N_ACTIONS_NO_ATTACK}"

    def get_env_info(self) -> dict[str, Any]:
        """SMAC's env info of one env (the same for every env of the batch)."""
        f = self.features
        return {
            "state_shape": f.state_size,
            "obs_shape": f.obs_size,
            "n_actions": self.n_actions,
            "n_agents": self.n_agents,
            "episode_limit": self.episode_limit,
            "agent_features": list(f.agent_features),
            "enemy_features": list(f.enemy_features),
            "engine_version": ENGINE_VERSION,
            "backend": "sim",
        }

    def engine_info(self) -> dict[str, Any]:
        """The engine record results carry (``StarCraft2Env.engine_info``; always the embedded engine)."""
        return engine_record("sim", self.map_name, generator=hasattr(self, "scenario"))

    def env_stats(self, e: int) -> dict[str, Any]:
        """``StarCraft2Env.get_stats()`` of env ``e``."""
        return _stats(int(self.battles_won[e]), int(self.battles_game[e]), int(self.timeouts[e]))

    def get_stats(self) -> dict[str, Any]:
        """SMAC's counters summed over the envs (win_rate = total won / total played)."""
        return _stats(int(self.battles_won.sum()), int(self.battles_game.sum()), int(self.timeouts.sum()))

    def close(self) -> None:
        """Nothing to release (the engine is in-process)."""
        self._units = None


def _stats(won: int, game: int, timeouts: int) -> dict[str, Any]:
    return {
        "battles_won": won,
        "battles_game": game,
        "battles_draw": timeouts,
        "win_rate": won / game if game else 0.0,
        "timeouts": timeouts,
        "restarts": 0,
    }
