"""Gymnasium adapter: a single-agent Gymnasium environment as a 1-agent :class:`MultiAgentEnv`.

So the single-agent baselines (DQN, DDPG, PPO, policy gradient) run on the same runner, buffers, trainer,
logging and checkpoints as the multi-agent algorithms:

* ``obs = state =`` the env's observation, flattened to float32 (``obs_shape = state_shape``);
* a ``Discrete(n)`` action space gives ``n_actions = n`` (all actions always available); a ``Box`` action
  space gives ``EnvInfo.discrete=False`` and ``n_actions =`` the action dimension. Continuous actions are
  exchanged in ``[-1, 1]`` (``EnvInfo.action_low/high``) and scaled linearly to the env's bounds
  ``low + (a + 1) / 2 * (high - low)`` (out-of-range values are clipped first), so a learner never needs
  to know the env's own bounds;
* ``episode_limit`` is the env's ``max_episode_steps`` (its ``TimeLimit``) unless given;
* a Gymnasium *truncation* is a time-limit cut: ``step`` returns ``terminated=True`` with
  ``info["episode_limit"] = True`` (the runner stores it as not terminated, so learners bootstrap); a
  Gymnasium *termination* is a task end. The reward is the env's reward.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from marl.envs.base import MultiAgentEnv
from marl.registry import register


def _make(env_id: str, **kwargs: Any) -> Any:
    import gymnasium as gym

    if env_id not in gym.registry:
        known = sorted(gym.registry)
        close = difflib.get_close_matches(env_id, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(
            f"unknown Gymnasium id {env_id!r}.{hint} Known ids include: "
            f"{', '.join(k for k in known if '/' not in k)[:600]} ..."
        )
    return gym.make(env_id, **kwargs)


class GymEnv(MultiAgentEnv):
    """One Gymnasium env seen as a team of one agent (see the module docstring for the conventions)."""

    def __init__(
        self, env_id: str, seed: int | None = None, episode_limit: int | None = None, **make_kwargs: Any
    ) -> None:
        import gymnasium as gym

        self.env_id = env_id
        self.env = _make(env_id, **make_kwargs)
        space = self.env.action_space
        if isinstance(space, gym.spaces.Discrete):
            self.discrete, self.n_actions, self._start = True, int(space.n), int(space.start)
        elif isinstance(space, gym.spaces.Box):
            if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
                raise ValueError(f"{env_id}: a Box action space needs finite bounds, got {space}")
            self.discrete, self.n_actions = False, int(np.prod(space.shape))
            self._low = np.asarray(space.low, np.float64).reshape(-1)
            self._high = np.asarray(space.high, np.float64).reshape(-1)
        else:
            raise ValueError(f"{env_id}: action space {space} is not supported (Discrete or Box only)")
        limit = episode_limit or (self.env.spec.max_episode_steps if self.env.spec is not None else None)
        if not limit:
            raise ValueError(f"{env_id} has no max_episode_steps; pass env.args.episode_limit=<steps>")
        self.episode_limit = int(limit)
        self.obs_dim = int(np.prod(self.env.observation_space.shape))
        self._seed = seed
        self._obs = np.zeros(self.obs_dim, np.float32)
        self.t = 0
        self.stats = {"episodes": 0, "truncated": 0}

    def scale_action(self, a: np.ndarray) -> np.ndarray:
        """``[-1, 1]`` → the env's ``[low, high]`` (clipped first); identity for discrete envs."""
        a = np.clip(np.asarray(a, np.float64).reshape(-1), -1.0, 1.0)
        return (self._low + (a + 1.0) * 0.5 * (self._high - self._low)).astype(np.float32)

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        if seed is None and self._seed is not None:  # the first reset seeds the env, later ones continue
            seed, self._seed = self._seed, None
        obs, _ = self.env.reset(seed=seed)
        if seed is not None:
            self.env.action_space.seed(seed)
        self._obs = np.asarray(obs, np.float32).reshape(-1)
        self.t = 0
        return self.get_obs(), self.get_state()

    def step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        a = np.asarray(actions)
        if self.discrete:
            if a.size != 1:
                raise ValueError(f"{self.env_id}: expected 1 discrete action, got shape {a.shape}")
            idx = int(a.reshape(-1)[0])
            if not 0 <= idx < self.n_actions:
                raise ValueError(f"{self.env_id}: action {idx} outside 0..{self.n_actions - 1}")
            env_action: Any = idx + self._start
        else:
            if a.size != self.n_actions:
                raise ValueError(
                    f"{self.env_id}: expected {self.n_actions} action values, got shape {a.shape}"
                )
            env_action = self.scale_action(a).reshape(self.env.action_space.shape)
        obs, reward, terminated, truncated, _ = self.env.step(env_action)
        self._obs = np.asarray(obs, np.float32).reshape(-1)
        self.t += 1
        info: dict[str, Any] = {}
        done = bool(terminated or truncated)
        if truncated and not terminated:
            info["episode_limit"] = True  # a time-limit cut, not a task end: learners bootstrap
            self.stats["truncated"] += 1
        if done:
            self.stats["episodes"] += 1
        return float(reward), done, info

    def get_obs(self) -> list[np.ndarray]:
        return [self._obs.copy()]

    def get_state(self) -> np.ndarray:
        return self._obs.copy()

    def get_avail_actions(self) -> list[list[int]]:
        return [[1] * self.n_actions]

    def get_env_info(self) -> dict[str, Any]:
        return {
            "n_agents": 1,
            "n_actions": self.n_actions,
            "obs_shape": self.obs_dim,
            "state_shape": self.obs_dim,
            "episode_limit": self.episode_limit,
            "discrete": self.discrete,
            "action_low": -1.0,
            "action_high": 1.0,
        }

    def get_stats(self) -> dict[str, Any]:
        return dict(self.stats)

    def render(self, mode: str = "rgb_array") -> np.ndarray | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


@register("env", "gym")
def make_gym_env(
    map_name: str = "CartPole-v1", backend: str = "auto", seed: int | None = None, **kwargs: Any
) -> GymEnv:
    """Registry factory: ``map_name`` is the Gymnasium id (``--env gym --map Pendulum-v1``); ``backend`` is
    accepted for CLI symmetry and ignored; other ``env.args`` go to ``gymnasium.make`` (``episode_limit``
    overrides the env's time limit)."""
    return GymEnv(map_name, seed=seed, **kwargs)
