"""``StarCraft2Env``'s fast path on the embedded engine: one compiled call a step.

``StarCraft2Env`` (``env.py``) is written for any engine that hands it a :class:`UnitTable` each step, the
real game included: it copies the table, builds feature arrays from it and computes SMAC's observations,
state, reward and end in many small NumPy calls (about 0.2 ms a step on 3m on a 2-core machine, several
times the engine's own time). On the embedded engine the same step is what env 0 of a one-env
:class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env` computes in one compiled call
(``marl/envs/smac/fused.py``), and that env equals ``StarCraft2Env`` step for step (tested), so
``StarCraft2Env`` steps through :class:`FusedSingle` whenever nothing needs its table-by-table path: the
embedded engine, no injected engine or map spec, no ``heuristic_ai``. ``StarCraft2Env(..., fused=False)``
keeps the table-by-table path, the reference that ``tests/test_smac_env_fused.py`` holds this one to.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.features import Units
from marl.envs.smac.sim.engine import BatchedUnitTable
from marl.envs.smac.types import UnitTable


class FusedSingle:
    """One SMAC env of ``map_name`` on the embedded engine: a batch of one, one compiled call a step."""

    def __init__(
        self,
        map_name: str,
        seed: int | None,
        smac_flags: dict[str, Any],
        env: BatchedStarCraft2Env | None = None,
    ) -> None:
        # ``env``: a prebuilt batch of one (research: one whose built-in AI plays candidate rules)
        self.env = (
            BatchedStarCraft2Env(map_name, 1, seed=seed, threads=1, **smac_flags) if env is None else env
        )

    @property
    def max_reward(self) -> float:
        """SMAC's reward scale denominator (set from the engine's maxima at the first reset)."""
        return self.env.max_reward

    def seed(self, seed: int) -> None:
        """Reseed the engine's random stream (used from the next reset)."""
        self.env.engine.seed(seed)

    def reset(self) -> None:
        """Start an episode."""
        self.env.reset()

    def step(self, acts_N: np.ndarray, episode_limit: int) -> tuple[float, bool, dict[str, Any], bool]:
        """(reward, terminated, SMAC's info, timed out) of one joint action (integer array, one per agent);
        an unavailable or out-of-range action raises ``ValueError`` before anything changes."""
        env = self.env
        if env.episode_limit != episode_limit:  # a caller may shorten the episodes after construction
            env.episode_limit = episode_limit
        timeouts = int(env.timeouts[0])
        reward, term, info = env.step(acts_N.reshape(1, -1))
        out: dict[str, Any] = {
            "battle_won": bool(info["battle_won"][0]),
            "dead_allies": int(info["dead_allies"][0]),
            "dead_enemies": int(info["dead_enemies"][0]),
        }
        if info["episode_limit"][0]:
            out["episode_limit"] = True
        return float(reward[0]), bool(term[0]), out, int(env.timeouts[0]) > timeouts

    def view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(avail_NA, obs_NO, state_S): rows of the batch's arrays, which each step and reset replace."""
        env = self.env
        return env._avail[0], env._obs[0], env._state[0]

    def last_action(self) -> np.ndarray:
        """(n_agents, n_actions) one-hot of the last actions (a copy)."""
        return self.env._last_action[0].copy()

    def dead(self) -> np.ndarray:
        """SMAC's death trackers (1, n_agents + n_enemies), updated in place by every step."""
        return self.env._dead

    def snapshot(self) -> BatchedUnitTable:
        """A copy of the engine's state (a table of one env; ``.table(0)`` is its :class:`UnitTable`)."""
        return self.env.engine.snapshot()


class FusedPath:
    """``StarCraft2Env``'s side of the fused path (a mixin: the attributes are ``StarCraft2Env``'s).

    On that path the env keeps what its getters read (available actions, observations, state, last
    actions, death trackers, counters) as the reference path does, but takes the unit table from the engine
    only when something reads it (``unit_table``, the visibility matrix, a render); replay frames are
    engine snapshots, turned into tables when a replay is saved (:func:`frame_table`).
    """

    _fused: FusedSingle | None = None
    _table_value: UnitTable | None = None
    _table_stale = False  # the engine moved on; the table is taken from it when first read

    def _new_fused(self) -> FusedSingle:
        """The fused engine of this env (built at the first reset)."""
        return FusedSingle(self.map_name, self._seed, self._smac_flags)

    def _reset_fused(self) -> tuple[list[np.ndarray], np.ndarray]:
        """:meth:`reset` on the fused path (the same bookkeeping, the arrays of :class:`FusedSingle`)."""
        if self._fused is None:
            self._fused = self._new_fused()
        f = self._fused
        f.reset()
        if not self._max_reward_from_table:  # SMAC's maxima from the first reset, as StarCraft2Env.reset
            self.max_reward, self._max_reward_from_table = f.max_reward, True
        self._episode_steps = 0
        self._terminated = False
        self.last_action = np.zeros((self.n_agents, self.n_actions), dtype=np.float32)
        self._dead = f.dead()
        self._heuristic_targets = [None] * self.n_agents
        if self._frames:
            self._last_frames = self._frames
        self._frames = [(f.snapshot(), None)]
        self._avail, self._obs, self._state = f.view()
        self._table_stale = True
        return self.get_obs(), self.get_state()

    def _step_fused(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        """:meth:`step` on the fused path: the compiled step checks availability; on a refusal the
        reference check runs, for SMAC's own message."""
        acts = np.asarray(actions)
        if acts.dtype.kind not in "iu" or acts.shape != (self.n_agents,):
            acts = self._check_actions(actions)  # the reference's errors; integral floats become ints
        try:
            reward, terminated, info, timed_out = self._fused.step(acts, self.episode_limit)
        except ValueError:
            self._check_actions(actions)
            raise
        f = self._fused
        self.last_action = f.last_action()
        self._episode_steps += 1
        self._frames.append((f.snapshot(), acts))
        self._avail, self._obs, self._state = f.view()
        self._table_stale = True
        if terminated:
            self.battles_game += 1
            self.battles_won += info["battle_won"]
            self.timeouts += timed_out
            self._episode_count += 1
            self._terminated = True
        return reward, terminated, info

    @property
    def _table(self) -> UnitTable | None:
        """The current unit table (on the fused path taken from the engine when first read after a step)."""
        if self._table_stale:
            self._table_stale = False
            self._table_value = self._fused.snapshot().table(0)
            self._units = Units.from_table(self._table_value)
        return self._table_value

    @_table.setter
    def _table(self, table: UnitTable | None) -> None:
        self._table_value, self._table_stale = table, False

    def _started(self) -> bool:
        """Whether an episode was started (without taking the unit table from the engine)."""
        return self._table_value is not None or self._table_stale

    def _require_view(self) -> None:
        """Raise unless an episode was started (the getters of cached arrays need no unit table)."""
        if not self._started():
            raise RuntimeError("call reset() first")


def frame_table(frame: Any) -> Any:
    """The :class:`UnitTable` of a stored frame (the fused path stores engine snapshots, the reference
    path tables)."""
    return frame.table(0) if isinstance(frame, BatchedUnitTable) else frame
