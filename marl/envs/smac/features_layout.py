"""The layout half of the SMAC feature layer: the unit batch (:class:`Units`), the per-step shared
:class:`Geometry`, and :class:`FeatureLayout`, the per-map constants (obs/state sizes, type one-hots, padded
pathing/height grids, Medivac masks) and the constant obs/state templates that every implementation fills.

Layouts follow oxwhirl/smac v1 (docs/smac.md §3). The rules that fill them are in
:mod:`marl.envs.smac.features_ref` (NumPy) and :mod:`marl.envs.smac.fast_features` (compiled);
:mod:`marl.envs.smac.features` is the entry point and re-exports the names here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marl.envs.smac.options import (
    _ALLY_TYPE_ORDER,
    _ENEMY_TYPE_ORDER,
    DEFAULT_MAX_COOLDOWN,
    MAX_COOLDOWN,
    MAX_SHIELD,
    MOVE_AMOUNT,
    N_ACTIONS_NO_ATTACK,
    SmacOptions,
)
from marl.envs.smac.types import MEDIVAC_MAP_TYPES, MapSpec, UnitTable

# (dx, dy) of SMAC's surrounding points (2·move_amount and move_amount offsets) for pathing/height obs.
_SURROUND = np.array([(0, 4), (0, -4), (4, 0), (-4, 0), (2, 2), (-2, -2), (2, -2), (-2, 2)], dtype=np.int64)
_DIRS = np.array([(0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 0.0)])  # north, south, east, west


RUNNING = 2  # end code of an env whose battle goes on (batch_end_code); +1 win, -1 loss, 0 draw
_PAD = 8  # cells of padding around the grids, so out-of-map lookups need no bounds test


@dataclass
class Units:
    """The units of E envs at one moment: allies (the first ``n_agents``) then enemies, leading env axis.

    Arrays may be views (of an engine's state); features never write to them. ``health_max`` is (U,) or
    (E, U).
    """

    n_agents: int
    pos: np.ndarray  # (E, U, 2) float
    health: np.ndarray  # (E, U), 0 = dead
    shield: np.ndarray  # (E, U)
    cooldown: np.ndarray  # (E, U) game loops
    energy: np.ndarray  # (E, U)
    health_max: np.ndarray  # (U,) or (E, U)

    @classmethod
    def packed(
        cls,
        n_agents: int,
        pos: np.ndarray,
        health: np.ndarray,
        shield: np.ndarray,
        cooldown: np.ndarray,
        energy: np.ndarray,
        health_max: np.ndarray,
    ) -> Units:
        """Copies of the (E, U[, 2]) arrays as column views of one (E, U, 6) float64 table, the layout of
        the engine's state (:meth:`~marl.envs.smac.sim.engine.BatchedUnitTable.units`). Numba types an array
        by its layout too, so the feature kernels compiled for the engine's views serve any source
        unchanged (``sim/jit.py``)."""
        t = np.empty((*np.shape(health), 6))
        t[:, :, 0:2], t[:, :, 2], t[:, :, 3], t[:, :, 4], t[:, :, 5] = pos, health, shield, cooldown, energy
        return cls(n_agents, t[:, :, 0:2], t[:, :, 2], t[:, :, 3], t[:, :, 4], t[:, :, 5], health_max)

    @classmethod
    def from_table(cls, t: UnitTable) -> Units:
        """One :class:`UnitTable` as a batch of one env."""
        a, e = t.allies, t.enemies

        def cat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return np.concatenate([x, y])[None]

        hmax = np.concatenate([a.health_max, e.health_max]).astype(np.float64, copy=False)
        cols = (cat(a.pos, e.pos), cat(a.health, e.health), cat(a.shield, e.shield))
        return cls.packed(len(a.health), *cols, cat(a.cooldown, e.cooldown), cat(a.energy, e.energy), hmax)

    def as_views(self) -> Units:
        """These units laid out as :meth:`packed` lays them out: ``self`` when every column is already a
        float64 view of a wider table (the engine's state, :meth:`packed`), else a packed copy. What the
        feature kernels take, so that no source compiles them for other array types (``sim/jit.py``)."""
        cols = (self.pos, self.health, self.shield, self.cooldown, self.energy)
        if all(c.dtype == np.float64 and not (c.flags.c_contiguous or c.flags.f_contiguous) for c in cols):
            return self
        return Units.packed(self.n_agents, *cols, self.health_max)

    @property
    def n_envs(self) -> int:
        return self.pos.shape[0]

    def take(self, idx: np.ndarray) -> Units:
        """The envs ``idx`` (an index array) as a smaller batch (copies)."""
        hmax = self.health_max if self.health_max.ndim == 1 else self.health_max[idx]
        cols = (self.pos[idx], self.health[idx], self.shield[idx], self.cooldown[idx], self.energy[idx])
        return Units.packed(self.n_agents, *cols, hmax)

    @property
    def alive(self) -> np.ndarray:
        """(E, U) bool."""
        return self.health > 0


@dataclass
class Geometry:
    """What avail/obs/state/visibility of E envs share, computed once per step (:meth:`batch_geometry`).

    Unit axis: allies then enemies, so ``[:, :, :n_agents]`` is agent-agent and the rest agent-enemy.
    """

    g: np.ndarray  # (3, E, n_ag, U): distance, dx, dy (unit − agent)
    alive: np.ndarray  # (E, U) bool
    hfrac: np.ndarray  # (E, U) health / health_max
    vis: np.ndarray  # (E, n_ag, U) bool: the unit is alive and closer than the sight range

    @property
    def dist(self) -> np.ndarray:
        """(E, n_ag, U) distances."""
        return self.g[0]


def _type_index(units: tuple[str, ...], order: tuple[str, ...] | None, bits: int) -> np.ndarray:
    idx = np.array([order.index(u) if order and u in order else 0 for u in units], dtype=np.int64)
    if bits > 0 and len(idx) and idx.max() >= bits:
        raise ValueError(f"unit type index {idx.max()} does not fit in unit_type_bits={bits}")
    return idx


def _one_hot(idx: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros((len(idx), bits))
    if bits:
        out[np.arange(len(idx)), idx] = 1.0
    return out


def _padded(grid: np.ndarray, value: float, dtype: type) -> np.ndarray:
    out = np.full((grid.shape[0] + 2 * _PAD, grid.shape[1] + 2 * _PAD), value, dtype=dtype)
    out[_PAD:-_PAD, _PAD:-_PAD] = grid
    return out


class FeatureLayout:
    """Per-map constants and obs/state layout of one map under one set of options (no per-step rules).

    ``reward_clip_at_zero``: with ``reward_only_positive`` the dense reward is SMAC v1's
    ``|damage + kills|`` (False) or SMACv2's ``max(damage + kills, 0)`` (True; smacv2 ``reward_battle``).
    """

    reward_clip_at_zero = False

    def __init__(self, spec: MapSpec, opts: SmacOptions) -> None:
        self.spec, self.opts = spec, opts
        self.n_agents, self.n_enemies = spec.n_agents, spec.n_enemies
        self.n_actions = N_ACTIONS_NO_ATTACK + self.n_enemies
        self.bits = spec.unit_type_bits
        self.s_a = int(spec.ally_race == "P")
        self.s_e = int(spec.enemy_race == "P")
        mmm = spec.map_type in MEDIVAC_MAP_TYPES
        ally_t, enemy_t = spec.ally_types, spec.enemy_types
        b = self.bits
        self.ally_onehot = _one_hot(_type_index(ally_t, _ALLY_TYPE_ORDER.get(spec.map_type), b), b)
        self.enemy_onehot = _one_hot(_type_index(enemy_t, _ENEMY_TYPE_ORDER.get(spec.map_type), b), b)
        self.ally_medivac = np.array([mmm and u == "medivac" for u in ally_t], dtype=bool)
        self.enemy_medivac = np.array([u == "medivac" for u in enemy_t], dtype=bool)
        self.ally_max_cd = np.array([MAX_COOLDOWN.get(u, DEFAULT_MAX_COOLDOWN) for u in ally_t], dtype=float)
        self.ally_max_shield = np.array([MAX_SHIELD.get(u, 1.0) for u in ally_t])
        self.enemy_max_shield = np.array([MAX_SHIELD.get(u, 1.0) for u in enemy_t])
        self.max_shield = np.concatenate([self.ally_max_shield, self.enemy_max_shield])
        if self.ally_medivac.any() and self.n_agents > self.n_enemies:
            raise ValueError(
                f"{spec.name}: a Medivac heals ally j with action 6+j, so n_agents must be <= n_enemies"
            )
        n = self.n_agents
        others = [[j for j in range(n) if j != i] for i in range(n)]
        self._others = np.array(others, dtype=np.int64).reshape(n, n - 1)
        self._rows = np.arange(n)[:, None]
        self._ally_onehot_others = self.ally_onehot[self._others]  # (n, n-1, bits)
        self._medivac_idx = np.flatnonzero(self.ally_medivac)
        self.grid = spec.pathing_grid
        self.height = (
            spec.terrain_height if spec.terrain_height is not None else np.zeros(spec.map_size, dtype=float)
        )  # flat when the map gives no heights
        self.map_x, self.map_y = spec.map_size
        self._any_medivac = bool(self.ally_medivac.any())
        self.side_bounds = np.array([0, n])  # np.add.reduceat boundaries of the unit axis: allies, enemies
        self._noop_stop = np.array([0, 1])
        self._dead_avail = np.zeros(self.n_actions, dtype=np.int64)
        self._dead_avail[0] = 1
        # end code by (any ally alive, any enemy alive) outside MMM maps
        self._end_lut = np.array([[0, -1], [1, RUNNING]], dtype=np.int64)
        grid = np.asarray(self.grid, dtype=bool)
        self._walk_in = _padded(grid, False, bool)  # outside the map: not walkable (move availability)
        self._walk_out = _padded(grid, True, bool)  # outside the map: 1 (SMAC's pathing obs)
        self._height_pad = _padded(np.asarray(self.height, dtype=float), 1.0, float)
        self._pad_hi = np.array(self._walk_in.shape) - 1
        self._move_dirs = (MOVE_AMOUNT / 2) * _DIRS
        self._centre = np.array([self.map_x / 2, self.map_y / 2])
        # SMAC's get_state: (x - map_x / 2) / max_distance_x, the playable area's width (docs/fidelity.md)
        self.ext_x, self.ext_y = spec.extent
        self._extent = np.array([self.ext_x, self.ext_y], dtype=float)
        o = opts
        self.move_size = 4 + 8 * o.obs_pathing_grid + 9 * o.obs_terrain_height
        self.enemy_feat_size = 4 + self.bits + o.obs_all_health * (1 + self.s_e)
        self.ally_feat_size = (
            4 + self.bits + o.obs_all_health * (1 + self.s_a) + o.obs_last_action * self.n_actions
        )
        self.own_size = self.bits + o.own_health * (1 + self.s_a)
        self.obs_size = (
            self.move_size
            + self.n_enemies * self.enemy_feat_size
            + (n - 1) * self.ally_feat_size
            + self.own_size
            + o.obs_timestep_number
        )
        self.ally_state_size = 4 + self.s_a + self.bits
        self.enemy_state_size = 3 + self.s_e + self.bits
        if o.obs_instead_of_state:
            self.state_size = n * self.obs_size
        else:
            self.state_size = (
                n * self.ally_state_size
                + self.n_enemies * self.enemy_state_size
                + o.state_last_action * n * self.n_actions
                + o.state_timestep_number
            )
        self._obs_template, self._state_template = self._templates()
        types = [f"type_{i}" for i in range(self.bits)]
        self.agent_features = ["health", "energy/cooldown", "rel_x", "rel_y"] + ["shield"] * self.s_a + types
        self.enemy_features = ["health", "rel_x", "rel_y"] + ["shield"] * self.s_e + types

    def _templates(self) -> tuple[np.ndarray, np.ndarray]:
        """Constant parts of one env's obs (n_agents, obs_size) and state: type one-hots and the 1 that
        marks a visible ally (both later multiplied by visibility/aliveness)."""
        o, n, m, b = self.opts, self.n_agents, self.n_enemies, self.bits
        obs = np.zeros((n, self.obs_size), dtype=np.float32)
        col = self.move_size
        fe = self.enemy_feat_size
        obs[:, col : col + m * fe].reshape(n, m, fe)[..., fe - b :] = self.enemy_onehot
        col += m * fe
        fa = self.ally_feat_size
        ab = obs[:, col : col + (n - 1) * fa].reshape(n, n - 1, fa)
        ab[..., 0] = 1.0
        k = 4 + o.obs_all_health * (1 + self.s_a)
        ab[..., k : k + b] = self._ally_onehot_others
        col += (n - 1) * fa
        own = col + o.own_health * (1 + self.s_a)
        obs[:, own : own + b] = self.ally_onehot
        state = np.zeros(self.state_size, dtype=np.float32)
        if not o.obs_instead_of_state:
            fa, fe = self.ally_state_size, self.enemy_state_size
            state[: n * fa].reshape(n, fa)[:, fa - b :] = self.ally_onehot
            state[n * fa : n * fa + m * fe].reshape(m, fe)[:, fe - b :] = self.enemy_onehot
        return obs, state
