"""SMAC's semantics, once, for any engine: observations, state, available actions, reward, episode end.

Everything here is computed from a :class:`MapSpec`, the option flags (:class:`SmacOptions`) and
:class:`Units` (the units of E envs with a leading env axis: the current moment and, for the reward, the
previous one); nothing knows which engine produced them. One implementation serves every caller: the
``batch_*`` methods work on E envs at once (the batched env), and the single-env methods taking a
:class:`UnitTable` (``StarCraft2Env``, the real-game engine, tests) are the same code with E = 1.
Layouts, normalisations and quirks follow oxwhirl/smac v1 (docs/smac.md §1.1, §3, §4,
§5). Everything is vectorised with NumPy over envs and units; the number of NumPy calls per step does
not grow with E or with the number of units. The envs' per-step path (:meth:`SmacFeatures.observe`,
:meth:`SmacFeatures.reward_and_end`) runs the same rules as two compiled calls
(:mod:`marl.envs.smac.fast_features`, tested element for element against these NumPy methods) because
~70 NumPy calls per step dominated a one-env step; ``compiled=False`` selects the NumPy reference.

Module layout: :mod:`~marl.envs.smac.features_layout` (:class:`Units`, :class:`Geometry`, sizes and
templates), :mod:`~marl.envs.smac.features_ref` (the NumPy rules) and this module (:class:`SmacFeatures`:
the compiled per-step path and the single-env methods), which re-exports what the envs and tests import.
"""

from __future__ import annotations

import numpy as np

from marl.envs.smac.features_layout import _PAD, _SURROUND, RUNNING, Geometry, Units
from marl.envs.smac.features_ref import NumpyFeatures
from marl.envs.smac.heuristic import heuristic_actions
from marl.envs.smac.options import (
    MOVE_AMOUNT,
    N_ACTIONS_NO_ATTACK,
    SHOOT_RANGE,
    SIGHT_RANGE,
    UNIT_MAX_HEALTH_SHIELD,
    SmacOptions,
    max_reward,
)
from marl.envs.smac.threads import resolve_threads, with_threads
from marl.envs.smac.types import MEDIVAC_MAP_TYPES, MapSpec, UnitTable

__all__ = [
    "MOVE_AMOUNT",
    "N_ACTIONS_NO_ATTACK",
    "RUNNING",
    "SHOOT_RANGE",
    "SIGHT_RANGE",
    "UNIT_MAX_HEALTH_SHIELD",
    "Geometry",
    "SmacFeatures",
    "SmacOptions",
    "Units",
    "max_reward",
]


