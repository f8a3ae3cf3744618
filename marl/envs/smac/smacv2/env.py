"""``SMACv2Env``: SMACv2's capability-config env (``StarCraftCapabilityEnvWrapper`` over smacv2's
``StarCraft2Env``) on the embedded engine. Each reset draws a team and start positions from the env's seed,
builds that episode's map and runs it with SMAC's rules plus SMACv2's observations (docs/smacv2.md).

Random streams (the contract ``BatchedSMACv2Env`` reproduces row by row): the env's NumPy generator, seeded
with its seed, draws each episode's teams and start positions (:func:`draw_episode`) and then two seeds
(:func:`episode_seeds`): the engine's stream for that episode and its observation stream (SMACv2's shuffled
visiting order and EPO draws).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import marl.envs.smac.env as smac_env
from marl.envs.base import check_agent_id
from marl.envs.smac.env import BACKENDS, StarCraft2Env
from marl.envs.smac.features import SmacFeatures, Units
from marl.envs.smac.sc2.install import resolve_gen_backend
from marl.envs.smac.smacv2.capability import scenario_from_capability_config
from marl.envs.smac.smacv2.distributions import draw_teams, surrounded_and_reflect
from marl.envs.smac.smacv2.fast import V2Features
from marl.envs.smac.smacv2.features import V2Flags, unit_ranges, v2_sizes
from marl.envs.smac.smacv2.observer import V2Observer
from marl.envs.smac.smacv2.reference import engine_actions, v2_state
from marl.envs.smac.smacv2.scenarios import RACE_LETTER, Scenario, get_scenario
from marl.envs.smac.types import GEN_RL_UNIT_ORDER, MEDIVAC_MAP_TYPES, EnemyOrder, MapSpec, UnitGroup
from marl.envs.smac.version import engine_record


def episode_spec(
    sc: Scenario, allies: list[str], enemies: list[str], ally_xy: np.ndarray, enemy_xy: np.ndarray
) -> MapSpec:
    """The map of one generated episode: one unit group per unit at its start position on the flat
    ``map_size`` arena, agents sorted as SMACv2 sorts them; each idle enemy is ordered to attack the closest
    living ally, as the trigger of SMACv2's map 32x32_flat does."""
    order = sorted(range(len(allies)), key=lambda k: (GEN_RL_UNIT_ORDER.index(allies[k]), *ally_xy[k]))
    ally_groups = tuple(UnitGroup(allies[k], 1, (float(ally_xy[k, 0]), float(ally_xy[k, 1]))) for k in order)
    enemy_groups = tuple(
        UnitGroup(u, 1, (float(x), float(y))) for u, (x, y) in zip(enemies, enemy_xy, strict=True)
    )
    race = RACE_LETTER[sc.race]
    return MapSpec(
        name=sc.name,
        ally_race=race,
        enemy_race=race,
        episode_limit=sc.episode_limit,
        unit_type_bits=sc.unit_type_bits,
        map_type=sc.map_type,
        allies=ally_groups,
        enemies=enemy_groups,
        enemy_order=EnemyOrder("attack_nearest"),
        pathing_grid=np.ones(sc.map_size, dtype=bool),
        map_size=sc.map_size,
        description=f"SMACv2 {sc.name}: {', '.join(allies)} vs {', '.join(enemies)}",
    )


def draw_episode(rng: np.random.Generator, sc: Scenario) -> tuple[MapSpec, str]:
    """One episode's map and start-position layout ("reflect"/"surrounded") as SMACv2 draws them: team_gen,
    then start_positions."""
    allies, enemies = draw_teams(rng, sc.team_gen, sc.n_units, sc.n_enemies)
    ally_xy, enemy_xy, kind = surrounded_and_reflect(rng, sc.p, sc.n_units, sc.n_enemies, *sc.map_size)
    return episode_spec(sc, allies, enemies, ally_xy, enemy_xy), kind


def episode_seeds(rng: np.random.Generator) -> tuple[int, int]:
    """(engine seed, observation-stream seed) of an episode, drawn after its teams and positions."""
    return int(rng.integers(1 << 62)), int(rng.integers(1 << 62))


_ONE = np.ones(1, dtype=bool)


