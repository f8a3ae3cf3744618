"""``V2Features``: SMACv2's availability, observations, state and reward of E envs (each with its own
generated team) through the compiled kernels of :mod:`.fast_kernels`.

``SMACv2Env`` runs it with E = 1 and ``BatchedSMACv2Env`` with E = n_envs, so both run the same code; the
NumPy reference (``V2Observer`` + ``SmacFeatures(compiled=False)``, ``SMACv2Env(compiled=False)``) is what
``tests/test_smacv2_fast.py`` compares it with, element for element.
"""

from __future__ import annotations

import numpy as np

from marl.envs.smac.features_layout import _DIRS, _PAD, _SURROUND, Units, _padded
from marl.envs.smac.options import _ALLY_TYPE_ORDER as TYPE_ORDER
from marl.envs.smac.options import DEFAULT_MAX_COOLDOWN, MAX_COOLDOWN, MAX_SHIELD, MOVE_AMOUNT, SmacOptions
from marl.envs.smac.smacv2.fast_kernels import (
    v2_observe_kernel,
    v2_observe_kernel_parallel,
    v2_reward_end_kernel,
)
from marl.envs.smac.smacv2.features import V2Flags, unit_ranges, v2_sizes
from marl.envs.smac.smacv2.reference import engine_actions, turn_fov
from marl.envs.smac.threads import resolve_threads, with_threads
from marl.envs.smac.types import MEDIVAC_MAP_TYPES, default_extent


