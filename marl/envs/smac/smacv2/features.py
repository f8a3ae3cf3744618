"""SMACv2's observation, action mask and sizes (oxwhirl/smacv2 ``starcraft2.py``), in NumPy.

Layouts (``get_obs_agent``, ``get_obs_size``, ``get_state_size`` of smacv2's StarCraft2Env) with the standard
configs' flags (docs/smacv2.md §3):

- obs = move block (4 move flags, + pathing 8, + heights 9 when on), then per enemy ``[available, distance,
  dx, dy, (health, shield if Protoss), type bits]``, per other ally ``[visible, distance, dx, dy, (health,
  shield), type bits, (last action)]``, own ``[(health, shield), (x / map_x, y / map_y if obs_own_pos),
  type bits]``, then the time step when ``obs_timestep_number``. Distances are divided by the observing
  unit's sight range.
- state: SMAC v1's state with the map's 3 type bits (identical in SMACv2 without stochastic capabilities).

With ``use_unit_ranges`` the sight range and the attack range (at least ``min_attack_range``) depend on the
unit type (``unit_sight_range`` / ``unit_shoot_range``); otherwise they are SMAC's 9 and 6.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marl.envs.smac.options import MAX_SHIELD, N_ACTIONS_NO_ATTACK, SmacOptions
from marl.envs.smac.sim.physics import rand_int, rand_uniform

# smacv2 StarCraft2Env.unit_sight_range / unit_shoot_range (use_unit_ranges=True).
SIGHT_RANGE_V2 = {
    "stalker": 10.0,
    "zealot": 9.0,
    "colossus": 10.0,
    "zergling": 8.0,
    "baneling": 8.0,
    "hydralisk": 9.0,
    "marine": 9.0,
    "marauder": 10.0,
    "medivac": 11.0,
}
SHOOT_RANGE_V2 = {
    "stalker": 6.0,
    "zealot": 0.1,
    "colossus": 7.0,
    "zergling": 0.1,
    "baneling": 0.25,
    "hydralisk": 5.0,
    "marine": 5.0,
    "marauder": 6.0,
    "medivac": 4.0,
}
N_OBS_PATHING, N_OBS_HEIGHT = 8, 9  # smacv2 n_obs_pathing / n_obs_height


@dataclass(frozen=True)
class V2Flags:
    """SMACv2's extra StarCraft2Env flags, with the values of its standard configs (sc2_gen_<race>.yaml)."""

    obs_own_pos: bool = True
    use_unit_ranges: bool = True
    min_attack_range: float = 2.0
    prob_obs_enemy: float = 1.0
    fully_observable: bool = False
    action_mask: bool = True
    conic_fov: bool = False

    def __post_init__(self) -> None:
        if self.conic_fov:
            raise ValueError(
                "conic_fov=True is not implemented on the embedded engine yet (SMACv2's standard configs use "
                "conic_fov=False); see docs/smacv2.md"
            )
        if not 0.0 <= self.prob_obs_enemy <= 1.0:
            raise ValueError(f"prob_obs_enemy must be in [0, 1], got {self.prob_obs_enemy}")


def v2_sizes(
    n_agents: int, n_enemies: int, race: str, opts: SmacOptions, flags: V2Flags, bits: int = 3
) -> dict[str, int]:
    """SMACv2's ``get_obs_size``, ``get_state_size`` and ``get_total_actions`` for a generated team of one
    race ("P", "T" or "Z"; both sides of SMACv2's scenarios have the same race), ``team_gen.observe`` on."""
    shield = int(race == "P")
    n_actions = (
        N_ACTIONS_NO_ATTACK + n_enemies
    )  # no conic_fov actions; terran n_agents > n_enemies is refused
    move = 4 + N_OBS_PATHING * opts.obs_pathing_grid + N_OBS_HEIGHT * opts.obs_terrain_height
    health = (1 + shield) if opts.obs_all_health else 0
    enemy = 4 + bits + health
    ally = 4 + bits + health + n_actions * opts.obs_last_action
    own = bits + (1 + shield) * (opts.obs_own_health or opts.obs_all_health) + 2 * flags.obs_own_pos
    obs = move + n_enemies * enemy + (n_agents - 1) * ally + own + int(opts.obs_timestep_number)
    if opts.obs_instead_of_state:
        state = obs * n_agents
    else:
        state = n_agents * (4 + shield + bits) + n_enemies * (3 + shield + bits)
        state += n_agents * n_actions * opts.state_last_action + int(opts.state_timestep_number)
    return {"obs": obs, "state": state, "n_actions": n_actions}


def visiting_order(rng: np.ndarray, n: int) -> np.ndarray:
    """The order in which ``get_obs`` visits the agents: SMACv2 shuffles them (``random.shuffle``); we run a
    Fisher-Yates shuffle on the env's observation stream ``rng`` ((1,) uint64 SplitMix64 state, the engine's
    generator), which the compiled kernel reproduces draw for draw."""
    order = np.arange(n)
    for k in range(n - 1, 0, -1):
        j = rand_int(rng, 0, k + 1)
        order[k], order[j] = order[j], order[k]
    return order


