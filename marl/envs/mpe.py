"""PettingZoo MPE (the maintained ``mpe2`` package) as a :class:`MultiAgentEnv`.

Scenarios: simple (one agent reaching a landmark: a quick sanity task), simple_spread, simple_reference,
simple_speaker_listener (cooperative: every agent is controlled)
and simple_tag, simple_adversary (competitive: ``team`` picks the controlled side, the other side is played
by a fixed heuristic, see :func:`heuristic_actions`). ``map_name`` is the scenario, with or without the
PettingZoo version suffix (``simple_spread`` or ``simple_spread_v3``).

Conventions (all sizes reach the learner through :class:`EnvInfo`):

* **actions**: discrete (``Discrete(k)`` per agent; ``n_actions`` is the largest ``k`` and the extra actions
  of agents with fewer are masked out in ``avail_actions``) or, with ``continuous_actions=True``,
  continuous (``EnvInfo.discrete=False``, ``n_actions`` = the largest action dimension, bounds
  ``action_low=0, action_high=1`` as in MPE; actions are clipped to the bounds and extra dimensions of
  smaller agents are dropped).
* **observations**: padded with zeros to the longest controlled agent's observation. When the controlled
  agents' sizes differ (simple_speaker_listener: 3 and 11), one feature is appended: 1.0 for an agent whose
  observation was padded, 0.0 otherwise (the mask feature), so the shared network can tell them apart.
* **state**: PettingZoo's ``state()`` (every agent's observation concatenated, both teams included).
* **reward**: the team reward is the ``reward`` (``sum``, default, or ``mean``) of the controlled agents'
  rewards. MPE has no win notion: ``info["battle_won"]`` is always False.
* **episode end**: MPE scenarios never terminate; an episode lasts ``max_cycles`` steps (default 25), which
  is ``episode_limit``. The last step returns ``terminated=True`` with ``info["episode_limit"]=True``, so
  runners store it as a time-limit cut and learners bootstrap.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from marl.envs.base import MultiAgentEnv
from marl.registry import register

# scenario -> (mpe2 module, default controlled team, teams allowed)
SCENARIOS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "simple": ("simple_v3", "all", ("all",)),
    "simple_spread": ("simple_spread_v3", "all", ("all",)),
    "simple_reference": ("simple_reference_v3", "all", ("all",)),
    "simple_speaker_listener": ("simple_speaker_listener_v4", "all", ("all",)),
    "simple_tag": ("simple_tag_v3", "adversary", ("adversary", "agent")),
    "simple_adversary": ("simple_adversary_v3", "agent", ("agent", "adversary")),
}
REWARD_MODES = ("sum", "mean")


def scenario_name(map_name: str) -> str:
    """``simple_spread_v3`` -> ``simple_spread``; unknown names raise with the list of valid ones."""
    base = map_name.rsplit("_v", 1)[0] if map_name.rsplit("_v", 1)[-1].isdigit() else map_name
    if base not in SCENARIOS:
        raise ValueError(
            f"unknown MPE scenario {map_name!r}; valid: {', '.join(sorted(SCENARIOS))} "
            "(a PettingZoo version suffix such as _v3 is accepted)"
        )
    return base


def _direction_action(d_K2: np.ndarray, continuous: bool, dim: int) -> np.ndarray:
    """Actions moving along ``d`` (MPE: discrete 1=-x 2=+x 3=-y 4=+y; continuous [_, -x, +x, -y, +y])."""
    if continuous:
        out = np.zeros((len(d_K2), dim), np.float32)
        out[:, 1], out[:, 2] = np.maximum(-d_K2[:, 0], 0), np.maximum(d_K2[:, 0], 0)
        out[:, 3], out[:, 4] = np.maximum(-d_K2[:, 1], 0), np.maximum(d_K2[:, 1], 0)
        scale = np.maximum(out.max(axis=1, keepdims=True), 1e-8)
        return out / scale
    horizontal = np.abs(d_K2[:, 0]) >= np.abs(d_K2[:, 1])
    act = np.where(horizontal, np.where(d_K2[:, 0] < 0, 1, 2), np.where(d_K2[:, 1] < 0, 3, 4))
    return act.astype(np.int64)


def heuristic_actions(scenario: str, world: Any, names: list[str], continuous: bool, dim: int) -> np.ndarray:
    """Fixed policy of the uncontrolled side of a competitive scenario (reads the MPE world directly).

    simple_tag: predators chase the prey; the prey flees the nearest predator, pulled back to the centre
    (MPE penalises leaving the arena). simple_adversary: good agents head for the goal landmark; the
    adversary heads for the landmark closest to the nearest good agent.
    """
    agents = {a.name: a for a in world.agents}
    dirs = []
    for name in names:
        me = agents[name]
        pos = me.state.p_pos
        if scenario == "simple_tag":
            others = [a for a in world.agents if a.adversary != me.adversary]
            rel = np.array([a.state.p_pos - pos for a in others])
            nearest = rel[np.argmin((rel**2).sum(1))]
            dirs.append(nearest if me.adversary else -nearest - 0.5 * pos)
        elif me.adversary:  # simple_adversary's adversary
            good = [a.state.p_pos for a in world.agents if not a.adversary]
            target = min(good, key=lambda p: float(((p - pos) ** 2).sum()))
            mark = min(world.landmarks, key=lambda m: float(((m.state.p_pos - target) ** 2).sum()))
            dirs.append(mark.state.p_pos - pos)
        else:
            dirs.append(me.goal_a.state.p_pos - pos)
    return _direction_action(np.asarray(dirs, np.float64).reshape(-1, 2), continuous, dim)


@register("env", "mpe")
class MPEEnv(MultiAgentEnv):
    """One MPE scenario through PettingZoo's parallel API (see the module docstring for conventions)."""

    def __init__(
        self,
        map_name: str = "simple_spread",
        backend: str = "auto",
        seed: int | None = None,
        continuous_actions: bool = False,
        max_cycles: int = 25,
        team: str | None = None,
        reward: str = "sum",
        **scenario_kwargs: Any,
    ) -> None:
        del backend  # SMAC-only option; accepted so every env takes the same factory arguments
        self.scenario = scenario_name(map_name)
        module, default_team, teams = SCENARIOS[self.scenario]
        team = team or default_team
        if team not in teams:
            raise ValueError(f"team {team!r} is not a side of {self.scenario}; allowed: {', '.join(teams)}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward {reward!r} unknown; allowed: {', '.join(REWARD_MODES)}")
        if int(max_cycles) < 1:
            raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
        mod = importlib.import_module(f"mpe2.{module}")
        self.env = mod.parallel_env(
            max_cycles=int(max_cycles), continuous_actions=bool(continuous_actions), **scenario_kwargs
        )
        self.continuous, self.max_cycles, self.reward_mode = bool(continuous_actions), int(max_cycles), reward
        self.all_agents = list(self.env.possible_agents)
        if team == "all":
            self.controlled = list(self.all_agents)
        else:
            self.controlled = [a for a in self.all_agents if a.startswith(team)]
        self.others = [a for a in self.all_agents if a not in self.controlled]
        self.n_agents = len(self.controlled)
        spaces = {a: self.env.action_space(a) for a in self.all_agents}
        sizes = {a: int(spaces[a].shape[0]) if self.continuous else int(spaces[a].n) for a in self.all_agents}
        self.act_sizes = [sizes[a] for a in self.controlled]
        self.other_sizes = [sizes[a] for a in self.others]
        self.n_actions = max(self.act_sizes)
        self.obs_sizes = [int(self.env.observation_space(a).shape[0]) for a in self.controlled]
        self.obs_pad = max(self.obs_sizes)
        self.mask_feature = len(set(self.obs_sizes)) > 1
        self.obs_shape = self.obs_pad + (1 if self.mask_feature else 0)
        self._seed = seed
        self._obs: dict[str, np.ndarray] = {}
        self.t = 0
        self.reset(seed)
        self.state_shape = int(self.get_state().shape[0])

    # -- episode ---------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        if seed is None and self._seed is not None:  # the first reset seeds the scenario's RNG
            seed, self._seed = self._seed, None
        self._obs, _ = self.env.reset(seed=seed)
        self.t = 0
        return self.get_obs(), self.get_state()

    def step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        acts = np.asarray(actions)
        if self.continuous:
            acts = np.asarray(acts, np.float32).reshape(self.n_agents, -1)
            if acts.shape[1] != self.n_actions:
                raise ValueError(
                    f"expected actions of shape ({self.n_agents}, {self.n_actions}), got {acts.shape}"
                )
            acts = np.clip(acts, 0.0, 1.0)
        else:
            acts = acts.astype(np.int64).reshape(-1)
            if acts.shape[0] != self.n_agents:
                raise ValueError(f"expected {self.n_agents} actions, got {acts.shape[0]}")
        joint: dict[str, Any] = {}
        for i, name in enumerate(self.controlled):
            k = self.act_sizes[i]
            if self.continuous:
                joint[name] = acts[i, :k]
            else:
                if not 0 <= acts[i] < k:
                    raise ValueError(f"agent {i} ({name}): action {int(acts[i])} not in [0, {k})")
                joint[name] = int(acts[i])
        if self.others:
            dim = max(self.other_sizes)
            other = heuristic_actions(
                self.scenario, self.env.unwrapped.world, self.others, self.continuous, dim
            )
            for j, name in enumerate(self.others):
                joint[name] = other[j, : self.other_sizes[j]] if self.continuous else int(other[j])
        obs, rewards, terms, truncs, _ = self.env.step(joint)
        self._obs = obs
        self.t += 1
        team = [float(rewards[a]) for a in self.controlled]
        reward = float(np.sum(team)) if self.reward_mode == "sum" else float(np.mean(team))
        terminated = any(terms.get(a, False) for a in self.controlled)
        timeout = not terminated and (self.t >= self.max_cycles or any(truncs.values()))
        info: dict[str, Any] = {"battle_won": False}
        if timeout:
            info["episode_limit"] = True
        return reward, bool(terminated or timeout), info

    # -- views -----------------------------------------------------------------------------------
    def get_obs(self) -> list[np.ndarray]:
        out = []
        for name, size in zip(self.controlled, self.obs_sizes, strict=True):
            o = np.zeros(self.obs_shape, np.float32)
            o[:size] = self._obs[name]
            if self.mask_feature:
                o[-1] = 1.0 if size < self.obs_pad else 0.0
            out.append(o)
        return out

    def get_state(self) -> np.ndarray:
        return np.asarray(self.env.state(), np.float32).reshape(-1)

    def get_avail_actions(self) -> list[list[int]]:
        if self.continuous:
            return [[1] * self.n_actions for _ in range(self.n_agents)]
        return [[1] * k + [0] * (self.n_actions - k) for k in self.act_sizes]

    def get_env_info(self) -> dict[str, Any]:
        return {
            "n_agents": self.n_agents,
            "n_actions": self.n_actions,
            "obs_shape": self.obs_shape,
            "state_shape": self.state_shape,
            "episode_limit": self.max_cycles,
            "discrete": not self.continuous,
            "action_low": 0.0,
            "action_high": 1.0,
        }

    def close(self) -> None:
        self.env.close()
