"""``BatchedSMACv2Env``: E envs of one SMACv2 scenario stepped by one call, each drawing its own teams.

Row ``e`` of ``BatchedSMACv2Env(name, E, seed=s)`` behaves exactly as ``SMACv2Env(name, seed=s + e)`` under
the same actions and resets (same teams, start positions, observations, state, availability, reward, end
and counters): at a reset, env ``e`` draws its episode from its own NumPy generator with the very functions
``SMACv2Env`` uses (:func:`~marl.envs.smac.smacv2.env.draw_episode`, ``episode_seeds``); the engine runs the
same compiled per-env code with per-env unit types (:class:`TeamsSimEngine`); availability, observations,
state and reward come from :class:`~marl.envs.smac.smacv2.fast.V2Features`, the code ``SMACv2Env`` runs with
E = 1. The episode loop (actions, end codes, counters) is :class:`BatchedStarCraft2Env`'s.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from marl.envs.base import check_agent_id
from marl.envs.smac.batched_env import BatchedStarCraft2Env, _stats
from marl.envs.smac.batched_vector import SIM_IGNORED, BatchedSmacVectorEnv
from marl.envs.smac.features import SmacOptions, Units, max_reward
from marl.envs.smac.sim.engine import _ORDER_KINDS, SPAWN_NOISE, SharedNav, _nav_for, env_seed, spawn_layout
from marl.envs.smac.sim.stepper import sim_reset_typed, sim_step_typed, sim_step_typed_parallel
from marl.envs.smac.sim.units import N_STATE, PROPS, S_CD, S_EN, S_HP, S_SH, S_X, S_Y, SHIELD, type_ids
from marl.envs.smac.smacv2.env import draw_episode, episode_seeds
from marl.envs.smac.smacv2.fast import V2Features
from marl.envs.smac.smacv2.scenarios import RACE_LETTER
from marl.envs.smac.threads import resolve_threads, with_threads
from marl.envs.smac.types import MapSpec


class TeamsSimEngine(SharedNav):
    """E envs of the embedded engine on one flat map, each with its own units: env ``e`` runs exactly what
    ``SimEngine(spec_e, seed_e)`` runs (the same compiled per-env code, ``sim/stepper.py``)."""

    def __init__(
        self, n_envs: int, n_agents: int, n_enemies: int, map_size: tuple[int, int], threads: int = 1
    ):
        E, U = n_envs, n_agents + n_enemies
        self.n_envs, self.n_agents, self.threads = E, n_agents, resolve_threads(threads)
        self.grid = np.ones(map_size, dtype=np.bool_)
        self.nav = _nav_for(self.grid)
        self.S = np.zeros((E, U, N_STATE))  # columns units.S_*
        self.rng = np.zeros(E, dtype=np.uint64)
        self.utype = np.zeros((E, U), dtype=np.int64)
        self.base_pos = np.zeros((E, U, 2))
        self.health_max = np.ones((E, U))
        self.shield_max = np.zeros((E, U))
        self.order = _ORDER_KINDS["attack_nearest"]

    def set_env(self, e: int, spec: MapSpec, seed: int) -> None:
        """Env ``e``'s next episode: its units and spawn layout (``spec``) and engine seed."""
        if spec.enemy_order.kind != "attack_nearest" or spec.pathing_grid.shape != self.grid.shape:
            raise ValueError("TeamsSimEngine runs SMACv2 episode maps (attack_nearest, flat map) only")
        self.utype[e] = np.concatenate([type_ids(spec.ally_types), type_ids(spec.enemy_types, enemy=True)])
        self.base_pos[e] = spawn_layout(spec)
        self.health_max[e] = PROPS[self.utype[e], 0]
        self.shield_max[e] = PROPS[self.utype[e], SHIELD]
        self.rng[e] = np.uint64(env_seed(seed, 0))

    def respawn(self, mask: np.ndarray) -> None:
        """Spawn the envs of ``mask`` (after :meth:`set_env`)."""
        sim_reset_typed(
            mask, self.n_agents, PROPS, self.utype, self.grid, self.base_pos, SPAWN_NOISE, self.order, self.S,
            self.rng,
        )  # fmt: skip

    def step(self, actions_EN: np.ndarray, mask: np.ndarray) -> None:
        """One agent step (8 game loops) of the envs of ``mask``; the others keep state and stream."""
        args = (actions_EN, mask, self.n_agents, PROPS, self.utype, self.grid, self.nav, self.order, self.S)
        if self.threads > 1 and self.n_envs > 1:
            with_threads(self.threads, sim_step_typed_parallel, *args, self.rng)
        else:
            sim_step_typed(*args, self.rng)

    def units(self) -> Units:
        """A copy of every env's units (health maxima (E, U))."""
        s = self.S.copy()
        return Units(
            self.n_agents, s[:, :, S_X : S_Y + 1], s[:, :, S_HP], s[:, :, S_SH], s[:, :, S_CD], s[:, :, S_EN],
            self.health_max.copy(),
        )  # fmt: skip