class SMACv2Env(StarCraft2Env):
    """A SMACv2 scenario (Ellis et al. 2022, arXiv:2212.07489) with SMACv2's interface and sizes.

    ``map_name`` is one of the 15 scenarios (``protoss_5_vs_5`` ... ``zerg_20_vs_23``); ``n_units`` and
    ``n_enemies`` override its counts as SMACv2's capability config does. SMACv2's own form also works:
    ``map_name="10gen_<race>"`` with ``capability_config`` (SMACv2's dict; :mod:`.capability`), or without it
    the race's example config (5 vs 5). SMACv2's flags (``obs_own_pos``, ``use_unit_ranges``,
    ``min_attack_range``, ``prob_obs_enemy``, ``fully_observable``, ``action_mask``, ``conic_fov``,
    ``num_fov_actions``) default to its standard configs; the other flags are SMAC's. ``compiled=False``
    computes availability, observations, state and reward with the NumPy reference instead of the compiled
    kernels (same numbers; :mod:`.fast`).

    ``backend``: "sim" (the embedded engine, default), "sc2" (the real game through pysc2 with SMACv2's map
    32x32_flat: :class:`~marl.envs.smac.sc2.gen_engine.Sc2GenEngine`) or "auto" (the game when it and the map
    are installed). ``engine`` plays every episode on a given game engine (an ``Sc2GenEngine``; tests).
    """

    def __init__(
        self,
        map_name: str = "protoss_5_vs_5",
        backend: str = "sim",
        seed: int | None = None,
        n_units: int | None = None,
        n_enemies: int | None = None,
        obs_own_pos: bool = True,
        use_unit_ranges: bool = True,
        min_attack_range: float = 2.0,
        prob_obs_enemy: float = 1.0,
        fully_observable: bool = False,
        action_mask: bool = True,
        conic_fov: bool = False,
        num_fov_actions: int = 12,
        capability_config: dict[str, Any] | None = None,
        compiled: bool = True,
        engine: Any | None = None,
        **smac_flags: Any,
    ) -> None:
        if engine is not None:
            backend = "sc2"
        elif backend not in BACKENDS:
            raise ValueError(f"unknown SMAC backend {backend!r}; allowed: {', '.join(BACKENDS)}")
        else:
            requested = backend
            backend, why = resolve_gen_backend(backend)  # "sc2" without the game: the install hint, now
            if requested == "auto" and why not in smac_env._ANNOUNCED:  # once per process, as StarCraft2Env
                smac_env._ANNOUNCED.add(why)
                print(why, flush=True)
        if capability_config is not None:
            if n_units is not None or n_enemies is not None:
                raise ValueError("give n_units/n_enemies inside capability_config, not beside it")
            self.scenario = scenario_from_capability_config(map_name, capability_config)
        else:
            self.scenario = get_scenario(map_name, n_units, n_enemies)
        self.v2 = V2Flags(
            obs_own_pos, use_unit_ranges, float(min_attack_range), float(prob_obs_enemy), fully_observable,
            action_mask, conic_fov, num_fov_actions,
        )  # fmt: skip
        self.compiled = bool(compiled)
        self._rng = np.random.default_rng(seed)
        self._draw()
        self.layout = self._next_layout
        super().__init__(map_name, backend="sim", seed=seed, spec=self._next_spec, engine=None, **smac_flags)
        self.backend = backend
        self._game = engine  # the real game: one engine for every episode
        self._game_map: MapSpec | None = None  # the map the game reported (grid, heights, size)
        if self.opts.heuristic_ai:
            raise ValueError("heuristic_ai is not supported on SMACv2 scenarios yet")
        sizes = v2_sizes(self.n_agents, self.n_enemies, RACE_LETTER[self.scenario.race], self.opts, self.v2)
        self._sizes = sizes
        self.n_actions = sizes["n_actions"]
        sc = self.scenario
        self._fast = V2Features(
            1, self.n_agents, self.n_enemies, RACE_LETTER[sc.race], self.opts, self.v2, sc.map_size,
            self.episode_limit, sc.unit_type_bits,
        )  # fmt: skip

    # ------------------------------------------------------------------ generation
    def _draw(self) -> None:
        """Draw the next episode's teams and start positions (SMACv2: team_gen, then start_positions)."""
        self._state_before_draw = self._rng.bit_generator.state
        self._next_spec, self._next_layout = draw_episode(self._rng, self.scenario)
        self._fresh = True  # the next reset uses this draw

    def seed(self, seed: int | None = None) -> int | None:
        """Reseed the team/position draws and the engine (from the next reset)."""
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        self._draw()
        return seed

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Start an episode with a newly drawn team and start positions; returns (observations, state)."""
        if seed is not None:
            self.seed(seed)
        if not self._fresh:
            self._draw()
        self._fresh = False
        self._prev_spec = self.spec  # the map of the episode whose frames become the "last" ones
        self.spec = self._next_spec
        self.layout = self._next_layout
        engine_seed, obs_seed = episode_seeds(self._rng)  # the game is seeded once, at launch
        if self._game_map is not None:
            g = self._game_map
            self.spec = dataclasses.replace(
                self.spec,
                pathing_grid=g.pathing_grid,
                terrain_height=g.terrain_height,
                map_size=g.map_size,
                playable_extent=g.playable_extent,
            )
        self._episode_features()
        self._engine = self._make_engine(engine_seed)
        if self.compiled:
            self._fast.set_env(0, self.spec.ally_types, self.spec.enemy_types, obs_seed)
        else:
            self._obs_rng = np.array([obs_seed], dtype=np.uint64)
        return super().reset()

    def _episode_features(self) -> None:
        """SMAC's features of this episode's map (SMACv2's reward clip) and, for the NumPy reference,
        SMACv2's observer."""
        self.features = SmacFeatures(self.spec, self.opts, compiled=self.compiled)
        self.features.reward_clip_at_zero = True  # smacv2 reward_battle: max(delta_enemy + delta_deaths, 0)
        if not self.compiled:
            f = self.features
            self._observer = V2Observer(
                self.spec.ally_types, self.spec.enemy_types, f.ally_onehot, f.enemy_onehot,
                RACE_LETTER[self.scenario.race], self.spec.map_size, self.opts, self.v2,
                self.spec.map_type in MEDIVAC_MAP_TYPES,
            )  # fmt: skip

    def _adopt_game_map(self, spec: MapSpec) -> None:
        """The game's pathing grid, heights and size replace the flat map, now and for later episodes."""
        self._game_map = spec
        self.spec = spec
        self._episode_features()
        self._fast.set_map(spec.pathing_grid, spec.terrain_height, spec.extent)

    def _make_engine(self, seed: int) -> Any:
        if self.backend == "sc2":
            if self._game is None:
                from marl.envs.smac.sc2.gen_engine import Sc2GenEngine

                self._game = Sc2GenEngine(self.spec, self._seed, self.difficulty, self.step_mul)
            self._game.new_episode(self.spec)
            return self._game
        from marl.envs.smac.sim.engine import SimEngine

        return SimEngine(self.spec, seed=seed, first_loop=False)  # SMACv2's reset: no loop (stepper)

    def get_rng_state(self) -> dict[str, Any]:
        """The state of the team/position generator before the next episode's draw (for exact resume)."""
        return self._state_before_draw if self._fresh else self._rng.bit_generator.state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`get_rng_state`: the next reset draws what the saved env would have drawn."""
        self._rng.bit_generator.state = state
        self._draw()

    def _set_table(self, table: Any) -> None:
        if self.compiled:
            self._table = table
            self._units = u = Units.from_table(table)
            fast = self._fast
            fast.observe(u, self.last_action[None], np.array([self._episode_steps]), _ONE)
            self._avail, self._obs, self._state = (
                fast.avail[0].copy(),
                fast.obs[0].copy(),
                fast.state[0].copy(),
            )
            return
        self._set_table_reference(table)

    def _set_table_reference(self, table: Any) -> None:
        """The NumPy reference: SMAC's move block (``features_ref``), SMACv2's mask, observations (with the
        EPO bookkeeping) and state (:class:`V2Observer`, :func:`.reference.v2_state`)."""
        self._table = table
        self._units = u = Units.from_table(table)
        f, ob, steps = self.features, self._observer, self._episode_steps
        geo = f.batch_geometry(u)
        smac_avail = f.batch_avail(u, geo)
        no_last = np.zeros((1, self.n_agents, f.n_actions), dtype=np.float32)  # the move block ignores it
        move_block = f.batch_obs(u, smac_avail, no_last, np.array([steps]), geo)[0, :, : ob.move_size]
        pos, health, shield = u.pos[0], u.health[0], u.shield[0]
        if steps == 0:
            ob.new_episode()
        else:
            ob.after_step(health)
        move = smac_avail[0, :, :6]
        true_avail = self._true_avail = ob.avail(pos, health, move, check_range=True)
        self._avail = true_avail if self.v2.action_mask else ob.avail(pos, health, move, check_range=False)
        frac = steps / self.episode_limit
        self._obs = ob.observe(
            pos, health, u.health_max, shield, move_block, true_avail, self.last_action, frac, self._obs_rng
        )
        if self.opts.obs_instead_of_state:
            self._state = self._obs.reshape(-1).copy()
            return
        sp, fov = self.spec, ob.fov if self.v2.conic_fov else None
        self._state = v2_state(
            pos, health, u.health_max, shield, u.cooldown[0], u.energy[0], sp.ally_types, sp.enemy_types,
            f.ally_onehot, f.enemy_onehot, ob.medivac, fov, self.last_action, frac, sp.map_size, sp.extent,
            ob.shield,
            self.opts,
        )  # fmt: skip

    def _engine_actions(self, acts: np.ndarray) -> np.ndarray:
        """Turn the fields of view (conic_fov) and give the engine what SMACv2 sends the game: no command for
        a turn nor for an attack/heal out of range or cone (``action_mask=False`` lets agents choose one);
        ``last_action`` keeps the chosen actions."""
        if self.compiled:
            return self._fast.engine_actions(acts[None], np.zeros(1, dtype=np.int64))[0]
        self._observer.turn(acts)
        return engine_actions(acts[None], self._true_avail[None], self.v2.n_fov)[0]

    def save_replay(self, replay_format: str = "gif") -> str:
        """As :meth:`StarCraft2Env.save_replay`, drawing the previous episode with its own team."""
        if self._terminated or not self._last_frames:
            return super().save_replay(replay_format)
        current = self.spec
        self.spec = self._prev_spec
        try:
            return super().save_replay(replay_format)
        finally:
            self.spec = current

    # ------------------------------------------------------------------ sizes and info
    def get_obs_size(self) -> int:
        return self._sizes["obs"]

    def get_state_size(self) -> int:
        return self._sizes["state"]

    def get_obs_own_feats_size(self) -> int:
        return super().get_obs_own_feats_size() + 2 * self.v2.obs_own_pos + 2 * self.v2.conic_fov

    def action_name(self, agent_id: int, action: int) -> str:
        """Readable name of an action (with conic_fov, 6 .. 6+F-1 turn the field of view)."""
        agent_id = check_agent_id(agent_id, self.n_agents)
        f = self.v2.n_fov
        if action < 6:
            return super().action_name(agent_id, action)
        if action < 6 + f:
            return f"turn field of view {action - 6}"
        return super().action_name(agent_id, action - f)

    def get_state_dict(self) -> dict[str, np.ndarray]:
        """State blocks (allies (n, nf_al), enemies, last_action, timestep) with SMACv2's ally row: with
        conic_fov it holds the field-of-view direction."""
        out = super().get_state_dict()
        if self.v2.conic_fov:
            s = self.get_state()
            na = self.n_agents * (self.features.ally_state_size + 2)
            out["allies"] = s[:na].reshape(self.n_agents, -1)
            out["enemies"] = s[na : na + self.n_enemies * self.features.enemy_state_size].reshape(
                self.n_enemies, -1
            )
        return out

    def get_stats(self) -> dict[str, Any]:
        """SMAC's statistics plus this episode's generated teams and start-position layout."""
        stats = super().get_stats()
        stats.update(
            ally_team=list(self.spec.ally_types),
            enemy_team=list(self.spec.enemy_types),
            start_positions=self.layout,
        )
        return stats

    def feature_bounds(self) -> dict[str, tuple[float, float]]:
        """Bounds over every team the scenario can draw: observations lie in [-1, 1] (with
        ``fully_observable`` distances reach the map diagonal over the shortest sight range); the state as
        :meth:`StarCraft2Env.feature_bounds`, over all of the race's unit types (on the game: unbounded
        above)."""
        from marl.envs.smac.options import DEFAULT_MAX_COOLDOWN, MAX_COOLDOWN
        from marl.envs.smac.sim.units import CD_JITTER_HI, COOLDOWN, PROPS, type_ids

        types = self.scenario.team_gen.unit_types
        obs_lim = 1.0
        if self.v2.fully_observable:
            obs_lim = float(np.hypot(*self.scenario.map_size) / unit_ranges(types, self.v2)[0].min())
        if self.backend != "sim":  # the game's largest weapon cooldown is not known here
            return {"obs": (-obs_lim, obs_lim), "state": (-1.0, np.inf)}
        fighters = tuple(t for t in types if t != "medivac")
        cd_max = PROPS[type_ids(fighters), COOLDOWN] + CD_JITTER_HI
        norm = np.array([MAX_COOLDOWN.get(t, DEFAULT_MAX_COOLDOWN) for t in fighters])
        return {"obs": (-obs_lim, obs_lim), "state": (-1.0, max(1.0, float(np.max(cd_max / norm))))}

    def get_env_info(self) -> dict[str, Any]:
        info = super().get_env_info()
        info["scenario"] = self.scenario.name
        return info

    def engine_info(self) -> dict[str, Any]:
        """The engine record (``StarCraft2Env.engine_info``) with SMACv2's generator version."""
        return engine_record(self.backend, self.map_name, generator=True)