class SmacFeatures(NumpyFeatures):
    """Obs/state/avail/reward/end-code of one map under one set of options (stateless per step)."""

    def __init__(self, spec: MapSpec, opts: SmacOptions, compiled: bool = True, threads: int = 1) -> None:
        super().__init__(spec, opts)
        self.compiled = compiled  # observe() through the compiled kernel (else the NumPy methods)
        self.threads = resolve_threads(threads)  # > 1: the compiled observe() spreads envs over threads
        o = opts
        self._kernel_args = (
            self.ally_medivac,
            self.ally_onehot,
            self.enemy_onehot,
            self.ally_max_shield,
            self.enemy_max_shield,
            self.ally_max_cd,
            self._walk_in,
            self._walk_out,
            self._height_pad,
            _PAD,
            _SURROUND,
            self._move_dirs,
            float(self.map_x),
            float(self.map_y),
            float(self.ext_x),
            float(self.ext_y),
            spec.episode_limit,
            o.obs_all_health,
            o.own_health,
            o.obs_last_action,
            o.obs_pathing_grid,
            o.obs_terrain_height,
            o.obs_timestep_number,
            o.state_last_action,
            o.state_timestep_number,
            self.s_a,
            self.s_e,
            SIGHT_RANGE,
            SHOOT_RANGE,
        )

    # ================================================================ batched (E envs): the per-step path
    def observe(
        self, u: Units, last_action: np.ndarray, steps: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(avail (E, n, A) int64, obs (E, n, O) float32, state (E, S) float32) of E envs: one compiled
        call (:mod:`marl.envs.smac.fast_features`) or, with ``compiled=False``, the NumPy reference."""
        if not self.compiled:
            geo = self.batch_geometry(u)
            avail = self.batch_avail(u, geo)
            obs = self.batch_obs(u, avail, last_action, steps, geo)
            return avail, obs, self.batch_state(u, last_action, steps, obs, geo)
        from marl.envs.smac.fast_features import observe_kernel, observe_kernel_parallel

        o, n, E, u = self.opts, self.n_agents, u.n_envs, u.as_views()
        avail = np.zeros((E, n, self.n_actions), dtype=np.int64)
        obs = np.zeros((E, n, self.obs_size), dtype=np.float32)
        state = np.zeros((E, 0 if o.obs_instead_of_state else self.state_size), dtype=np.float32)
        hmax = u.health_max.reshape(-1, u.health.shape[1]).astype(np.float64, copy=False)  # (1 or E, U)
        per_env = (
            n,
            u.pos,
            u.health,
            u.shield,
            u.cooldown,
            u.energy,
            hmax,
            last_action.astype(np.float32, copy=False),
            np.asarray(steps, dtype=np.int64),
        )
        if self.threads > 1 and E > 1:
            args = (min(self.threads, E), *per_env, self._kernel_args, avail, obs, state)
            with_threads(self.threads, observe_kernel_parallel, *args)
        else:
            observe_kernel(*per_env, *self._kernel_args, avail, obs, state)
        if o.obs_instead_of_state:
            state = obs.reshape(E, self.state_size).copy()
        return avail, obs, state

    def reward_and_end(
        self, prev: Units, cur: Units, dead: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(reward (E,) before the end bonus, end code (E,), dead allies (E,), dead enemies (E,)).

        Updates the death tracker ``dead`` in place. One compiled call, or with ``compiled=False`` the NumPy
        methods (:meth:`batch_reward`, :meth:`batch_end_code`)."""
        if not self.compiled:
            reward = self.batch_reward(prev, cur, dead)
            dead_a, dead_e = np.add.reduceat(cur.health <= 0, self.side_bounds, axis=1, dtype=np.int64).T
            return reward, self.batch_end_code(cur), dead_a, dead_e
        from marl.envs.smac.fast_features import reward_end_kernel

        o, E, prev, cur = self.opts, cur.n_envs, prev.as_views(), cur.as_views()
        reward, code = np.empty(E), np.empty(E, dtype=np.int64)
        dead_a, dead_e = np.zeros(E, dtype=np.int64), np.zeros(E, dtype=np.int64)
        reward_end_kernel(
            self.n_agents,
            prev.health,
            prev.shield,
            cur.health,
            cur.shield,
            dead,
            self.spec.map_type in MEDIVAC_MAP_TYPES,
            self.ally_medivac,
            self.enemy_medivac,
            o.reward_sparse,
            o.reward_only_positive,
            self.reward_clip_at_zero,
            o.reward_death_value,
            o.reward_negative_scale,
            reward,
            code,
            dead_a,
            dead_e,
        )
        return reward, code, dead_a, dead_e

    def batch_heuristic(
        self, u: Units, targets: list[list[int | None]], avail: np.ndarray, rest: bool, geo: Geometry
    ) -> np.ndarray:
        """SMAC's ``heuristic_ai`` actions (E, n_agents) for E envs (see :func:`heuristic_actions`)."""
        return heuristic_actions(self, u, targets, avail, rest, geo)

    # ================================================================ one env (a UnitTable) = a batch of 1
    def geometry(self, t: UnitTable) -> Geometry:
        """Geometry of one table (a batch of one env)."""
        return self.batch_geometry(Units.from_table(t))

    def avail_actions(self, t: UnitTable, geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, n_actions) int64 0/1 mask (docs/smac.md §4)."""
        u = Units.from_table(t)
        return self.batch_avail(u, geo or self.batch_geometry(u))[0]

    def observations(
        self,
        t: UnitTable,
        avail: np.ndarray,
        last_action: np.ndarray,
        steps: int,
        geo: Geometry | None = None,
    ) -> np.ndarray:
        """(n_agents, obs_size) float32 observations (docs/smac.md §3.1); dead agents get zeros."""
        u = Units.from_table(t)
        last = np.asarray(last_action)[None]
        return self.batch_obs(
            u, np.asarray(avail)[None], last, np.array([steps]), geo or self.batch_geometry(u)
        )[0]

    def state(
        self, t: UnitTable, last_action: np.ndarray, steps: int, obs: np.ndarray | None = None
    ) -> np.ndarray:
        """Global state vector (docs/smac.md §3.2), float32; ``obs`` is used with ``obs_instead_of_state``."""
        return self.batch_state(
            Units.from_table(t),
            np.asarray(last_action)[None],
            np.array([steps]),
            None if obs is None else np.asarray(obs)[None],
        )[0]

    def visibility(self, t: UnitTable, geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, n_agents + n_enemies) bool: living agent i sees living unit k within sight (no self)."""
        u = Units.from_table(t)
        return self.batch_visibility(u, geo or self.batch_geometry(u))[0]

    def end_code(self, t: UnitTable) -> int | None:
        """+1 win, −1 loss, 0 draw, None running (see :meth:`batch_end_code`)."""
        code = int(self.batch_end_code(Units.from_table(t))[0])
        return None if code == RUNNING else code

    def battle_reward(
        self, prev: UnitTable, cur: UnitTable, dead_allies: np.ndarray, dead_enemies: np.ndarray
    ) -> float:
        """Dense per-step reward before win/loss bonus and scaling (docs/smac.md §5).

        ``dead_allies``/``dead_enemies`` are SMAC's death trackers (bool arrays), updated in place.
        """
        dead = np.concatenate([dead_allies, dead_enemies])[None]
        r = float(self.batch_reward(Units.from_table(prev), Units.from_table(cur), dead)[0])
        dead_allies[:] = dead[0, : self.n_agents]
        dead_enemies[:] = dead[0, self.n_agents :]
        return r

    def heuristic_actions(
        self,
        t: UnitTable,
        targets: list[int | None],
        avail: np.ndarray,
        rest: bool,
        geo: Geometry | None = None,
    ) -> np.ndarray:
        """SMAC's ``heuristic_ai`` for one env (see :meth:`batch_heuristic`); ``targets`` updated in place."""
        u = Units.from_table(t)
        return self.batch_heuristic(
            u, [targets], np.asarray(avail)[None], rest, geo or self.batch_geometry(u)
        )[0]
