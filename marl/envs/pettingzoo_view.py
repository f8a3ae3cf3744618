"""A PettingZoo ``ParallelEnv`` view of any SMAC-style :class:`~marl.envs.base.MultiAgentEnv`.

``to_pettingzoo(env)`` wraps an environment of this library (the embedded SMAC engine, the fake env, ...)
so that PettingZoo tooling and other libraries can drive it; ``pettingzoo_env("3m")`` builds
``marl.envs.smac.StarCraft2Env("3m")`` and wraps it.

Conventions of the view:

* agents are ``"agent_0" .. "agent_{n-1}"``; each observation is a dict
  ``{"observation": float32[obs_shape], "action_mask": int8[n_actions]}`` (PettingZoo's masked-action
  convention). The observation is the **only** place of the mask;
* ``infos[agent]`` has the same keys at reset and at every step: ``battle_won``, ``dead_allies``,
  ``dead_enemies`` and ``episode_limit`` (True only on a time-limit end), from the env's step info;
* every agent that acted gets the shared team reward;
* an agent that dies (SMAC: its only available action is the no-op) is terminated and removed from
  ``agents``; the view sends the no-op for it. Actions given for agents no longer in ``agents`` are
  ignored (libraries such as TorchRL send one for every possible agent);
* an episode cut by the time limit truncates every live agent; any other end (win, loss, draw) terminates
  them. A time-limit cut is recognised by SMAC's ``info["episode_limit"]`` or, exactly, by a rise of
  SMAC's ``get_stats()["timeouts"]`` counter; for an env without that counter, by the episode limit
  being reached without a win (agents that died are terminated either way). ``max_cycles=k`` cuts every
  episode after at most ``k`` steps (a truncation), for ``1 <= k <= episode_limit``;
* an action outside an agent's mask raises ``ValueError`` with ``unavailable_action="error"`` (the
  default); with ``"noop"`` it is replaced by the agent's no-op when available, else by its first available
  action (SMAC's "stop" for a living unit): for tools that sample unmasked actions, such as PettingZoo's
  ``parallel_seed_test`` and ``max_cycles_test``;
* spaces carry the env's true bounds (:meth:`MultiAgentEnv.feature_bounds`: SMAC observations in [-1, 1]);
* ``render_mode="rgb_array"`` returns frames, ``"human"`` shows them in a pygame window.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from marl.envs.base import MultiAgentEnv

RENDER_MODES = ("human", "rgb_array")
UNAVAILABLE_MODES = ("error", "noop")
# infos keys at reset and every step, with their reset values
INFO_DEFAULTS: dict[str, Any] = {
    "battle_won": False,
    "dead_allies": 0,
    "dead_enemies": 0,
    "episode_limit": False,
}


class MultiAgentParallelEnv(ParallelEnv):
    """PettingZoo ``ParallelEnv`` over a SMAC-style :class:`MultiAgentEnv` (see the module docstring)."""

    metadata = {
        "render_modes": list(RENDER_MODES),
        "name": "marl_smac_v0",
        "is_parallelizable": True,
        "render_fps": 8,
    }

    def __init__(
        self,
        env: MultiAgentEnv,
        render_mode: str | None = None,
        noop_action: int = 0,
        unavailable_action: str = "error",
        max_cycles: int | None = None,
    ) -> None:
        if not isinstance(env, MultiAgentEnv):
            raise TypeError(f"to_pettingzoo expects a marl.envs.base.MultiAgentEnv, got {type(env).__name__}")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be None or one of {RENDER_MODES}, got {render_mode!r}")
        info = env.env_info()
        if not info.discrete:
            raise ValueError("to_pettingzoo supports discrete actions only (got EnvInfo.discrete=False)")
        if not 0 <= noop_action < info.n_actions:
            raise ValueError(f"noop_action must be in [0, {info.n_actions}), got {noop_action}")
        if unavailable_action not in UNAVAILABLE_MODES:
            raise ValueError(
                f"unavailable_action must be one of {UNAVAILABLE_MODES}, got {unavailable_action!r}"
            )
        limit = info.episode_limit
        if max_cycles is not None and (
            isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or not 1 <= max_cycles <= limit
        ):
            raise ValueError(
                f"max_cycles must be an int in [1, {limit}] (the env's episode_limit), got {max_cycles!r}"
            )
        self.env = env
        self.env_info = info
        self.render_mode = render_mode
        self.noop_action = int(noop_action)
        self.unavailable_action = unavailable_action
        self.max_cycles = limit if max_cycles is None else max_cycles
        self._window: Any = None
        self.possible_agents = [f"agent_{i}" for i in range(info.n_agents)]
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        bounds = env.feature_bounds()
        self.observation_spaces = {
            a: spaces.Dict(
                {
                    "observation": spaces.Box(*bounds["obs"], (info.obs_shape,), np.float32),
                    "action_mask": spaces.MultiBinary(info.n_actions),
                }
            )
            for a in self.possible_agents
        }
        self.action_spaces = {a: spaces.Discrete(info.n_actions) for a in self.possible_agents}
        self.state_space = spaces.Box(*bounds["state"], (info.state_shape,), np.float32)
        self.agents: list[str] = []
        self._t = 0
        self._episode_over = True
        self._timeouts_at_reset: int | None = None

    # -- spaces --------------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        """Observation space of ``agent`` (the same object on every call)."""
        return self.observation_spaces[self._check_agent(agent)]

    def action_space(self, agent: str) -> spaces.Space:
        """Action space of ``agent`` (the same object on every call)."""
        return self.action_spaces[self._check_agent(agent)]

    def _check_agent(self, agent: str) -> str:
        if agent not in self._index:
            raise ValueError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
        return agent

    # -- episode -------------------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, Any]]]:
        """Start an episode; ``seed`` seeds the env and the action spaces, ``options`` is unused."""
        self.env.reset(seed=seed)
        if seed is not None:
            for i, agent in enumerate(self.possible_agents):
                self.action_spaces[agent].seed(seed + i)
        self._t = 0
        self._episode_over = False
        self._timeouts_at_reset = self._timeouts()
        masks = self._masks()
        self.agents = [a for a in self.possible_agents if not self._is_dead(masks[self._index[a]])]
        obs = self._observations(self.agents, masks)
        return obs, {a: dict(INFO_DEFAULTS) for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Apply one joint action; returns ``(observations, rewards, terminations, truncations, infos)``."""
        if self._episode_over:
            raise RuntimeError("the episode is over (or reset() was never called): call reset() first")
        joint = self._joint_action(actions)
        reward, terminated, step_info = self.env.step(joint)
        self._t += 1
        acting = list(self.agents)
        masks = self._masks()
        dead = {a for a in acting if self._is_dead(masks[self._index[a]])}
        cut = self._t >= self.max_cycles and not terminated  # the view's own limit (max_cycles)
        timeout = cut or (bool(terminated) and self._is_timeout(step_info))
        terminated = bool(terminated) or cut
        terminations = {a: (bool(terminated) and not timeout) or a in dead for a in acting}
        truncations = {a: timeout and a not in dead for a in acting}
        obs = self._observations(acting, masks)
        rewards = {a: float(reward) for a in acting}
        info = {k: type(v)(step_info.get(k, v)) for k, v in INFO_DEFAULTS.items()}
        info["episode_limit"] = timeout
        infos = {a: dict(info) for a in acting}
        self.agents = [a for a in acting if not (terminations[a] or truncations[a])]
        self._episode_over = bool(terminated) or not self.agents
        return obs, rewards, terminations, truncations, infos

    def _joint_action(self, actions: dict[str, Any]) -> list[int]:
        """Check ``actions`` against names and masks (``unavailable_action``); removed agents send no-ops."""
        if not isinstance(actions, dict):
            raise TypeError(f"actions must be a dict agent -> int, got {type(actions).__name__}")
        masks = self._masks()
        live = set(self.agents)
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for live agents {missing}; every agent in env.agents must act")
        joint = [self.noop_action] * self.env_info.n_agents
        for agent, raw in actions.items():
            i = self._index[self._check_agent(agent)]
            if agent not in live:
                continue  # a removed agent: whatever it sends, the view sends its no-op
            a = _as_action(agent, raw)
            if not 0 <= a < self.env_info.n_actions or not masks[i][a]:
                if self.unavailable_action == "error":
                    allowed = np.flatnonzero(masks[i]).tolist()
                    raise ValueError(f"{agent}: action {a} is not available (available actions: {allowed})")
                a = replacement_action(masks[i], self.noop_action)
            joint[i] = a
        return joint

    def _is_dead(self, mask: np.ndarray) -> bool:
        """SMAC's convention: a dead agent's only available action is the no-op."""
        return bool(mask[self.noop_action]) and int(mask.sum()) == 1

    def _is_timeout(self, step_info: dict[str, Any]) -> bool:
        """Was this episode end a time-limit cut rather than a task end?"""
        if step_info.get("episode_limit"):
            return True
        timeouts = self._timeouts()
        if timeouts is not None and self._timeouts_at_reset is not None:
            return timeouts > self._timeouts_at_reset
        # Fallback: the limit was reached without a win. Agents that died are terminated regardless, so
        # only a loss with survivors (SMAC's MMM rule: only Medivacs left) would be mislabelled.
        return self._t >= self.env_info.episode_limit and not step_info.get("battle_won")

    def _timeouts(self) -> int | None:
        """SMAC's count of time-limit ends, when the env keeps one."""
        value = self.env.get_stats().get("timeouts")
        return None if value is None else int(value)

    def _masks(self) -> np.ndarray:
        masks = np.asarray(self.env.get_avail_actions(), dtype=np.int8)
        expected = (self.env_info.n_agents, self.env_info.n_actions)
        if masks.shape != expected:
            raise ValueError(f"env.get_avail_actions() has shape {masks.shape}, expected {expected}")
        return masks

    def _observations(self, agents: list[str], masks: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        obs_list = self.env.get_obs()
        return {
            a: {
                "observation": np.asarray(obs_list[self._index[a]], dtype=np.float32),
                "action_mask": masks[self._index[a]].copy(),
            }
            for a in agents
        }

    # -- extras --------------------------------------------------------------------------------------
    def state(self) -> np.ndarray:
        """Global state (float32, ``state_shape``) for centralised training."""
        return np.asarray(self.env.get_state(), dtype=np.float32)

    def render(self) -> np.ndarray | None:
        """``rgb_array``: the wrapped env's RGB frame; ``human``: that frame drawn in a pygame window."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() called with render_mode=None; pass render_mode='rgb_array'")
            return None
        frame = self.env.render(mode="rgb_array")
        if self.render_mode == "rgb_array":
            return frame
        self._show(frame)
        return None

    def _show(self, frame: np.ndarray) -> None:
        """Draw ``frame`` (H, W, 3) uint8 in this view's pygame window (opened on first use)."""
        import pygame  # pygame-ce, a dependency of mpe2

        if self._window is None:
            pygame.init()
            pygame.display.set_caption(f"marl: {self.metadata['name']}")
            self._window = pygame.display.set_mode((frame.shape[1], frame.shape[0]))
        pygame.event.pump()  # keeps the window responsive
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(frame.transpose(1, 0, 2)))
        self._window.blit(surface, (0, 0))
        pygame.display.flip()

    def close(self) -> None:
        """Close the wrapped environment (and the window of ``render_mode="human"``)."""
        if self._window is not None:
            import pygame

            pygame.display.quit()
            self._window = None
        self.env.close()


