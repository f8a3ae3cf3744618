"""``V2Observer``: SMACv2's action mask and observations of one env, in NumPy (oxwhirl/smacv2
``starcraft2.py``: ``get_avail_agent_actions``, ``get_true_avail_agent_actions``, ``get_obs_agent`` and the
EPO bookkeeping of ``step``). The readable reference of the compiled kernels (``fast_kernels.py``); the
layouts are in :mod:`.features`, the cone and the state in :mod:`.reference`.
"""

from __future__ import annotations

import numpy as np

from marl.envs.smac.options import MAX_SHIELD, N_ACTIONS_NO_ATTACK, SmacOptions
from marl.envs.smac.smacv2.features import (
    N_OBS_HEIGHT,
    N_OBS_PATHING,
    V2Flags,
    epo_draw,
    unit_ranges,
    v2_sizes,
    visiting_order,
)
from marl.envs.smac.smacv2.reference import in_cone, turn_fov


class V2Observer:
    """SMACv2's action mask and observations of one env, with its per-episode EPO bookkeeping.

    ``prob_obs_enemy`` (SMACv2's EPO): the first agent that sees an untagged enemy "tags" it and observes it;
    every other agent observes it with that probability (one draw each) until the tag is dropped, when the
    tagger or the enemy dies (:meth:`after_step`). Agents are visited in a random order each step, as in
    SMACv2's ``get_obs``. SMACv2 also zeroes an agent's whole enemy block up to the last enemy it cannot
    observe (``enemy_feats = np.zeros(...)`` inside its enemy loop); we keep that rule so observations equal
    SMACv2's. With ``conic_fov`` an agent sees and attacks inside its cone only (:mod:`.reference`); its
    direction is ``fov`` (n, 2), turned by :meth:`turn`.
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
        self.n_fov = flags.n_fov
        self.new_episode()

    def new_episode(self) -> None:
        """Clear the EPO tags (SMACv2's ``obs_enemies``, ``enemy_tags``); all agents face (1, 0)."""
        self.obs_enemies = np.zeros((self.m, self.n), dtype=bool)
        self.tag_owner = np.full(self.m, -1, dtype=np.int64)  # the agent that tagged each enemy, -1: none
        self.fov = np.zeros((self.n, 2))
        self.fov[:, 0] = 1.0

    def turn(self, actions: np.ndarray) -> None:
        """Apply the field-of-view actions among ``actions`` (n,)."""
        turn_fov(self.fov, actions, self.n_fov)

    def cone(self, i: int, pos: np.ndarray, reach: float) -> np.ndarray:
        """(U,) which of the units at ``pos`` lie in agent ``i``'s cone of length ``reach`` (conic_fov)."""
        (px, py), (fx, fy), h = pos[i], self.fov[i], self.flags.half_angle
        return np.array([in_cone(px, py, fx, fy, qx, qy, reach, h) for qx, qy in pos])

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
        n, first = self.n, N_ACTIONS_NO_ATTACK + self.n_fov  # the first attack action
        out = np.zeros((n, self.sizes["n_actions"]), dtype=np.int64)
        out[:, :N_ACTIONS_NO_ATTACK] = move_avail
        out[:, N_ACTIONS_NO_ATTACK:first] = 1  # field-of-view turns (conic_fov)
        alive = health > 0
        for i in np.flatnonzero(alive[:n]):
            if self.medivac[i]:
                tgt = np.flatnonzero(alive[:n] & ~self.medivac)
                units = tgt
            else:
                tgt = np.flatnonzero(alive[n:])
                units = n + tgt
            if check_range:  # SMACv2: dist <= attack range, or with conic_fov the cone of that range
                if self.flags.conic_fov:
                    tgt = tgt[self.cone(i, pos, self.shoot[i])[units]]
                else:
                    tgt = tgt[np.linalg.norm(pos[units] - pos[i], axis=1) <= self.shoot[i]]
            out[i, first + tgt] = 1
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
            # what agent i perceives: within sight range, or with conic_fov inside its cone
            perceived = self.cone(i, pos, sight) if f.conic_fov else dist < sight
            # enemies, with SMACv2's EPO tags
            seen = perceived[n:]
            for e in np.flatnonzero(seen & (self.tag_owner < 0)):
                self.tag_owner[e] = i
                self.obs_enemies[e, i] = True
                for a in range(n):  # one draw per other agent, in id order
                    if a != i and epo_draw(rng, f.prob_obs_enemy):
                        self.obs_enemies[e, a] = True
            observed = self.obs_enemies[:, i]
            show = alive[n:] & observed & (seen | f.fully_observable)
            ef = np.zeros((m, nf_e), dtype=np.float32)
            first = N_ACTIONS_NO_ATTACK + self.n_fov  # the first attack action
            ef[:, 0] = true_avail[i, first : first + m]
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
            vis = alive[js] & (perceived[js] | f.fully_observable)
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
            if f.conic_fov:
                row[k : k + 2] = self.fov[i]
                k += 2
            row[k : k + bits] = self.ally_onehot[i]
            k += bits
            if o.obs_timestep_number:
                row[k] = step_frac
        if o.obs_timestep_number:  # SMACv2 appends the time step to dead agents' zero observations too
            out[~alive[:n], -1] = step_frac
        return out