def epo_draw(rng: np.ndarray, prob: float) -> bool:
    """Whether another agent observes a newly tagged enemy (SMACv2: ``np.random.rand() < prob_obs_enemy``);
    with ``prob`` 0 or 1 the answer is certain and nothing is drawn."""
    if prob >= 1.0:
        return True
    return prob > 0.0 and rand_uniform(rng, 0) < prob


def unit_ranges(types: tuple[str, ...], flags: V2Flags) -> tuple[np.ndarray, np.ndarray]:
    """(sight (n,), attack range (n,)) of the agents ``types``."""
    if not flags.use_unit_ranges:
        return np.full(len(types), 9.0), np.full(len(types), 6.0)
    sight = np.array([SIGHT_RANGE_V2[t] for t in types])
    shoot = np.array([max(SHOOT_RANGE_V2[t], flags.min_attack_range) for t in types])
    return sight, shoot


class V2Observer:
    """SMACv2's action mask and observations of one env, with its per-episode EPO bookkeeping.

    ``prob_obs_enemy`` (SMACv2's EPO): the first agent that sees an untagged enemy "tags" it and observes it;
    every other agent observes it with that probability (one draw each) until the tag is dropped, when the
    tagger or the enemy dies (:meth:`after_step`). Agents are visited in a random order each step, as in
    SMACv2's ``get_obs``. SMACv2 also zeroes an agent's whole enemy block up to the last enemy it cannot
    observe (``enemy_feats = np.zeros(...)`` inside its enemy loop); we keep that rule so observations equal
    SMACv2's.
    """

    def __init__(
        self,
        ally_types: tuple[str, ...],
        enemy_types: tuple[str, ...],
        ally_onehot: np.ndarray,
        enemy_onehot: np.ndarray,
        race: str,
        map_size: tuple[int, int],
        opts: SmacOptions,
        flags: V2Flags,
        medivac_heals: bool,
    ) -> None:
        self.n, self.m = len(ally_types), len(enemy_types)
        self.opts, self.flags = opts, flags
        self.sizes = v2_sizes(self.n, self.m, race, opts, flags, ally_onehot.shape[1])
        self.sight, self.shoot = unit_ranges(ally_types, flags)
        self.race, self.shield = race, race == "P"
        self.max_shield = np.array([MAX_SHIELD.get(t, 1.0) for t in ally_types])
        self.enemy_max_shield = np.array([MAX_SHIELD.get(t, 1.0) for t in enemy_types])
        self.ally_onehot, self.enemy_onehot = ally_onehot, enemy_onehot
        self.map_size = np.asarray(map_size, dtype=float)
        self.medivac = np.array([medivac_heals and t == "medivac" for t in ally_types])
        if self.medivac.any() and self.n > self.m:
            raise ValueError(
                "a Medivac heals ally j with action 6+j: n_agents must be <= n_enemies, "
                f"got {self.n} > {self.m}"
            )
        self.move_size = 4 + N_OBS_PATHING * opts.obs_pathing_grid + N_OBS_HEIGHT * opts.obs_terrain_height
        self.new_episode()

    def new_episode(self) -> None:
        """Clear the EPO tags (SMACv2's ``obs_enemies`` and ``enemy_tags`` at reset)."""
        self.obs_enemies = np.zeros((self.m, self.n), dtype=bool)
        self.tag_owner = np.full(self.m, -1, dtype=np.int64)  # the agent that tagged each enemy, -1: none

    def after_step(self, health: np.ndarray) -> None:
        """SMACv2's ``step`` bookkeeping: an enemy tagged by a dead agent, and every dead enemy, lose their
        tag and their observers (a dead tagger also loses its column); ``health`` (U,) allies then enemies."""
        n = self.n
        for i in np.flatnonzero(health[:n] <= 0):
            mine = self.tag_owner == i
            if mine.any():
                self.tag_owner[mine] = -1
                self.obs_enemies[mine, :] = False
                self.obs_enemies[:, i] = False
        dead_e = health[n:] <= 0
        self.tag_owner[dead_e] = -1
        self.obs_enemies[dead_e, :] = False

    def avail(
        self, pos: np.ndarray, health: np.ndarray, move_avail: np.ndarray, check_range: bool
    ) -> np.ndarray:
        """(n, n_actions) SMACv2 availability: an attack (a Medivac: a heal of a non-Medivac ally) needs a
        living target, and with ``check_range`` one within the unit's attack range (SMACv2's
        ``get_avail_agent_actions`` checks it when ``action_mask``; ``get_true_avail_agent_actions`` always).
        ``move_avail`` is SMAC's (n, 6) no-op/stop/move block; ``pos`` (U, 2) and ``health`` (U,) list allies
        then enemies."""
        n = self.n
        out = np.zeros((n, self.sizes["n_actions"]), dtype=np.int64)
        out[:, :N_ACTIONS_NO_ATTACK] = move_avail
        alive = health > 0
        for i in np.flatnonzero(alive[:n]):
            if self.medivac[i]:
                tgt = np.flatnonzero(alive[:n] & ~self.medivac)
                tpos = pos[tgt]
            else:
                tgt = np.flatnonzero(alive[n:])
                tpos = pos[n + tgt]
            if check_range:
                tgt = tgt[np.linalg.norm(tpos - pos[i], axis=1) <= self.shoot[i]]
            out[i, N_ACTIONS_NO_ATTACK + tgt] = 1
        out[~alive[:n]] = 0
        out[~alive[:n], 0] = 1
        return out

    def observe(
        self,
        pos: np.ndarray,
        health: np.ndarray,
        health_max: np.ndarray,
        shield: np.ndarray,
        move_block: np.ndarray,
        true_avail: np.ndarray,
        last_action: np.ndarray,
        step_frac: float,
        rng: np.ndarray,
    ) -> np.ndarray:
        """(n, obs_size) float32 observations. ``move_block`` (n, move_size) is SMAC's move/pathing/height
        block, ``true_avail`` the range-checked availability, ``step_frac`` the episode step / limit, ``rng``
        the env's observation stream ((1,) uint64: :func:`visiting_order`, :func:`epo_draw`)."""
        n, m, o, f = self.n, self.m, self.opts, self.flags
        out = np.zeros((n, self.sizes["obs"]), dtype=np.float32)
        hfrac = np.where(health_max > 0, health / np.maximum(health_max, 1e-9), 0.0)
        sfrac_a = shield[:n] / self.max_shield
        alive = health > 0
        bits = self.ally_onehot.shape[1]
        hs = (1 + self.shield) if o.obs_all_health else 0
        nf_e, nf_a = 4 + hs + bits, 4 + hs + bits + self.sizes["n_actions"] * o.obs_last_action
        for i in visiting_order(rng, n):  # SMACv2's get_obs visits the agents in a shuffled order
            if not alive[i]:
                continue
            sight = self.sight[i]
            d = pos - pos[i]
            dist = np.linalg.norm(d, axis=1)
            row = out[i]
            row[: self.move_size] = move_block[i]
            # enemies, with SMACv2's EPO tags
            seen = dist[n:] < sight
            for e in np.flatnonzero(seen & (self.tag_owner < 0)):
                self.tag_owner[e] = i
                self.obs_enemies[e, i] = True
                for a in range(n):  # one draw per other agent, in id order
                    if a != i and epo_draw(rng, f.prob_obs_enemy):
                        self.obs_enemies[e, a] = True
            observed = self.obs_enemies[:, i]
            show = alive[n:] & observed & (seen | f.fully_observable)
            ef = np.zeros((m, nf_e), dtype=np.float32)
            ef[:, 0] = true_avail[i, N_ACTIONS_NO_ATTACK : N_ACTIONS_NO_ATTACK + m]
            ef[:, 1] = dist[n:] / sight
            ef[:, 2:4] = d[n:] / sight
            k = 4
            if o.obs_all_health:
                ef[:, k] = hfrac[n:]
                k += 1
                if self.shield:
                    ef[:, k] = shield[n:] / self.enemy_max_shield
                    k += 1
            ef[:, k : k + bits] = self.enemy_onehot
            ef[~show] = 0.0
            hidden = np.flatnonzero(~observed)
            if len(hidden):
                ef[: hidden[-1] + 1] = 0.0  # SMACv2 resets the whole block at an unobserved enemy
            base = self.move_size
            row[base : base + m * nf_e] = ef.reshape(-1)
            # other allies
            js = np.array([j for j in range(n) if j != i], dtype=np.int64)
            vis = alive[js] & ((dist[js] < sight) | f.fully_observable)
            af = np.zeros((n - 1, nf_a), dtype=np.float32)
            af[:, 0] = 1.0
            af[:, 1] = dist[js] / sight
            af[:, 2:4] = d[js] / sight
            k = 4
            if o.obs_all_health:
                af[:, k] = hfrac[js]
                k += 1
                if self.shield:
                    af[:, k] = sfrac_a[js]
                    k += 1
            af[:, k : k + bits] = self.ally_onehot[js]
            k += bits
            if o.obs_last_action:
                af[:, k:] = last_action[js]
            af[~vis] = 0.0
            base += m * nf_e
            row[base : base + (n - 1) * nf_a] = af.reshape(-1)
            # own features
            k = base + (n - 1) * nf_a
            if o.obs_own_health or o.obs_all_health:
                row[k] = hfrac[i]
                k += 1
                if self.shield:
                    row[k] = sfrac_a[i]
                    k += 1
            if f.obs_own_pos:
                row[k : k + 2] = pos[i] / self.map_size
                k += 2
            row[k : k + bits] = self.ally_onehot[i]
            k += bits
            if o.obs_timestep_number:
                row[k] = step_frac
        if o.obs_timestep_number:  # SMACv2 appends the time step to dead agents' zero observations too
            out[~alive[:n], -1] = step_frac
        return out