def replacement_action(mask: np.ndarray, noop_action: int = 0) -> int:
    """What ``unavailable_action="noop"`` sends instead of an unavailable action: the no-op when the mask
    allows it (a dead SMAC agent), else the first available action ("stop" for a living SMAC unit)."""
    return int(noop_action) if mask[noop_action] else int(np.flatnonzero(mask)[0])


def _as_action(agent: str, raw: Any) -> int:
    """An integer action from an int, a NumPy integer or a one-element integer array."""
    arr = np.asarray(raw)
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{agent}: an action must be one integer, got {raw!r}")
    return int(arr.reshape(()))


def to_pettingzoo(
    env: MultiAgentEnv,
    render_mode: str | None = None,
    noop_action: int = 0,
    unavailable_action: str = "error",
    max_cycles: int | None = None,
) -> MultiAgentParallelEnv:
    """Wrap a SMAC-style ``MultiAgentEnv`` as a PettingZoo ``ParallelEnv`` (see the module docstring)."""
    return MultiAgentParallelEnv(env, render_mode, noop_action, unavailable_action, max_cycles)


def pettingzoo_env(
    map_name: str,
    render_mode: str | None = None,
    unavailable_action: str = "error",
    max_cycles: int | None = None,
    **kwargs: Any,
) -> MultiAgentParallelEnv:
    """``StarCraft2Env(map_name, **kwargs)`` (SMAC; the embedded engine unless the game is installed and
    ``backend`` asks for it), or ``SMACv2Env`` for a SMACv2 scenario name, as a PettingZoo ``ParallelEnv``."""
    from marl.envs.smac.env import StarCraft2Env  # lazy; the module, not the package (which imports this one)
    from marl.envs.smac.smacv2.env import SMACv2Env
    from marl.envs.smac.smacv2.scenarios import is_scenario

    env = SMACv2Env(map_name, **kwargs) if is_scenario(map_name) else StarCraft2Env(map_name, **kwargs)
    return to_pettingzoo(env, render_mode, 0, unavailable_action, max_cycles)
