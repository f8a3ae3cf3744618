"""SMAC's semantics, once, for any engine: observations, state, available actions, reward, episode end.

Everything here is computed from a :class:`MapSpec`, the option flags (:class:`SmacOptions`) and
:class:`Units` (the units of E envs with a leading env axis: the current moment and, for the reward, the
previous one); nothing knows which engine produced them. One implementation serves every caller: the
``batch_*`` methods work on E envs at once (the batched env), and the single-env methods taking a
:class:`UnitTable` (``StarCraft2Env``, the real-game engine, tests) are the same code with E = 1.
Layouts, normalisations and quirks follow oxwhirl/smac v1 (spec /work/shared/specs/smac.md §1.1, §3, §4,
§5). Everything is vectorised with NumPy over envs and units; the number of NumPy calls per step does
not grow with E or with the number of units. The envs' per-step path (:meth:`SmacFeatures.observe`,
:meth:`SmacFeatures.reward_and_end`) runs the same rules as two compiled calls
(:mod:`marl.envs.smac.fast_features`, tested element for element against these NumPy methods) because
~70 NumPy calls per step dominated a one-env step; ``compiled=False`` selects the NumPy reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marl.envs.smac.heuristic import heuristic_actions
from marl.envs.smac.options import (
    _ALLY_TYPE_ORDER,
    _ENEMY_TYPE_ORDER,
    DEFAULT_MAX_COOLDOWN,
    MAX_COOLDOWN,
    MAX_SHIELD,
    MOVE_AMOUNT,
    N_ACTIONS_NO_ATTACK,
    SHOOT_RANGE,
    SIGHT_RANGE,
    UNIT_MAX_HEALTH_SHIELD,
    SmacOptions,
    max_reward,
)
from marl.envs.smac.types import MapSpec, UnitTable

__all__ = ["MOVE_AMOUNT", "N_ACTIONS_NO_ATTACK", "RUNNING", "SHOOT_RANGE", "SIGHT_RANGE",
           "UNIT_MAX_HEALTH_SHIELD", "Geometry", "SmacFeatures", "SmacOptions", "Units", "max_reward"]

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
    def from_table(cls, t: UnitTable) -> Units:
        """One :class:`UnitTable` as a batch of one env."""
        a, e = t.allies, t.enemies

        def cat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return np.concatenate([x, y]).astype(np.float64, copy=False)[None]

        return cls(len(a.health), cat(a.pos, e.pos), cat(a.health, e.health), cat(a.shield, e.shield),
                   cat(a.cooldown, e.cooldown), cat(a.energy, e.energy), cat(a.health_max, e.health_max)[0])

    @property
    def n_envs(self) -> int:
        return self.pos.shape[0]

    def take(self, idx: np.ndarray) -> Units:
        """The envs ``idx`` (an index array) as a smaller batch (copies)."""
        hmax = self.health_max if self.health_max.ndim == 1 else self.health_max[idx]
        return Units(self.n_agents, self.pos[idx], self.health[idx], self.shield[idx], self.cooldown[idx],
                     self.energy[idx], hmax)

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


class SmacFeatures:
    """Obs/state/avail/reward/end-code of one map under one set of options (stateless per step)."""

    def __init__(self, spec: MapSpec, opts: SmacOptions, compiled: bool = True) -> None:
        self.spec, self.opts = spec, opts
        self.compiled = compiled  # observe() through the compiled kernel (else the NumPy methods)
        self.n_agents, self.n_enemies = spec.n_agents, spec.n_enemies
        self.n_actions = N_ACTIONS_NO_ATTACK + self.n_enemies
        self.bits = spec.unit_type_bits
        self.s_a = int(spec.ally_race == "P")
        self.s_e = int(spec.enemy_race == "P")
        mmm = spec.map_type == "MMM"
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
            raise ValueError(f"{spec.name}: a Medivac heals ally j with action 6+j, "
                             "so n_agents must be <= n_enemies")
        n = self.n_agents
        others = [[j for j in range(n) if j != i] for i in range(n)]
        self._others = np.array(others, dtype=np.int64).reshape(n, n - 1)
        self._rows = np.arange(n)[:, None]
        self._ally_onehot_others = self.ally_onehot[self._others]  # (n, n-1, bits)
        self._medivac_idx = np.flatnonzero(self.ally_medivac)
        self.grid = spec.pathing_grid
        self.height = (spec.terrain_height if spec.terrain_height is not None
                       else np.zeros(spec.map_size, dtype=float))  # flat when the map gives no heights
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
        o = opts
        self._kernel_args = (self.ally_medivac, self.ally_onehot, self.enemy_onehot, self.ally_max_shield,
                             self.enemy_max_shield, self.ally_max_cd, self._walk_in, self._walk_out,
                             self._height_pad, _PAD, _SURROUND, self._move_dirs, float(self.map_x),
                             float(self.map_y), spec.episode_limit, o.obs_all_health, o.own_health,
                             o.obs_last_action, o.obs_pathing_grid, o.obs_terrain_height,
                             o.obs_timestep_number, o.state_last_action, o.state_timestep_number, self.s_a,
                             self.s_e, SIGHT_RANGE, SHOOT_RANGE)
        self._centre = np.array([self.map_x / 2, self.map_y / 2])
        self._size = np.array([self.map_x, self.map_y], dtype=float)
        o = opts
        self.move_size = 4 + 8 * o.obs_pathing_grid + 9 * o.obs_terrain_height
        self.enemy_feat_size = 4 + self.bits + o.obs_all_health * (1 + self.s_e)
        self.ally_feat_size = (4 + self.bits + o.obs_all_health * (1 + self.s_a)
                               + o.obs_last_action * self.n_actions)
        self.own_size = self.bits + o.own_health * (1 + self.s_a)
        self.obs_size = (self.move_size + self.n_enemies * self.enemy_feat_size
                         + (n - 1) * self.ally_feat_size + self.own_size + o.obs_timestep_number)
        self.ally_state_size = 4 + self.s_a + self.bits
        self.enemy_state_size = 3 + self.s_e + self.bits
        if o.obs_instead_of_state:
            self.state_size = n * self.obs_size
        else:
            self.state_size = (n * self.ally_state_size + self.n_enemies * self.enemy_state_size
                               + o.state_last_action * n * self.n_actions + o.state_timestep_number)
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
        obs[:, col:col + m * fe].reshape(n, m, fe)[..., fe - b:] = self.enemy_onehot
        col += m * fe
        fa = self.ally_feat_size
        ab = obs[:, col:col + (n - 1) * fa].reshape(n, n - 1, fa)
        ab[..., 0] = 1.0
        k = 4 + o.obs_all_health * (1 + self.s_a)
        ab[..., k:k + b] = self._ally_onehot_others
        col += (n - 1) * fa
        own = col + o.own_health * (1 + self.s_a)
        obs[:, own:own + b] = self.ally_onehot
        state = np.zeros(self.state_size, dtype=np.float32)
        if not o.obs_instead_of_state:
            fa, fe = self.ally_state_size, self.enemy_state_size
            state[:n * fa].reshape(n, fa)[:, fa - b:] = self.ally_onehot
            state[n * fa:n * fa + m * fe].reshape(m, fe)[:, fe - b:] = self.enemy_onehot
        return obs, state

    # ================================================================ batched (E envs) — the implementation
    # Per step: batch_geometry once, then batch_avail, batch_obs, batch_state (and batch_reward,
    # batch_end_code). Every method is a fixed, small number of NumPy calls whatever E and the unit counts.
    def batch_geometry(self, u: Units) -> Geometry:
        """Distances/offsets agent → every unit, aliveness, health fractions and sight.

        Distances are sqrt(dx² + dy²) in float64: SMAC's math.hypot up to the last bit (np.hypot is
        ~10x slower here), the same for every caller.
        """
        n, pos = self.n_agents, u.pos
        E, U = pos.shape[0], pos.shape[1]
        g = np.empty((3, E, n, U))
        xy = pos.transpose(2, 0, 1)  # (2, E, U)
        np.subtract(xy[:, :, None, :], xy[:, :, :n, None], out=g[1:])
        sq = g[1:] * g[1:]
        np.sqrt(sq[0] + sq[1], out=g[0])
        alive = u.health > 0
        vis = (g[0] < SIGHT_RANGE) & alive[:, None, :]
        return Geometry(g, alive, u.health / u.health_max, vis)

    def _lookup(self, padded: np.ndarray, xy: np.ndarray) -> np.ndarray:
        """Values of a padded grid at integer cells ``xy[..., 0:2]`` of the map; outside cells give the pad
        value (indices are clamped into the padding)."""
        ij = np.minimum(np.maximum(xy + _PAD, 0), self._pad_hi)
        return padded[ij[..., 0], ij[..., 1]]

    def observe(self, u: Units, last_action: np.ndarray, steps: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(avail (E, n, A) int64, obs (E, n, O) float32, state (E, S) float32) of E envs: one compiled
        call (:mod:`marl.envs.smac.fast_features`) or, with ``compiled=False``, the NumPy reference."""
        if not self.compiled:
            geo = self.batch_geometry(u)
            avail = self.batch_avail(u, geo)
            obs = self.batch_obs(u, avail, last_action, steps, geo)
            return avail, obs, self.batch_state(u, last_action, steps, obs, geo)
        from marl.envs.smac.fast_features import observe_kernel

        o, n, E = self.opts, self.n_agents, u.n_envs
        avail = np.zeros((E, n, self.n_actions), dtype=np.int64)
        obs = np.zeros((E, n, self.obs_size), dtype=np.float32)
        state = np.zeros((E, 0 if o.obs_instead_of_state else self.state_size), dtype=np.float32)
        f64 = np.float64
        hmax = u.health_max.reshape(-1, u.health.shape[1]).astype(f64, copy=False)  # (1 or E, U)
        observe_kernel(n, u.pos.astype(f64, copy=False), u.health.astype(f64, copy=False),
                       u.shield.astype(f64, copy=False), u.cooldown.astype(f64, copy=False),
                       u.energy.astype(f64, copy=False), hmax, last_action.astype(np.float32, copy=False),
                       np.asarray(steps, dtype=np.int64), *self._kernel_args, avail, obs, state)
        if o.obs_instead_of_state:
            state = obs.reshape(E, self.state_size).copy()
        return avail, obs, state

    def batch_avail(self, u: Units, geo: Geometry) -> np.ndarray:
        """(E, n_agents, n_actions) int64 0/1 mask (spec §4)."""
        n = self.n_agents
        alive, alive_a = geo.alive, geo.alive[:, :n]
        avail = np.empty((u.n_envs, n, self.n_actions), dtype=np.int64)
        avail[..., :2] = self._noop_stop
        # Move d: the cell int(pos + 1·d) (python int() truncates towards zero) in bounds and walkable.
        ahead = np.trunc(u.pos[:, :n, None, :] + (MOVE_AMOUNT / 2) * _DIRS).astype(np.int64)
        avail[..., 2:6] = self._lookup(self._walk_in, ahead)
        avail[..., 6:] = (geo.g[0, :, :, n:] <= SHOOT_RANGE) & alive[:, None, n:]
        if len(self._medivac_idx):
            # A Medivac's 6+j heals ally j (alive, not a Medivac, in range); it attacks no enemy.
            med = self._medivac_idx
            heal = (geo.dist[:, med, :n] <= SHOOT_RANGE) & (alive_a & ~self.ally_medivac)[:, None, :]
            avail[:, med, 6:] = 0
            avail[:, med, 6:6 + n] = heal
        if not alive_a.all():
            avail[~alive_a] = self._dead_avail  # dead: only no-op
        return avail

    def batch_obs(self, u: Units, avail: np.ndarray, last_action: np.ndarray, steps: np.ndarray,
                  geo: Geometry) -> np.ndarray:
        """(E, n_agents, obs_size) float32 observations (spec §3.1); dead agents get zeros.

        ``last_action`` (E, n_agents, n_actions) one-hot, ``steps`` (E,) steps taken this episode.
        """
        o, n, m, b = self.opts, self.n_agents, self.n_enemies, self.bits
        E, hfrac, vis = u.n_envs, geo.hfrac, geo.vis
        g = (geo.g / SIGHT_RANGE).transpose(1, 2, 3, 0)  # (E, n, U, 3): distance, dx, dy over sight
        out = np.empty((E, n, self.obs_size), dtype=np.float32)
        out[...] = self._obs_template  # the constant entries: type one-hots, the allies' "visible" 1
        out[..., :4] = avail[..., 2:6]
        col = 4
        if o.obs_pathing_grid or o.obs_terrain_height:
            cell = np.trunc(u.pos[:, :n]).astype(np.int64)[:, :, None, :] + _SURROUND  # (E, n, 8, 2)
            if o.obs_pathing_grid:
                out[..., col:col + 8] = self._lookup(self._walk_out, cell)
                col += 8
            if o.obs_terrain_height:
                out[..., col:col + 8] = self._lookup(self._height_pad, cell)
                out[..., col + 8] = self._lookup(self._height_pad, cell[:, :, 0] - _SURROUND[0])
                col += 9
        # Enemy block: only visible rows (alive, distance < sight) are filled. Column 0 copies avail[6+j],
        # which for a Medivac is its heal bit for ally j (SMAC does the same).
        fe = self.enemy_feat_size
        eb = out[..., col:col + m * fe].reshape(E, n, m, fe)
        col += m * fe
        eb[..., 0] = avail[..., 6:6 + m]
        eb[..., 1:4] = g[:, :, n:]
        if o.obs_all_health:
            eb[..., 4] = hfrac[:, None, n:]
            if self.s_e:
                eb[..., 5] = (u.shield[:, n:] / self.enemy_max_shield)[:, None, :]
        eb *= vis[:, :, n:, None]
        # Ally block: the other agents in increasing id.
        fa = self.ally_feat_size
        ab = out[..., col:col + (n - 1) * fa].reshape(E, n, n - 1, fa)
        col += (n - 1) * fa
        others, rows = self._others, self._rows
        ab[..., 1:4] = g[:, rows, others]
        k = 4
        if o.obs_all_health:
            ab[..., 4] = hfrac[:, others]
            k += 1
            if self.s_a:
                ab[..., 5] = (u.shield[:, :n] / self.ally_max_shield)[:, others]
                k += 1
        if o.obs_last_action:
            ab[..., k + b:] = last_action[:, others]
        ab *= vis[:, rows, others][..., None]
        # Own block.
        if o.own_health:
            out[..., col] = hfrac[:, :n]
            if self.s_a:
                out[..., col + 1] = u.shield[:, :n] / self.ally_max_shield
        if o.obs_timestep_number:
            out[..., -1] = (np.asarray(steps) / self.spec.episode_limit)[:, None]
        alive_a = geo.alive[:, :n]
        if not alive_a.all():
            out[~alive_a] = 0.0
        return out

    def batch_state(self, u: Units, last_action: np.ndarray, steps: np.ndarray,
                    obs: np.ndarray | None = None, geo: Geometry | None = None) -> np.ndarray:
        """(E, state_size) float32 global state (spec §3.2); ``obs`` is used with ``obs_instead_of_state``."""
        E = u.n_envs
        if self.opts.obs_instead_of_state:
            if obs is None:
                raise ValueError("obs_instead_of_state needs the observations")
            return obs.reshape(E, self.state_size).astype(np.float32)
        n, m, fa, fe = self.n_agents, self.n_enemies, self.ally_state_size, self.enemy_state_size
        if geo is None:
            alive, hfrac = u.health > 0, u.health / u.health_max
        else:
            alive, hfrac = geo.alive, geo.hfrac
        rel = (u.pos - self._centre) / self._size
        out = np.empty((E, self.state_size), dtype=np.float32)
        out[:] = self._state_template  # the type one-hots (zero elsewhere)
        ally = out[:, :n * fa].reshape(E, n, fa)
        ally[..., 0] = hfrac[:, :n]
        cd = np.where(self.ally_medivac, u.energy[:, :n], u.cooldown[:, :n]) if self._any_medivac \
            else u.cooldown[:, :n]
        ally[..., 1] = cd / self.ally_max_cd
        ally[..., 2:4] = rel[:, :n]
        if self.s_a:
            ally[..., 4] = u.shield[:, :n] / self.ally_max_shield
        end = n * fa
        enemy = out[:, end:end + m * fe].reshape(E, m, fe)
        enemy[..., 0] = hfrac[:, n:]
        enemy[..., 1:3] = rel[:, n:]
        if self.s_e:
            enemy[..., 3] = u.shield[:, n:] / self.enemy_max_shield
        if not alive.all():
            ally[~alive[:, :n]] = 0.0
            enemy[~alive[:, n:]] = 0.0
        end += m * fe
        if self.opts.state_last_action:
            out[:, end:end + n * self.n_actions] = last_action.reshape(E, n * self.n_actions)
        if self.opts.state_timestep_number:
            out[:, -1] = np.asarray(steps) / self.spec.episode_limit
        return out

    def batch_visibility(self, u: Units, geo: Geometry) -> np.ndarray:
        """(E, n_agents, n_agents + n_enemies) bool: living agent i sees living unit k within sight."""
        n = self.n_agents
        vis = geo.vis & geo.alive[:, :n, None]
        vis[:, np.arange(n), np.arange(n)] = False
        return vis

    def batch_end_code(self, u: Units) -> np.ndarray:
        """(E,) int: +1 win, −1 loss, 0 draw, :data:`RUNNING` (spec §1.1, incl. SMAC's MMM Medivac rules).

        On MMM maps the loss test ("every living ally is a Medivac") also holds with no ally alive and
        comes first, so a mutual wipe-out there is a loss, as in SMAC.
        """
        n = self.n_agents
        alive = u.health > 0
        if self.spec.map_type != "MMM":
            any_a, any_e = alive[:, :n].any(-1), alive[:, n:].any(-1)
            return self._end_lut[any_a.view(np.int8), any_e.view(np.int8)]
        na, ne = alive[:, :n].sum(-1), alive[:, n:].sum(-1)
        loss = ((na == 0) & (ne > 0)) | ~(alive[:, :n] & ~self.ally_medivac).any(-1)
        win = ((na > 0) & (ne == 0)) | ((ne == 1) & ~(alive[:, n:] & ~self.enemy_medivac).any(-1))
        draw = (na == 0) & (ne == 0)
        return np.where(loss, -1, np.where(win, 1, np.where(draw, 0, RUNNING)))

    def batch_reward(self, prev: Units, cur: Units, dead: np.ndarray) -> np.ndarray:
        """(E,) dense per-step reward before win/loss bonus and scaling (spec §5).

        ``dead`` (E, U) bool is SMAC's death tracker (allies then enemies), updated in place.
        """
        o = self.opts
        if o.reward_sparse:
            return np.zeros(cur.n_envs)
        neg = o.reward_negative_scale
        prev_hp = prev.health + prev.shield
        just_died = (cur.health <= 0) > dead  # dies now, not counted before
        # damage: a unit dying now lost its previous health+shield; one counted dead before, nothing
        dmg = np.where(just_died, prev_hp, prev_hp - cur.health - cur.shield)
        dmg[dead] = 0.0
        dead |= just_died
        dmg_ally, dmg_enemy = np.add.reduceat(dmg, self.side_bounds, axis=1).T
        died_ally, died_enemy = np.add.reduceat(just_died, self.side_bounds, axis=1, dtype=np.int64).T
        death_reward = o.reward_death_value * died_enemy
        if o.reward_only_positive:
            return np.abs(dmg_enemy + death_reward)  # |·| turns net regeneration into positive reward
        death_reward = death_reward - o.reward_death_value * neg * died_ally
        return dmg_enemy + death_reward - neg * dmg_ally

    def reward_and_end(self, prev: Units, cur: Units, dead: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(reward (E,) before the end bonus, end code (E,), dead allies (E,), dead enemies (E,)).

        Updates the death tracker ``dead`` in place. One compiled call, or with ``compiled=False`` the NumPy
        methods (:meth:`batch_reward`, :meth:`batch_end_code`)."""
        if not self.compiled:
            reward = self.batch_reward(prev, cur, dead)
            dead_a, dead_e = np.add.reduceat(cur.health <= 0, self.side_bounds, axis=1, dtype=np.int64).T
            return reward, self.batch_end_code(cur), dead_a, dead_e
        from marl.envs.smac.fast_features import reward_end_kernel

        o, E, f64 = self.opts, cur.n_envs, np.float64
        reward, code = np.empty(E), np.empty(E, dtype=np.int64)
        n_dead = np.zeros((E, 2), dtype=np.int64)
        reward_end_kernel(self.n_agents, prev.health.astype(f64, copy=False),
                          prev.shield.astype(f64, copy=False), cur.health.astype(f64, copy=False),
                          cur.shield.astype(f64, copy=False), dead,
                          self.spec.map_type == "MMM", self.ally_medivac, self.enemy_medivac, o.reward_sparse,
                          o.reward_only_positive, o.reward_death_value, o.reward_negative_scale, reward, code,
                          n_dead)
        return reward, code, n_dead[:, 0], n_dead[:, 1]

    def batch_heuristic(self, u: Units, targets: list[list[int | None]], avail: np.ndarray, rest: bool,
                        geo: Geometry) -> np.ndarray:
        """SMAC's ``heuristic_ai`` actions (E, n_agents) for E envs (see :func:`heuristic_actions`)."""
        return heuristic_actions(self, u, targets, avail, rest, geo)

    # ================================================================ one env (a UnitTable) = a batch of 1
    def geometry(self, t: UnitTable) -> Geometry:
        """Geometry of one table (a batch of one env)."""
        return self.batch_geometry(Units.from_table(t))

    def avail_actions(self, t: UnitTable, geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, n_actions) int64 0/1 mask (spec §4)."""
        u = Units.from_table(t)
        return self.batch_avail(u, geo or self.batch_geometry(u))[0]

    def observations(self, t: UnitTable, avail: np.ndarray, last_action: np.ndarray, steps: int,
                     geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, obs_size) float32 observations (spec §3.1); dead agents get zeros."""
        u = Units.from_table(t)
        last = np.asarray(last_action)[None]
        return self.batch_obs(u, np.asarray(avail)[None], last, np.array([steps]),
                              geo or self.batch_geometry(u))[0]

    def state(self, t: UnitTable, last_action: np.ndarray, steps: int,
              obs: np.ndarray | None = None) -> np.ndarray:
        """Global state vector (spec §3.2), float32; ``obs`` is used with ``obs_instead_of_state``."""
        return self.batch_state(Units.from_table(t), np.asarray(last_action)[None], np.array([steps]),
                                None if obs is None else np.asarray(obs)[None])[0]

    def visibility(self, t: UnitTable, geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, n_agents + n_enemies) bool: living agent i sees living unit k within sight (no self)."""
        u = Units.from_table(t)
        return self.batch_visibility(u, geo or self.batch_geometry(u))[0]

    def end_code(self, t: UnitTable) -> int | None:
        """+1 win, −1 loss, 0 draw, None running (see :meth:`batch_end_code`)."""
        code = int(self.batch_end_code(Units.from_table(t))[0])
        return None if code == RUNNING else code

    def battle_reward(self, prev: UnitTable, cur: UnitTable, dead_allies: np.ndarray,
                      dead_enemies: np.ndarray) -> float:
        """Dense per-step reward before win/loss bonus and scaling (spec §5).

        ``dead_allies``/``dead_enemies`` are SMAC's death trackers (bool arrays), updated in place.
        """
        dead = np.concatenate([dead_allies, dead_enemies])[None]
        r = float(self.batch_reward(Units.from_table(prev), Units.from_table(cur), dead)[0])
        dead_allies[:] = dead[0, :self.n_agents]
        dead_enemies[:] = dead[0, self.n_agents:]
        return r

    def heuristic_actions(self, t: UnitTable, targets: list[int | None], avail: np.ndarray,
                          rest: bool, geo: Geometry | None = None) -> np.ndarray:
        """SMAC's ``heuristic_ai`` for one env (see :meth:`batch_heuristic`); ``targets`` updated in place."""
        u = Units.from_table(t)
        return self.batch_heuristic(u, [targets], np.asarray(avail)[None], rest,
                                    geo or self.batch_geometry(u))[0]
