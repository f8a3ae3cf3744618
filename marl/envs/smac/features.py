"""SMAC's semantics, once, for any engine: observations, state, available actions, reward, episode end.

Everything here is computed from a :class:`MapSpec`, the option flags (:class:`SmacOptions`) and
:class:`UnitTable` s (the current one and, for the reward, the previous one); nothing knows which engine
produced a table. Layouts, normalisations and quirks follow oxwhirl/smac v1 (spec
/work/shared/specs/smac.md §1.1, §3, §4, §5). The n×m geometry is vectorised with NumPy.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl.envs.smac.types import MapSpec, SideTable, UnitTable

SIGHT_RANGE = 9.0
SHOOT_RANGE = 6.0
MOVE_AMOUNT = 2.0
N_ACTIONS_NO_ATTACK = 6  # no-op, stop, north, south, east, west
# Weapon cooldown normalisers in game loops (the Medivac's entry normalises its energy) [S].
MAX_COOLDOWN = {"marine": 15, "marauder": 25, "medivac": 200, "stalker": 35, "zealot": 22, "colossus": 24,
                "hydralisk": 10, "zergling": 11, "baneling": 1}
DEFAULT_MAX_COOLDOWN = 15
MAX_SHIELD = {"stalker": 80.0, "zealot": 50.0, "colossus": 150.0}
# Nominal (health_max, shield_max) from the SMAC map files (spec §6); used for the static max_reward.
UNIT_MAX_HEALTH_SHIELD = {"marine": (45, 0), "marauder": (125, 0), "medivac": (150, 0), "stalker": (80, 80),
                          "zealot": (100, 50), "colossus": (200, 150), "hydralisk": (80, 0),
                          "zergling": (35, 0), "baneling": (30, 0), "spine_crawler": (300, 0)}
# Unit-type one-hot order per map type. Allies follow the RL-unit ids; enemies the stock ids, which in
# stalkers_and_zealots maps gives zealot 0, stalker 1 (SMAC keeps this quirk, so do we; spec §3.3).
_ALLY_TYPE_ORDER = {"MMM": ("marauder", "marine", "medivac"),
                    "stalkers_and_zealots": ("stalker", "zealot"),
                    "colossi_stalkers_zealots": ("colossus", "stalker", "zealot"),
                    "bane": ("baneling", "zergling")}
_ENEMY_TYPE_ORDER = {**_ALLY_TYPE_ORDER, "stalkers_and_zealots": ("zealot", "stalker")}
# (dx, dy) of SMAC's surrounding points (2·move_amount and move_amount offsets) for pathing/height obs.
_SURROUND = np.array([(0, 4), (0, -4), (4, 0), (-4, 0), (2, 2), (-2, -2), (2, -2), (-2, 2)], dtype=np.int64)
_DIRS = np.array([(0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 0.0)])  # north, south, east, west


@dataclass(frozen=True)
class SmacOptions:
    """SMAC's environment flags with SMAC's defaults (``StarCraft2Env(**flags)``)."""

    obs_all_health: bool = True
    obs_own_health: bool = True
    obs_last_action: bool = False
    obs_pathing_grid: bool = False
    obs_terrain_height: bool = False
    obs_timestep_number: bool = False
    state_last_action: bool = True
    state_timestep_number: bool = False
    obs_instead_of_state: bool = False
    reward_sparse: bool = False
    reward_only_positive: bool = True
    reward_scale: bool = True
    reward_scale_rate: float = 20.0
    reward_death_value: float = 10.0
    reward_win: float = 200.0
    reward_defeat: float = 0.0
    reward_negative_scale: float = 0.5
    continuing_episode: bool = False
    heuristic_ai: bool = False
    heuristic_rest: bool = False

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" and not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"SMAC flag {f.name} must be a bool, got {v!r}")
            if f.type == "float":
                if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
                    raise ValueError(f"SMAC flag {f.name} must be a number, got {v!r}")
                object.__setattr__(self, f.name, float(v))
        if self.reward_scale_rate <= 0:
            raise ValueError(f"reward_scale_rate must be > 0, got {self.reward_scale_rate}")

    @classmethod
    def from_flags(cls, **flags: Any) -> SmacOptions:
        """Build from keyword flags; an unknown flag names the nearest valid one."""
        valid = [f.name for f in dataclasses.fields(cls)]
        for k in flags:
            if k not in valid:
                close = difflib.get_close_matches(k, valid, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown SMAC flag {k!r}.{hint} Valid flags: {', '.join(valid)}")
        return cls(**flags)

    @property
    def own_health(self) -> bool:
        """SMAC forces the own-health features on whenever ``obs_all_health`` is on."""
        return self.obs_all_health or self.obs_own_health


@dataclass
class Geometry:
    """Pairwise offsets and distances of one table (computed once per step, shared by obs and avail)."""

    d_ae: np.ndarray  # (n_ag, n_en, 2) enemy − agent
    dist_ae: np.ndarray  # (n_ag, n_en)
    d_aa: np.ndarray  # (n_ag, n_ag, 2) other − agent
    dist_aa: np.ndarray  # (n_ag, n_ag)


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


def max_reward(spec: MapSpec, opts: SmacOptions, enemies: SideTable | None = None) -> float:
    """n_enemies·death_value + reward_win + Σ enemy (health_max + shield_max).

    With ``enemies`` (the table at the first reset, as SMAC does) the maxima come from the engine;
    otherwise from the nominal unit data.
    """
    if enemies is not None:
        pool = float(np.sum(enemies.health_max) + np.sum(enemies.shield_max))
    else:
        pool = float(sum(sum(UNIT_MAX_HEALTH_SHIELD[u]) for u in spec.enemy_types))
    return spec.n_enemies * opts.reward_death_value + opts.reward_win + pool


class SmacFeatures:
    """Obs/state/avail/reward/end-code of one map under one set of options (stateless per step)."""

    def __init__(self, spec: MapSpec, opts: SmacOptions) -> None:
        self.spec, self.opts = spec, opts
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
        if self.ally_medivac.any() and self.n_agents > self.n_enemies:
            raise ValueError(f"{spec.name}: a Medivac heals ally j with action 6+j, "
                             "so n_agents must be <= n_enemies")
        n = self.n_agents
        others = [[j for j in range(n) if j != i] for i in range(n)]
        self._others = np.array(others, dtype=np.int64).reshape(n, n - 1)
        self.grid = spec.pathing_grid
        self.height = (spec.terrain_height if spec.terrain_height is not None
                       else np.zeros(spec.map_size, dtype=float))  # flat when the map gives no heights
        self.map_x, self.map_y = spec.map_size
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
        types = [f"type_{i}" for i in range(self.bits)]
        self.agent_features = ["health", "energy/cooldown", "rel_x", "rel_y"] + ["shield"] * self.s_a + types
        self.enemy_features = ["health", "rel_x", "rel_y"] + ["shield"] * self.s_e + types

    # ---------------------------------------------------------------- geometry and availability
    def geometry(self, t: UnitTable) -> Geometry:
        """Pairwise offsets/distances of ``t`` (float64, like SMAC's math.hypot)."""
        pa = np.asarray(t.allies.pos, dtype=float)
        pe = np.asarray(t.enemies.pos, dtype=float)
        d_ae = pe[None, :, :] - pa[:, None, :]
        d_aa = pa[None, :, :] - pa[:, None, :]
        dist_ae, dist_aa = np.hypot(d_ae[..., 0], d_ae[..., 1]), np.hypot(d_aa[..., 0], d_aa[..., 1])
        return Geometry(d_ae, dist_ae, d_aa, dist_aa)

    def _walkable(self, x: np.ndarray, y: np.ndarray, outside: bool) -> np.ndarray:
        """Grid values at integer cells (x, y); ``outside`` where out of bounds."""
        inb = (x >= 0) & (x < self.map_x) & (y >= 0) & (y < self.map_y)
        vals = np.full(x.shape, outside, dtype=bool)
        vals[inb] = self.grid[x[inb], y[inb]]
        return vals

    def avail_actions(self, t: UnitTable, geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, n_actions) int64 0/1 mask (spec §4)."""
        geo = geo or self.geometry(t)
        alive_a, alive_e = t.allies.alive, t.enemies.alive
        avail = np.zeros((self.n_agents, self.n_actions), dtype=np.int64)
        avail[:, 1] = 1
        # Move d: the cell int(pos + 1·d) (python int() truncates towards zero) in bounds and walkable.
        ahead = np.trunc(t.allies.pos[:, None, :] + (MOVE_AMOUNT / 2) * _DIRS[None]).astype(np.int64)
        avail[:, 2:6] = self._walkable(ahead[..., 0], ahead[..., 1], outside=False)
        avail[:, 6:] = (geo.dist_ae <= SHOOT_RANGE) & alive_e[None, :]
        if self.ally_medivac.any():
            # A Medivac's 6+j heals ally j (alive, not a Medivac, in range); it attacks no enemy.
            med = np.flatnonzero(self.ally_medivac)
            heal = (geo.dist_aa[med] <= SHOOT_RANGE) & (alive_a & ~self.ally_medivac)[None, :]
            avail[med, 6:] = 0
            avail[med, 6:6 + self.n_agents] = heal
        avail[~alive_a] = 0
        avail[~alive_a, 0] = 1
        return avail

    # ---------------------------------------------------------------- observations and state
    def observations(self, t: UnitTable, avail: np.ndarray, last_action: np.ndarray, steps: int,
                     geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, obs_size) float32 observations (spec §3.1); dead agents get zeros."""
        geo = geo or self.geometry(t)
        o, n, m, b = self.opts, self.n_agents, self.n_enemies, self.bits
        al, en = t.allies, t.enemies
        out = np.zeros((n, self.obs_size), dtype=np.float32)
        out[:, :4] = avail[:, 2:6]
        col = 4
        if o.obs_pathing_grid or o.obs_terrain_height:
            cell = np.trunc(al.pos).astype(np.int64)
            px, py = cell[:, None, 0] + _SURROUND[None, :, 0], cell[:, None, 1] + _SURROUND[None, :, 1]
            if o.obs_pathing_grid:
                out[:, col:col + 8] = self._walkable(px, py, outside=True)
                col += 8
            if o.obs_terrain_height:
                hx, hy = np.concatenate([px, cell[:, :1]], 1), np.concatenate([py, cell[:, 1:]], 1)
                inb = (hx >= 0) & (hx < self.map_x) & (hy >= 0) & (hy < self.map_y)
                h = np.ones(hx.shape)
                h[inb] = self.height[hx[inb], hy[inb]]
                out[:, col:col + 9] = h
                col += 9
        # Enemy block: only visible rows (alive, distance < sight) are filled. Column 0 copies avail[6+j],
        # which for a Medivac is its heal bit for ally j (SMAC does the same).
        eb = out[:, col:col + m * self.enemy_feat_size].reshape(n, m, self.enemy_feat_size)
        col += m * self.enemy_feat_size
        eb[..., 0] = avail[:, 6:6 + m]
        eb[..., 1] = geo.dist_ae / SIGHT_RANGE
        eb[..., 2:4] = geo.d_ae / SIGHT_RANGE
        k = 4
        if o.obs_all_health:
            eb[..., k] = en.health / en.health_max
            k += 1
            if self.s_e:
                eb[..., k] = en.shield / self.enemy_max_shield
                k += 1
        eb[..., k:k + b] = self.enemy_onehot
        eb *= ((geo.dist_ae < SIGHT_RANGE) & en.alive[None, :])[..., None]
        # Ally block: the other agents in increasing id.
        ab = out[:, col:col + (n - 1) * self.ally_feat_size].reshape(n, n - 1, self.ally_feat_size)
        col += (n - 1) * self.ally_feat_size
        others, rows = self._others, np.arange(n)[:, None]
        dist = geo.dist_aa[rows, others]
        ab[..., 0] = 1.0
        ab[..., 1] = dist / SIGHT_RANGE
        ab[..., 2:4] = geo.d_aa[rows, others] / SIGHT_RANGE
        k = 4
        if o.obs_all_health:
            ab[..., k] = (al.health / al.health_max)[others]
            k += 1
            if self.s_a:
                ab[..., k] = (al.shield / self.ally_max_shield)[others]
                k += 1
        ab[..., k:k + b] = self.ally_onehot[others]
        if o.obs_last_action:
            ab[..., k + b:] = np.asarray(last_action)[others]
        ab *= ((dist < SIGHT_RANGE) & al.alive[others])[..., None]
        # Own block.
        if o.own_health:
            out[:, col] = al.health / al.health_max
            col += 1
            if self.s_a:
                out[:, col] = al.shield / self.ally_max_shield
                col += 1
        out[:, col:col + b] = self.ally_onehot
        if o.obs_timestep_number:
            out[:, col + b] = steps / self.spec.episode_limit
        out[~al.alive] = 0.0
        return out

    def state(self, t: UnitTable, last_action: np.ndarray, steps: int,
              obs: np.ndarray | None = None) -> np.ndarray:
        """Global state vector (spec §3.2), float32; ``obs`` is used with ``obs_instead_of_state``."""
        if self.opts.obs_instead_of_state:
            if obs is None:
                raise ValueError("obs_instead_of_state needs the observations")
            return obs.reshape(-1).astype(np.float32)
        al, en, n, m = t.allies, t.enemies, self.n_agents, self.n_enemies
        cx, cy = self.map_x / 2, self.map_y / 2
        out = np.zeros(self.state_size, dtype=np.float32)
        ally = out[:n * self.ally_state_size].reshape(n, self.ally_state_size)
        ally[:, 0] = al.health / al.health_max
        ally[:, 1] = np.where(self.ally_medivac, al.energy, al.cooldown) / self.ally_max_cd
        ally[:, 2] = (al.pos[:, 0] - cx) / self.map_x
        ally[:, 3] = (al.pos[:, 1] - cy) / self.map_y
        if self.s_a:
            ally[:, 4] = al.shield / self.ally_max_shield
        ally[:, 4 + self.s_a:] = self.ally_onehot
        ally[~al.alive] = 0.0
        end = n * self.ally_state_size
        enemy = out[end:end + m * self.enemy_state_size].reshape(m, self.enemy_state_size)
        enemy[:, 0] = en.health / en.health_max
        enemy[:, 1] = (en.pos[:, 0] - cx) / self.map_x
        enemy[:, 2] = (en.pos[:, 1] - cy) / self.map_y
        if self.s_e:
            enemy[:, 3] = en.shield / self.enemy_max_shield
        enemy[:, 3 + self.s_e:] = self.enemy_onehot
        enemy[~en.alive] = 0.0
        end += m * self.enemy_state_size
        if self.opts.state_last_action:
            out[end:end + n * self.n_actions] = np.asarray(last_action).reshape(-1)
        if self.opts.state_timestep_number:
            out[-1] = steps / self.spec.episode_limit
        return out

    def visibility(self, t: UnitTable, geo: Geometry | None = None) -> np.ndarray:
        """(n_agents, n_agents + n_enemies) bool: living agent i sees living unit k within sight (no self)."""
        geo = geo or self.geometry(t)
        alive_a = t.allies.alive
        ally = (geo.dist_aa < SIGHT_RANGE) & alive_a[:, None] & alive_a[None, :]
        np.fill_diagonal(ally, False)
        enemy = (geo.dist_ae < SIGHT_RANGE) & alive_a[:, None] & t.enemies.alive[None, :]
        return np.concatenate([ally, enemy], axis=1)

    # ---------------------------------------------------------------- episode end and reward
    def end_code(self, t: UnitTable) -> int | None:
        """+1 win, −1 loss, 0 draw, None running (spec §1.1, incl. SMAC's MMM Medivac rules).

        On MMM maps the loss test ("every living ally is a Medivac") also holds with no ally alive and
        comes first, so a mutual wipe-out there is a loss, as in SMAC.
        """
        alive_a, alive_e = t.allies.alive, t.enemies.alive
        na, ne = int(alive_a.sum()), int(alive_e.sum())
        mmm = self.spec.map_type == "MMM"
        only_med_ally = mmm and not (alive_a & ~self.ally_medivac).any()
        only_med_enemy = mmm and ne == 1 and bool(self.enemy_medivac[alive_e].all())
        if (na == 0 and ne > 0) or only_med_ally:
            return -1
        if (na > 0 and ne == 0) or only_med_enemy:
            return 1
        if na == 0 and ne == 0:
            return 0
        return None

    def battle_reward(self, prev: UnitTable, cur: UnitTable, dead_allies: np.ndarray,
                      dead_enemies: np.ndarray) -> float:
        """Dense per-step reward before win/loss bonus and scaling (spec §5).

        ``dead_allies``/``dead_enemies`` are SMAC's death trackers (bool arrays), updated in place.
        """
        o = self.opts
        if o.reward_sparse:
            return 0.0
        neg = o.reward_negative_scale

        def deltas(p: SideTable, c: SideTable, tracker: np.ndarray) -> tuple[float, int]:
            prev_hp = p.health + p.shield
            just_died = ~tracker & (c.health <= 0)
            living = ~tracker & ~just_died
            dmg = float(prev_hp[just_died].sum() + (prev_hp - c.health - c.shield)[living].sum())
            tracker |= just_died
            return dmg, int(just_died.sum())

        dmg_ally, died_ally = deltas(prev.allies, cur.allies, dead_allies)
        dmg_enemy, died_enemy = deltas(prev.enemies, cur.enemies, dead_enemies)
        death_reward = o.reward_death_value * died_enemy
        if o.reward_only_positive:
            return abs(dmg_enemy + death_reward)  # |·| turns net regeneration into positive reward
        death_reward -= o.reward_death_value * neg * died_ally
        return dmg_enemy + death_reward - neg * dmg_ally

    # ---------------------------------------------------------------- scripted allies (heuristic_ai)
    def heuristic_actions(self, t: UnitTable, targets: list[int | None], avail: np.ndarray,
                          rest: bool, geo: Geometry | None = None) -> np.ndarray:
        """SMAC's ``heuristic_ai``: attack the closest living enemy; a Medivac heals the closest wounded ally.

        ``targets`` (one per agent, updated in place) keeps a target until it dies (or, for a heal target,
        is back at full health). With ``rest``, an unavailable attack/heal becomes a move towards it.
        """
        geo = geo or self.geometry(t)
        al, en = t.allies, t.enemies
        no_target = float(np.hypot(self.map_x, self.map_y))
        actions = np.zeros(self.n_agents, dtype=np.int64)
        marauder = np.array([u == "marauder" for u in self.spec.ally_types])
        for i in range(self.n_agents):
            if not al.alive[i]:
                continue
            tgt = targets[i]
            if self.ally_medivac[i]:
                if tgt is None or not al.alive[tgt] or al.health[tgt] == al.health_max[tgt]:
                    ok = al.alive & ~self.ally_medivac & (al.health != al.health_max)
                    dist = np.where(ok, geo.dist_aa[i], np.inf)
                    tgt = int(np.argmin(dist)) if dist.min() < no_target else None
                other = al
            else:
                if tgt is None or not en.alive[tgt]:
                    ok = en.alive & ~(self.enemy_medivac & marauder[i])
                    dist = np.where(ok, geo.dist_ae[i], np.inf)
                    tgt = int(np.argmin(dist)) if dist.min() < no_target else None
                other = en
            targets[i] = tgt
            if tgt is None:
                continue
            action = N_ACTIONS_NO_ATTACK + tgt
            if rest and not avail[i, action]:
                dx, dy = other.pos[tgt] - al.pos[i]
                action = (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)
            actions[i] = action
        return actions