class V2Features:
    """Per-env unit-type arrays, EPO tags and observation streams of E envs of one SMACv2 race and size, and
    the arrays the kernels fill (``avail`` (E, n, A) int64, ``obs`` (E, n, O) and ``state`` (E, S) float32).

    :meth:`set_env` installs env ``e``'s episode (its teams and observation seed) at reset; :meth:`observe`
    computes the envs of a mask in place. ``threads > 1`` spreads the envs over Numba threads.
    """

    def __init__(
        self,
        n_envs: int,
        n_agents: int,
        n_enemies: int,
        race: str,
        opts: SmacOptions,
        flags: V2Flags,
        map_size: tuple[int, int],
        episode_limit: int,
        bits: int = 3,
        threads: int = 1,
    ) -> None:
        E, n, m = n_envs, n_agents, n_enemies
        self.n_envs, self.n_agents, self.n_enemies, self.race = E, n, m, race
        self.opts, self.flags, self.threads = opts, flags, resolve_threads(threads)
        self.sizes = v2_sizes(n, m, race, opts, flags, bits)
        self.map_type = {"P": "protoss_gen", "T": "terran_gen", "Z": "zerg_gen"}[race]
        self._order = TYPE_ORDER[self.map_type]
        self._eye = np.eye(bits)
        self._heals = self.map_type in MEDIVAC_MAP_TYPES
        self.medivac = np.zeros((E, n), dtype=bool)  # Medivacs that heal (action 6 + j: ally j)
        self.enemy_medivac = np.zeros((E, m), dtype=bool)
        self.ally_onehot, self.enemy_onehot = np.zeros((E, n, bits)), np.zeros((E, m, bits))
        self.ally_max_shield, self.enemy_max_shield = np.ones((E, n)), np.ones((E, m))
        self.ally_max_cd = np.ones((E, n))
        self.sight, self.shoot = np.ones((E, n)), np.ones((E, n))
        self.obs_enemies = np.zeros((E, m, n), dtype=bool)  # SMACv2's obs_enemies[enemy, agent]
        self.tag_owner = np.full((E, m), -1, dtype=np.int64)  # SMACv2's enemy_tags (-1: none)
        self.rng = np.zeros(E, dtype=np.uint64)  # each env's observation stream (SplitMix64 state)
        self.fov = np.zeros((E, n, 2))  # conic_fov: each agent's field-of-view direction
        A, O, S = self.sizes["n_actions"], self.sizes["obs"], self.sizes["state"]
        self.avail = np.zeros((E, n, A), dtype=np.int64)
        self.true_avail = np.zeros((E, n, A), dtype=np.int64)  # range-checked whatever action_mask says
        self.obs = np.zeros((E, n, O), dtype=np.float32)
        self._kstate = np.zeros((E, 0 if opts.obs_instead_of_state else S), dtype=np.float32)
        self.state = np.zeros((E, S), dtype=np.float32) if opts.obs_instead_of_state else self._kstate
        o, f = opts, flags
        self._options = (
            int(episode_limit),
            o.obs_all_health,
            o.own_health,
            o.obs_last_action,
            o.obs_pathing_grid,
            o.obs_terrain_height,
            o.obs_timestep_number,
            o.state_last_action,
            o.state_timestep_number,
            int(race == "P"),
            f.obs_own_pos,
            float(f.prob_obs_enemy),
            f.fully_observable,
            f.action_mask,
            f.n_fov,
            f.half_angle,
            f.conic_fov,
        )
        self.set_map(np.ones(map_size, dtype=bool))  # SMACv2's 32x32_flat: flat, walkable (docs/smacv2.md)

    def set_map(
        self,
        pathing_grid: np.ndarray,
        terrain_height: np.ndarray | None = None,
        extent: tuple[float, float] | None = None,
    ) -> None:
        """The map the observations read: its size, pathing grid and heights, [x][y], and the playable area's
        (width, height) the state divides by (None: types.default_extent of the grid's size); the game
        reports them, the embedded engine uses a flat, walkable 32 x 32 map with a 28 x 28 playable area."""
        grid = np.asarray(pathing_grid, dtype=bool)
        ext_x, ext_y = default_extent(grid.shape) if extent is None else extent
        height = np.zeros(grid.shape) if terrain_height is None else np.asarray(terrain_height, dtype=float)
        self._shared = (
            _padded(grid, False, bool),  # moves off the map are unavailable
            _padded(grid, True, bool),  # SMAC's pathing obs reads 1 off the map
            _padded(height, 1.0, float),
            _PAD,
            _SURROUND,
            (MOVE_AMOUNT / 2) * _DIRS,
            float(grid.shape[0]),
            float(grid.shape[1]),
            float(ext_x),
            float(ext_y),
            *self._options,
        )

    def set_env(self, e: int, ally_types: tuple[str, ...], enemy_types: tuple[str, ...], seed: int) -> None:
        """Install env ``e``'s new episode: its unit types and the seed of its observation stream (the EPO
        tags are cleared by the first :meth:`observe`, at step 0)."""
        self.ally_onehot[e] = self._eye[[self._order.index(t) for t in ally_types]]
        self.enemy_onehot[e] = self._eye[[self._order.index(t) for t in enemy_types]]
        self.medivac[e] = [self._heals and t == "medivac" for t in ally_types]
        self.enemy_medivac[e] = [t == "medivac" for t in enemy_types]
        self.ally_max_shield[e] = [MAX_SHIELD.get(t, 1.0) for t in ally_types]
        self.enemy_max_shield[e] = [MAX_SHIELD.get(t, 1.0) for t in enemy_types]
        self.ally_max_cd[e] = [MAX_COOLDOWN.get(t, DEFAULT_MAX_COOLDOWN) for t in ally_types]
        self.sight[e], self.shoot[e] = unit_ranges(tuple(ally_types), self.flags)
        self.rng[e] = np.uint64(seed)
        self.fov[e] = (1.0, 0.0)  # smacv2 reset: every agent faces (1, 0)

    def observe(self, u: Units, last_action: np.ndarray, steps: np.ndarray, active: np.ndarray) -> None:
        """Fill ``avail``, ``obs`` and ``state`` of the envs with ``active`` (E,) from their units ``u``
        (all E envs; health maxima (U,) or (E, U)), last actions (E, n, A) and steps taken (E,)."""
        f64 = np.float64
        hmax = u.health_max.astype(f64, copy=False).reshape(-1, u.health.shape[1])
        if hmax.shape[0] != self.n_envs:
            hmax = np.broadcast_to(hmax, u.health.shape)
        per_env = (
            u.pos.astype(f64, copy=False),
            u.health.astype(f64, copy=False),
            u.shield.astype(f64, copy=False),
            u.cooldown.astype(f64, copy=False),
            u.energy.astype(f64, copy=False),
            hmax,
            last_action.astype(np.float32, copy=False),
            np.asarray(steps, dtype=np.int64),
            self.medivac,
            self.ally_onehot,
            self.enemy_onehot,
            self.ally_max_shield,
            self.enemy_max_shield,
            self.ally_max_cd,
            self.sight,
            self.shoot,
            self.obs_enemies,
            self.tag_owner,
            self.rng,
            self.fov,
        )
        args = (
            active,
            self.n_agents,
            per_env,
            self._shared,
            self.true_avail,
            self.avail,
            self.obs,
            self._kstate,
        )
        if self.threads > 1 and self.n_envs > 1:
            with_threads(self.threads, v2_observe_kernel_parallel, *args)
        else:
            v2_observe_kernel(*args)
        if self.opts.obs_instead_of_state:
            self.state[active] = self.obs[active].reshape(int(active.sum()), -1)

    def engine_actions(self, actions_BN: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Carry out the agents' choices of the envs ``rows`` that are not the engine's (the field-of-view
        turns of conic_fov) and return what the engine runs (:func:`.reference.engine_actions`: no command
        for a turn nor for an attack out of range or cone)."""
        n_fov = self.flags.n_fov
        if not n_fov and self.flags.action_mask:  # the actions passed the mask, which checks the range
            return actions_BN
        if n_fov:
            fov = self.fov[rows]
            turn_fov(fov, actions_BN, n_fov)
            self.fov[rows] = fov
        return engine_actions(actions_BN, self.true_avail[rows], n_fov)

    def reward_and_end(
        self, prev: Units, cur: Units, dead: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(reward before the end bonus, end code, dead allies, dead enemies) of the envs ``rows`` (``prev``,
        ``cur`` and the death tracker ``dead``, updated in place, hold just those rows)."""
        o, E, f64 = self.opts, cur.n_envs, np.float64
        reward, code = np.empty(E), np.empty(E, dtype=np.int64)
        dead_a, dead_e = np.zeros(E, dtype=np.int64), np.zeros(E, dtype=np.int64)
        v2_reward_end_kernel(
            self.n_agents, prev.health.astype(f64, copy=False), prev.shield.astype(f64, copy=False),
            cur.health.astype(f64, copy=False), cur.shield.astype(f64, copy=False), dead,
            self._heals, self.medivac[rows], self.enemy_medivac[rows], o.reward_sparse,
            o.reward_only_positive, o.reward_death_value, o.reward_negative_scale, reward, code, dead_a,
            dead_e,
        )  # fmt: skip
        return reward, code, dead_a, dead_e