class BatchedSMACv2Env(BatchedStarCraft2Env):
    """``n_envs`` envs of one SMACv2 scenario (Ellis et al. 2022, arXiv:2212.07489) on the embedded engine.

    Takes ``SMACv2Env``'s arguments (scenario name or ``10gen_<race>`` with ``capability_config``, counts,
    SMACv2's and SMAC's flags). Arrays have a leading env axis; the getters' arrays belong to the env (the
    next step overwrites them). ``threads`` spreads the envs over cores; results do not depend on it.
    """

    def __init__(
        self,
        map_name: str = "protoss_5_vs_5",
        n_envs: int = 1,
        seed: int | None = None,
        threads: int = 1,
        **args: Any,
    ) -> None:
        if int(n_envs) < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        from marl.envs.smac.smacv2.env import SMACv2Env

        probe = SMACv2Env(map_name, seed=0, **args)  # checks every argument; gives the scenario and flags
        if probe.opts.heuristic_ai:
            raise ValueError("heuristic_ai is not supported on SMACv2 scenarios yet")
        self.map_name, self.scenario, self.v2 = map_name, probe.scenario, probe.v2
        self.opts: SmacOptions = probe.opts
        self.episode_limit = probe.episode_limit
        sc, E = self.scenario, int(n_envs)
        n, m = sc.n_units, sc.n_enemies
        self.engine = TeamsSimEngine(E, n, m, sc.map_size, threads)
        self.fast = V2Features(
            E, n, m, RACE_LETTER[sc.race], self.opts, self.v2, sc.map_size, self.episode_limit,
            sc.unit_type_bits, threads,
        )  # fmt: skip
        sizes = self.fast.sizes
        self._init_buffers(E, n, m, sizes["n_actions"], sizes["obs"], sizes["state"])
        self._env_info = probe.get_env_info()
        base = 0 if seed is None else int(seed)
        self._gens = [np.random.default_rng(None if seed is None else base + e) for e in range(E)]
        self.specs: list[MapSpec | None] = [None] * E
        self.layouts: list[str | None] = [None] * E
        self.max_reward = np.zeros(E)  # per env: SMACv2 scales by the first episode's enemies
        self._all = np.ones(E, dtype=bool)

    # ------------------------------------------------------------------ hooks of the episode loop
    def _respawn(self, mask: np.ndarray) -> Units:
        for e in np.flatnonzero(mask):
            spec, layout = draw_episode(self._gens[e], self.scenario)
            engine_seed, obs_seed = episode_seeds(self._gens[e])
            self.engine.set_env(e, spec, engine_seed)
            self.fast.set_env(e, spec.ally_types, spec.enemy_types, obs_seed)
            if self.specs[e] is None:  # SMAC adds the first episode's enemy health+shield maxima
                n = self.n_agents
                maxima = SimpleNamespace(
                    health_max=self.engine.health_max[e, n:], shield_max=self.engine.shield_max[e, n:]
                )
                self.max_reward[e] = max_reward(spec, self.opts, maxima)
            self.specs[e], self.layouts[e] = spec, layout
        self.engine.respawn(mask)
        return self.engine.units()

    def _engine_step(self, actions_EN: np.ndarray, mask: np.ndarray | None) -> Units:
        self.engine.step(actions_EN, self._all if mask is None else mask)
        return self.engine.units()

    def _engine_actions(self, actions_BN: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self.fast.engine_actions(actions_BN, rows)

    def _reward_and_end(self, prev: Units, cur: Units, dead: np.ndarray, rows: np.ndarray) -> tuple:
        return self.fast.reward_and_end(prev, cur, dead, rows)

    def _reward_divisor(self, rows: np.ndarray) -> np.ndarray:
        return self.max_reward[rows] / self.opts.reward_scale_rate

    def _observe(self, idx: np.ndarray | None) -> None:
        active = self._all
        if idx is not None:
            active = np.zeros(self.n_envs, dtype=bool)
            active[idx] = True
        f = self.fast
        f.observe(self._units, self._last_action, self._steps, active)
        self._avail, self._obs, self._state = f.avail, f.obs, f.state

    # ------------------------------------------------------------------ info
    def action_name(self, agent_id: int, action: int, env: int = 0) -> str:
        """Readable name of an action of one agent in env ``env`` (whose team decides heal or attack)."""
        agent_id = check_agent_id(agent_id, self.n_agents)
        f = self.v2.n_fov
        if action < 6:
            return super().action_name(agent_id, action)
        if action < 6 + f:
            return f"turn field of view {action - 6}"
        kind = "heal ally" if self.fast.medivac[env, agent_id] else "attack enemy"
        return f"{kind} {action - 6 - f}"

    def get_env_info(self) -> dict[str, Any]:
        """``SMACv2Env.get_env_info()`` (the same for every env)."""
        return dict(self._env_info)

    def env_stats(self, e: int) -> dict[str, Any]:
        """``SMACv2Env.get_stats()`` of env ``e``: SMAC's counters and the current episode's teams."""
        stats = _stats(int(self.battles_won[e]), int(self.battles_game[e]), int(self.timeouts[e]))
        spec = self.specs[e]
        if spec is not None:
            stats.update(
                ally_team=list(spec.ally_types),
                enemy_team=list(spec.enemy_types),
                start_positions=self.layouts[e],
            )
        return stats

    def rng_states(self) -> list[dict[str, Any]]:
        """Every env's team/position generator state (between episodes it decides all that follows)."""
        return [g.bit_generator.state for g in self._gens]

    def set_rng_states(self, states: list[dict[str, Any]]) -> None:
        """Restore :meth:`rng_states`."""
        for g, st in zip(self._gens, states, strict=True):
            g.bit_generator.state = st


class BatchedSMACv2VectorEnv(BatchedSmacVectorEnv):
    """The runner's vector-env interface over one :class:`BatchedSMACv2Env`; row ``r`` equals
    ``SMACv2Env(map, seed=seed + r)``."""

    def __init__(self, map_name: str, n_envs: int, seed: int | None = None, **args: Any) -> None:
        for k in SIM_IGNORED:
            args.pop(k, None)
        self.env = BatchedSMACv2Env(map_name, n_envs, seed, **args)
        self.n_envs = self.env.n_envs

    def rng_states(self) -> list[Any]:
        """Every row's generator state (for exact resume)."""
        return self.env.rng_states()

    def set_rng_states(self, states: list[Any]) -> None:
        """Restore :meth:`rng_states`."""
        self.env.set_rng_states(list(states))
