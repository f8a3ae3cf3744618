"""The multi-agent environment protocol (SMAC's method names) and ``EnvInfo``.

Every environment tells what it is through :meth:`MultiAgentEnv.get_env_info`; buffers, networks and
runners are sized from the returned :class:`EnvInfo` and from nothing else.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


class AgentIdError(IndexError, KeyError):
    """An agent id outside ``0..n_agents-1``: SMAC raises ``KeyError`` there, a list ``IndexError``; this is
    both (a negative id never silently means "count from the end")."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def check_agent_id(agent_id: Any, n_agents: int) -> int:
    """``agent_id`` as an int, or :class:`AgentIdError` naming it and the valid range."""
    ok = isinstance(agent_id, (int, np.integer)) and not isinstance(agent_id, (bool, np.bool_))
    if not ok or not 0 <= agent_id < n_agents:
        raise AgentIdError(f"agent_id {agent_id!r} is out of range: this env has agents 0..{n_agents - 1}")
    return int(agent_id)


@dataclass(frozen=True)
class EnvInfo:
    """What an environment is: team size, feature sizes, action space and episode limit.

    ``n_actions`` is the number of discrete actions (or, for continuous control, the action
    dimension with ``discrete=False``). ``episode_limit`` is the maximum number of agent steps
    in one episode; buffers pad every episode to ``episode_limit + 1`` time slots.
    """

    n_agents: int
    n_actions: int
    obs_shape: int
    state_shape: int
    episode_limit: int
    discrete: bool = True
    action_low: float = -1.0
    action_high: float = 1.0
    agent_features: tuple[str, ...] = field(default_factory=tuple)
    enemy_features: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("n_agents", "n_actions", "obs_shape", "state_shape", "episode_limit"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value <= 0:
                raise ValueError(f"EnvInfo.{name} must be a positive int, got {value!r}")

    @classmethod
    def from_dict(cls, info: dict[str, Any]) -> EnvInfo:
        """Build from a SMAC-style ``get_env_info()`` dict (extra keys are ignored)."""
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in info.items() if k in known}
        for k in ("agent_features", "enemy_features"):
            if k in kwargs:
                kwargs[k] = tuple(kwargs[k])
        return cls(**kwargs)

    def as_dict(self) -> dict[str, Any]:
        """SMAC-style dict (what ``get_env_info()`` returns)."""
        d = asdict(self)
        d["agent_features"] = list(self.agent_features)
        d["enemy_features"] = list(self.enemy_features)
        return d


class MultiAgentEnv(abc.ABC):
    """A cooperative team environment with SMAC's interface.

    Agents are numbered ``0..n_agents-1``; the reward is one float shared by the team.
    ``reset`` returns ``(obs_list, state)``; ``step(actions)`` returns ``(reward, terminated, info)``.
    ``info`` may carry ``episode_limit=True`` when an episode was cut by the time limit rather than
    ended by the task (runners store such steps as not terminated, so the learner bootstraps).
    """

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Start an episode; returns the per-agent observations and the global state."""

    @abc.abstractmethod
    def step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        """Apply one joint action; returns ``(reward, terminated, info)``."""

    @abc.abstractmethod
    def get_obs(self) -> list[np.ndarray]:
        """Per-agent observation vectors (float32, length ``obs_shape``)."""

    @abc.abstractmethod
    def get_state(self) -> np.ndarray:
        """Global state vector (float32, length ``state_shape``)."""

    @abc.abstractmethod
    def get_avail_actions(self) -> list[list[int]]:
        """Per-agent 0/1 masks of length ``n_actions`` (all ones for continuous actions)."""

    @abc.abstractmethod
    def get_env_info(self) -> dict[str, Any]:
        """SMAC-style info dict; ``EnvInfo.from_dict`` turns it into an :class:`EnvInfo`."""

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        """Observation of one agent (an id outside ``0..n_agents-1`` raises :class:`AgentIdError`)."""
        obs = self.get_obs()
        return obs[check_agent_id(agent_id, len(obs))]

    def get_avail_agent_actions(self, agent_id: int) -> list[int]:
        """Available-action mask of one agent (an id outside ``0..n_agents-1``: :class:`AgentIdError`)."""
        avail = self.get_avail_actions()
        return avail[check_agent_id(agent_id, len(avail))]

    def get_obs_size(self) -> int:
        """Observation length."""
        return int(self.get_env_info()["obs_shape"])

    def get_state_size(self) -> int:
        """State length."""
        return int(self.get_env_info()["state_shape"])

    def get_total_actions(self) -> int:
        """Number of actions per agent."""
        return int(self.get_env_info()["n_actions"])

    def get_stats(self) -> dict[str, Any]:
        """Environment statistics (SMAC: battles won/played, win rate, ...)."""
        return {}

    def env_info(self) -> EnvInfo:
        """Typed :class:`EnvInfo` of this environment."""
        return EnvInfo.from_dict(self.get_env_info())

    def engine_info(self) -> dict[str, Any]:
        """The engine behind this env and its version (SMAC: ``engine_version``, ``backend``, ...), which
        run provenance and reports carry; empty for environments without a versioned engine."""
        return {}

    def feature_bounds(self) -> dict[str, tuple[float, float]]:
        """Bounds of every value of ``obs`` and ``state`` (for declared spaces); default: unknown."""
        return {"obs": (-np.inf, np.inf), "state": (-np.inf, np.inf)}

    def close(self) -> None:
        """Release resources."""

    def render(self, mode: str = "rgb_array") -> np.ndarray | None:
        """Render the current frame (RGB array) where supported."""
        return None

    def save_replay(self, replay_format: str = "gif") -> str | None:
        """Save a replay of the last episode where supported (``replay_format``: ``gif`` or ``mp4`` where the
        env draws its own frames); returns its path."""
        return None
