"""The NumPy implementation of SMAC's per-step rules for E envs at once: geometry, available actions,
observations, state, visibility, end code and reward (docs/smac.md §1.1, §3, §4, §5).

Every method is a fixed, small number of NumPy calls whatever E and the unit counts. It is the reference
that the compiled kernels of :mod:`marl.envs.smac.fast_features` are tested against element for element,
the path of ``SmacFeatures(compiled=False)``, and what the single-env methods of
:class:`marl.envs.smac.features.SmacFeatures` run.
"""

from __future__ import annotations

import numpy as np

from marl.envs.smac.features_layout import _DIRS, _PAD, _SURROUND, RUNNING, FeatureLayout, Geometry, Units
from marl.envs.smac.options import MOVE_AMOUNT, SHOOT_RANGE, SIGHT_RANGE
from marl.envs.smac.types import MEDIVAC_MAP_TYPES


class NumpyFeatures(FeatureLayout):
    """Avail/obs/state/visibility/end-code/reward of E envs, in NumPy (on top of :class:`FeatureLayout`)."""

    # Per step: batch_geometry once, then batch_avail, batch_obs, batch_state (and batch_reward,
    # batch_end_code).
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

    def batch_avail(self, u: Units, geo: Geometry) -> np.ndarray:
        """(E, n_agents, n_actions) int64 0/1 mask (docs/smac.md §4)."""
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
            avail[:, med, 6 : 6 + n] = heal
        if not alive_a.all():
            avail[~alive_a] = self._dead_avail  # dead: only no-op
        return avail

    def batch_obs(
        self, u: Units, avail: np.ndarray, last_action: np.ndarray, steps: np.ndarray, geo: Geometry
    ) -> np.ndarray:
        """(E, n_agents, obs_size) float32 observations (docs/smac.md §3.1); dead agents get zeros.

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
                out[..., col : col + 8] = self._lookup(self._walk_out, cell)
                col += 8
            if o.obs_terrain_height:
                out[..., col : col + 8] = self._lookup(self._height_pad, cell)
                out[..., col + 8] = self._lookup(self._height_pad, cell[:, :, 0] - _SURROUND[0])
                col += 9
        # Enemy block: only visible rows (alive, distance < sight) are filled. Column 0 copies avail[6+j],
        # which for a Medivac is its heal bit for ally j (SMAC does the same).
        fe = self.enemy_feat_size
        eb = out[..., col : col + m * fe].reshape(E, n, m, fe)
        col += m * fe
        eb[..., 0] = avail[..., 6 : 6 + m]
        eb[..., 1:4] = g[:, :, n:]
        if o.obs_all_health:
            eb[..., 4] = hfrac[:, None, n:]
            if self.s_e:
                eb[..., 5] = (u.shield[:, n:] / self.enemy_max_shield)[:, None, :]
        eb *= vis[:, :, n:, None]
        # Ally block: the other agents in increasing id.
        fa = self.ally_feat_size
        ab = out[..., col : col + (n - 1) * fa].reshape(E, n, n - 1, fa)
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
            ab[..., k + b :] = last_action[:, others]
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

    def batch_state(
        self,
        u: Units,
        last_action: np.ndarray,
        steps: np.ndarray,
        obs: np.ndarray | None = None,
        geo: Geometry | None = None,
    ) -> np.ndarray:
        """(E, state_size) float32 global state (docs/smac.md §3.2); ``obs``: for ``obs_instead_of_state``."""
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
        rel = (u.pos - self._centre) / self._extent
        out = np.empty((E, self.state_size), dtype=np.float32)
        out[:] = self._state_template  # the type one-hots (zero elsewhere)
        ally = out[:, : n * fa].reshape(E, n, fa)
        ally[..., 0] = hfrac[:, :n]
        cd = (
            np.where(self.ally_medivac, u.energy[:, :n], u.cooldown[:, :n])
            if self._any_medivac
            else u.cooldown[:, :n]
        )
        ally[..., 1] = cd / self.ally_max_cd
        ally[..., 2:4] = rel[:, :n]
        if self.s_a:
            ally[..., 4] = u.shield[:, :n] / self.ally_max_shield
        end = n * fa
        enemy = out[:, end : end + m * fe].reshape(E, m, fe)
        enemy[..., 0] = hfrac[:, n:]
        enemy[..., 1:3] = rel[:, n:]
        if self.s_e:
            enemy[..., 3] = u.shield[:, n:] / self.enemy_max_shield
        if not alive.all():
            ally[~alive[:, :n]] = 0.0
            enemy[~alive[:, n:]] = 0.0
        end += m * fe
        if self.opts.state_last_action:
            out[:, end : end + n * self.n_actions] = last_action.reshape(E, n * self.n_actions)
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
        """(E,) int: +1 win, −1 loss, 0 draw, :data:`RUNNING` (docs/smac.md §1.1, with MMM Medivac rules).

        On MMM maps the loss test ("every living ally is a Medivac") also holds with no ally alive and
        comes first, so a mutual wipe-out there is a loss, as in SMAC.
        """
        n = self.n_agents
        alive = u.health > 0
        if self.spec.map_type not in MEDIVAC_MAP_TYPES:
            any_a, any_e = alive[:, :n].any(-1), alive[:, n:].any(-1)
            return self._end_lut[any_a.view(np.int8), any_e.view(np.int8)]
        na, ne = alive[:, :n].sum(-1), alive[:, n:].sum(-1)
        loss = ((na == 0) & (ne > 0)) | ~(alive[:, :n] & ~self.ally_medivac).any(-1)
        win = ((na > 0) & (ne == 0)) | ((ne == 1) & ~(alive[:, n:] & ~self.enemy_medivac).any(-1))
        draw = (na == 0) & (ne == 0)
        return np.where(loss, -1, np.where(win, 1, np.where(draw, 0, RUNNING)))

    def batch_reward(self, prev: Units, cur: Units, dead: np.ndarray) -> np.ndarray:
        """(E,) dense per-step reward before win/loss bonus and scaling (docs/smac.md §5).

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
            gain = dmg_enemy + death_reward
            if self.reward_clip_at_zero:  # SMACv2: max(gain, 0)
                return np.maximum(gain, 0.0)
            return np.abs(gain)  # SMAC v1: |·| turns net regeneration into positive reward
        death_reward = death_reward - o.reward_death_value * neg * died_ally
        return dmg_enemy + death_reward - neg * dmg_ally
