"""Embedded StarCraft-like combat engine: :class:`BatchedSimEngine` (many envs) and :class:`SimEngine`.

Seeding (documented contract): a batch created with ``seed=s`` gives env ``e`` the derived seed
``s + e`` (:func:`env_seed`); every env owns an independent random stream seeded from its derived seed,
used for spawn noise, random enemy goals, cooldown jitter and the per-loop update order.  Hence env ``e``
of ``BatchedSimEngine(spec, n, s)`` produces exactly the same tables as ``SimEngine(spec, s + e)`` under
the same actions and the same resets.  ``SimEngine`` *is* a batch of one env.

Spawn layout: the first unit (in id order) of the units of one side that share a spawn point stands on
the point itself: SMAC creates each side at one point, the first unit is placed on it and the others
nearby because it is occupied (M. Samvelyan in oxwhirl/smac issue #91).  Where the others stand is the
game's placement search, whose pattern we have no source for: they fill, in id order, a compact square
grid (spacing = the largest radius among them x2 + 0.1) centred on the point as far as the first unit's
slot (the one nearest the centre) allows.  A grid point on a non-walkable cell is moved to the nearest
walkable cell centre; each reset adds uniform noise of +-``SPAWN_NOISE`` per axis (dropped if it would
put a ground unit on a blocked cell; no source for either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl.envs.smac.features import Units
from marl.envs.smac.sim.avail import avail_actions, battle_status
from marl.envs.smac.sim.physics import nav_table
from marl.envs.smac.sim.stepper import (
    ORDER_AMOVE,
    ORDER_BETWEEN,
    ORDER_GROUP,
    ORDER_NEAREST,
    ORDER_NONE,
    check_actions,
    sim_reset,
    sim_step,
    sim_step_parallel,
)
from marl.envs.smac.sim.units import (
    AIR,
    CLIFF_WALK,
    HEALER,
    N_STATE,
    PROPS,
    RADIUS,
    S_CD,
    S_EN,
    S_HP,
    S_SH,
    S_X,
    S_Y,
    SHIELD,
    type_ids,
)
from marl.envs.smac.sim.variants import N_V, sim_step_rules
from marl.envs.smac.threads import resolve_threads, with_threads
from marl.envs.smac.types import MEDIVAC_MAP_TYPES, MapSpec, SideTable, UnitTable

SPAWN_NOISE = 0.25
_ORDER_KINDS = {
    "none": ORDER_NONE,
    "attack_move": ORDER_AMOVE,
    "attack_move_between": ORDER_BETWEEN,
    "attack_group": ORDER_GROUP,
    "attack_nearest": ORDER_NEAREST,
}


_NAV_CACHE: dict[bytes, np.ndarray] = {}


def _nav_for(grid: np.ndarray) -> np.ndarray:
    """The (shared, read-only) geodesic distance table of a pathing grid, computed once per grid."""
    key = grid.tobytes() + bytes(str(grid.shape), "ascii")
    if key not in _NAV_CACHE:
        nav = nav_table(grid)
        nav.setflags(write=False)
        _NAV_CACHE[key] = nav
    return _NAV_CACHE[key]


class SharedNav:
    """Copies and pickles of an engine share its grid's cached, read-only ``nav`` table (:func:`_nav_for`)
    instead of carrying a writable copy of it: Numba types an array by its read-only flag too, so a writable
    table would compile the whole engine a second time (``sim/jit.py``)."""

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "nav"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.nav = _nav_for(self.grid)


def env_seed(seed: int, env: int) -> int:
    """Derived seed of env ``env`` in a batch seeded ``seed`` (the single-engine equivalent)."""
    return (int(seed) + int(env)) % (1 << 64)


def spawn_layout(spec: MapSpec) -> np.ndarray:
    """Base (U, 2) positions, allies then enemies, before the per-reset noise."""
    grid = np.asarray(spec.pathing_grid, dtype=bool)
    walk_x, walk_y = np.nonzero(grid)
    out = []
    for enemy, groups in ((False, spec.allies), (True, spec.enemies)):
        units = [(g.unit, tuple(map(float, g.spawn))) for g in groups for _ in range(g.count)]
        pts = np.zeros((len(units), 2))
        by_point: dict[tuple[float, float], list[int]] = {}
        for k, (_, p) in enumerate(units):
            by_point.setdefault(p, []).append(k)
        for (sx, sy), ids in by_point.items():
            types = type_ids(tuple(units[k][0] for k in ids), enemy)
            gap = 2.0 * PROPS[types, RADIUS].max() + 0.1
            cols = math.ceil(math.sqrt(len(ids)))
            rows = math.ceil(len(ids) / cols)
            slots = [(c - (cols - 1) / 2.0, (rows - 1) / 2.0 - r) for r in range(rows) for c in range(cols)]
            slots = slots[: len(ids)]
            first = min(range(len(slots)), key=lambda n: slots[n][0] ** 2 + slots[n][1] ** 2)
            slots.insert(0, slots.pop(first))  # the first unit takes the slot nearest the point...
            ox, oy = slots[0]
            for n, k in enumerate(ids):
                x = sx + (slots[n][0] - ox) * gap  # ...and the grid moves so that it stands on the point
                y = sy + (slots[n][1] - oy) * gap
                t = types[n]
                ground = PROPS[t, AIR] == 0 and PROPS[t, CLIFF_WALK] == 0
                inside = 0 <= x < grid.shape[0] and 0 <= y < grid.shape[1]
                if ground and len(walk_x) and not (inside and grid[int(x), int(y)]):
                    j = np.argmin((walk_x + 0.5 - x) ** 2 + (walk_y + 0.5 - y) ** 2)
                    x, y = walk_x[j] + 0.5, walk_y[j] + 0.5
                pts[k] = (x, y)
        out.append(pts)
    return np.concatenate(out, axis=0)


@dataclass
class BatchedUnitTable:
    """Both sides of E envs at one moment; arrays have a leading env axis, units allies-then-enemies."""

    ally_types: tuple[str, ...]
    enemy_types: tuple[str, ...]
    state: np.ndarray  # (E, U, N_STATE) a copy of the engine state (columns units.S_*)
    health_max: np.ndarray  # (U,)
    shield_max: np.ndarray  # (U,)

    @property
    def pos(self) -> np.ndarray:
        """(E, U, 2) positions."""
        return self.state[:, :, S_X : S_Y + 1]

    @property
    def health(self) -> np.ndarray:
        """(E, U) health, 0 = dead."""
        return self.state[:, :, S_HP]

    @property
    def shield(self) -> np.ndarray:
        """(E, U) shields."""
        return self.state[:, :, S_SH]

    @property
    def cooldown(self) -> np.ndarray:
        """(E, U) weapon cooldown left, game loops."""
        return self.state[:, :, S_CD]

    @property
    def energy(self) -> np.ndarray:
        """(E, U) Medivac energy (0 for other units)."""
        return self.state[:, :, S_EN]

    @property
    def n_agents(self) -> int:
        return len(self.ally_types)

    def units(self) -> Units:
        """All envs as feature :class:`Units` (views of ``state``, no copy)."""
        s = self.state
        return Units(
            self.n_agents,
            s[:, :, S_X : S_Y + 1],
            s[:, :, S_HP],
            s[:, :, S_SH],
            s[:, :, S_CD],
            s[:, :, S_EN],
            self.health_max,
        )

    def table(self, e: int) -> UnitTable:
        """The :class:`UnitTable` of env ``e`` (arrays are copies)."""
        na = self.n_agents
        sides = []
        for names, sl in ((self.ally_types, slice(0, na)), (self.enemy_types, slice(na, None))):
            sides.append(
                SideTable(
                    names,
                    self.pos[e, sl].copy(),
                    self.health[e, sl].copy(),
                    self.health_max[sl].copy(),
                    self.shield[e, sl].copy(),
                    self.shield_max[sl].copy(),
                    self.cooldown[e, sl].copy(),
                    self.energy[e, sl].copy(),
                )
            )
        return UnitTable(sides[0], sides[1])


class BatchedSimEngine(SharedNav):
    """``n_envs`` independent copies of one map stepped together by one compiled call."""

    def __init__(
        self,
        spec: MapSpec,
        n_envs: int,
        seed: int | None = None,
        threads: int = 1,
        rules: np.ndarray | None = None,
        first_loop: bool = True,
    ):
        """``rules``: candidate targeting rules (``variants.parse_rules``; not the default, see
        :mod:`~marl.envs.smac.sim.variants`); ``None`` or all zero runs the default engine unchanged.
        ``first_loop``: end each reset with the loop SMAC's reset lets pass before its first observation
        (``stepper._first_loop``); SMACv2's reset has none."""
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        self.threads = resolve_threads(threads)
        if spec.enemy_order.kind not in _ORDER_KINDS:
            raise ValueError(
                f"unknown enemy order kind {spec.enemy_order.kind!r}; allowed: {list(_ORDER_KINDS)}"
            )
        self.spec = spec
        self.n_envs = n_envs
        self.first_loop = bool(first_loop)
        self.n_agents = spec.n_agents
        self.n_enemies = spec.n_enemies
        self.ally_types, self.enemy_types = spec.ally_types, spec.enemy_types
        self.utype = np.concatenate([type_ids(spec.ally_types), type_ids(spec.enemy_types, enemy=True)])
        self.grid = np.ascontiguousarray(spec.pathing_grid, dtype=np.bool_)
        if self.grid.ndim != 2:
            raise ValueError(f"pathing_grid must be 2-D (x, y), got shape {self.grid.shape}")
        self.nav = _nav_for(self.grid)
        self.base_pos = spawn_layout(spec)
        order = spec.enemy_order
        self._order = _ORDER_KINDS[order.kind]
        target = order.target if order.target is not None else (0.0, 0.0)
        self._target = np.array(target, dtype=np.float64)
        self._target2 = np.array(order.target2 if order.target2 is not None else target, dtype=np.float64)
        self._heal_mask = PROPS[self.utype[: self.n_agents], HEALER] > 0
        e, u = n_envs, len(self.utype)
        self.S = np.zeros((e, u, N_STATE))  # see units.S_* for the columns
        self.rng = np.zeros(e, dtype=np.uint64)
        self.health_max = PROPS[self.utype, 0].copy()
        self.shield_max = PROPS[self.utype, SHIELD].copy()
        self.rules = None if rules is None or not np.any(rules) else np.asarray(rules, dtype=np.int64)
        self.V = None if self.rules is None else np.full((e, u, N_V), -1.0)  # the rules' unit state
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        """Reseed every env: env ``e`` gets :func:`env_seed` (seed, e); ``None`` draws fresh entropy."""
        if seed is None:
            seed = int(np.random.SeedSequence().entropy) % (1 << 63)
        self.base_seed = int(seed)
        for e in range(self.n_envs):
            self.rng[e] = np.uint64(env_seed(seed, e))

    @property
    def pos(self) -> np.ndarray:
        """(E, U, 2) unit positions (a view of the state)."""
        return self.S[:, :, S_X : S_Y + 1]

    @property
    def hp(self) -> np.ndarray:
        """(E, U) current health (a view of the state)."""
        return self.S[:, :, S_HP]

    def reset(self) -> BatchedUnitTable:
        """Respawn every env."""
        return self.reset_envs(np.ones(self.n_envs, dtype=bool))

    def reset_envs(self, mask: np.ndarray) -> BatchedUnitTable:
        """Respawn the envs where ``mask`` (bool, (n_envs,)) is True; the others are untouched."""
        mask = np.asarray(mask, dtype=np.bool_)
        if mask.shape != (self.n_envs,):
            raise ValueError(f"mask must have shape ({self.n_envs},), got {mask.shape}")
        if self.V is not None:
            self.V[mask] = -1.0
        sim_reset(
            mask,
            self.n_agents,
            PROPS,
            self.utype,
            self.grid,
            self.nav,
            self.base_pos,
            SPAWN_NOISE,
            self._order,
            self._target,
            self._target2,
            self.S,
            self.rng,
            self.first_loop,
        )
        return self.snapshot()

    def step(self, actions_EN: np.ndarray, mask: np.ndarray | None = None) -> BatchedUnitTable:
        """Apply SMAC action ints (n_envs, n_agents) and advance every env by one agent step (8 loops).

        With ``mask`` (bool, (n_envs,)) only those envs are stepped; the others keep their state and their
        random stream (their actions are ignored), exactly as an unstepped :class:`SimEngine`.
        """
        a = np.asarray(actions_EN)
        if a.shape != (self.n_envs, self.n_agents):
            raise ValueError(f"actions must have shape ({self.n_envs}, {self.n_agents}), got {a.shape}")
        a = a.astype(np.int64, copy=False)
        idx = None
        if mask is not None:
            mask = np.asarray(mask, dtype=np.bool_)
            if mask.shape != (self.n_envs,):
                raise ValueError(f"mask must have shape ({self.n_envs},), got {mask.shape}")
            if not mask.all():
                idx = np.flatnonzero(mask)
        rows = np.arange(self.n_envs) if idx is None else idx
        sub = a if idx is None else a[idx]
        bad = check_actions(sub, self.n_agents, 6 + self.n_enemies, PROPS, self.utype)
        if bad >= 0:
            k, i = divmod(bad, self.n_agents)
            hi = 6 + (min(self.n_agents, self.n_enemies) if self._heal_mask[i] else self.n_enemies)
            raise ValueError(
                f"actions must lie in [0, {hi}) for agent {i} ({self.spec.ally_types[i]}); "
                f"env {rows[k]} got {sub[k, i]}"
            )
        if idx is None:
            self._sim_step(a, self.S, self.rng, self.V)
        elif len(idx):  # the envs are independent: step a compact copy of the chosen ones, write it back
            S, rng = self.S[idx], self.rng[idx]
            V = None if self.V is None else self.V[idx]
            self._sim_step(sub, S, rng, V)
            self.S[idx], self.rng[idx] = S, rng
            if V is not None:
                self.V[idx] = V
        return self.snapshot()

    def _sim_step(self, actions: np.ndarray, S: np.ndarray, rng: np.ndarray, V: np.ndarray | None) -> None:
        """One compiled step of the envs in ``S``: across ``self.threads`` threads when there are several
        envs, else serially (same results either way); with candidate rules, serially on their kernel."""
        args = (actions, self.n_agents, PROPS, self.utype, self.grid, self.nav, self._order, S, rng)
        if self.rules is not None:
            sim_step_rules(*args, self.rules, V)
        elif self.threads > 1 and S.shape[0] > 1:
            with_threads(self.threads, sim_step_parallel, *args)
        else:
            sim_step(*args)

    def avail_actions(self) -> np.ndarray:
        """SMAC's available actions (n_envs, n_agents, 6 + n_enemies) bool for the current state."""
        out = np.zeros((self.n_envs, self.n_agents, 6 + self.n_enemies), dtype=np.bool_)
        return avail_actions(self.n_agents, PROPS, self.utype, self.grid, self.S, out)

    def battle_status(self) -> np.ndarray:
        """(n_envs,) int: 0 running, 1 won, 2 lost, 3 draw (SMAC's end rule, MMM Medivac rule included)."""
        return battle_status(
            self.n_agents, PROPS, self.utype, self.S, self.spec.map_type in MEDIVAC_MAP_TYPES
        )

    def snapshot(self) -> BatchedUnitTable:
        """A copy of the current state of all envs."""
        return BatchedUnitTable(
            self.ally_types, self.enemy_types, self.S.copy(), self.health_max, self.shield_max
        )


class SimEngine:
    """One env of the embedded engine: the contract used by ``StarCraft2Env`` (a batch of one)."""

    def __init__(
        self, spec: MapSpec, seed: int | None = None, rules: np.ndarray | None = None, first_loop: bool = True
    ):
        self._batch = BatchedSimEngine(spec, 1, seed, rules=rules, first_loop=first_loop)
        self.spec = spec

    def reset(self) -> UnitTable:
        """Fresh spawn with small random placement noise."""
        return self._batch.reset().table(0)

    def step(self, actions_N: np.ndarray) -> UnitTable:
        """Apply one SMAC action per agent and advance 8 game loops."""
        return self._batch.step(np.asarray(actions_N).reshape(1, -1)).table(0)

    def seed(self, seed: int) -> None:
        """Reseed the engine's own random stream."""
        self._batch.seed(seed)
