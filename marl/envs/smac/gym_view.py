"""The SMAC maps as Gymnasium multi-agent environments: ``gymnasium.make("marl/3m-v0")``.

The convention is the one of Gymnasium-registered multi-agent envs that EPyMARL (its ``gymma`` and SMAClite
wrappers) and similar tools drive: a ``Tuple`` of per-agent observation ``Box``es and of per-agent
``Discrete`` action spaces, ``step(list_of_ints) -> (obs tuple, team reward, terminated, truncated, info)``,
and on ``env.unwrapped`` the SMAC accessors those wrappers call: ``n_agents``, ``obs_size``,
``state_size``, ``get_obs()``, ``get_state()``, ``get_avail_actions()``.

* Every map is registered as ``marl/<map>-v0`` when this module is imported. Gymnasium's
  ``"module:env_id"`` form imports it for you: ``gymnasium.make("marl.envs.smac.gym_view:marl/3m-v0")``,
  which is also the ``key`` to give EPyMARL's ``gymma`` environment.
* ``terminated`` is a win, loss or draw; ``truncated`` is SMAC's step limit.
* ``info`` is SMAC's step info (``battle_won``, ``dead_allies``, ``dead_enemies``, and ``episode_limit``
  on a time-limit end when ``continuing_episode=True``, as in SMAC); reset gives the first three. Every
  value is a number: EPyMARL's runners sum them into their statistics. The action mask is only in
  ``get_avail_actions()``.
* ``unavailable_action="noop"`` (keyword of ``gymnasium.make``) replaces an unavailable action by the
  agent's no-op, or "stop" for a living unit: for tools that do not read ``get_avail_actions()`` (EPyMARL's
  generic ``gymma`` wrapper marks every action available). The default ``"error"`` raises.
* Other keywords are SMAC's (``seed``, ``backend``, option flags).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from marl.envs.pettingzoo_view import UNAVAILABLE_MODES, replacement_action
from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.maps import list_maps

NAMESPACE = "marl"
# info at reset: SMAC's step-info keys with their values before any step. Infos hold numbers only, as SMAC's:
# EPyMARL's runners add every info value of an episode's last step into their statistics.
RESET_INFO: dict[str, Any] = {"battle_won": False, "dead_allies": 0, "dead_enemies": 0}


class SmacGymEnv(gymnasium.Env):
    """One SMAC map (Samvelyan et al., 2019) behind Gymnasium's API, as multi-agent Gymnasium tools expect."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(
        self,
        map_name: str = "3m",
        seed: int | None = None,
        unavailable_action: str = "error",
        render_mode: str | None = None,
        **smac_flags: Any,
    ) -> None:
        if unavailable_action not in UNAVAILABLE_MODES:
            raise ValueError(
                f"unavailable_action must be one of {UNAVAILABLE_MODES}, got {unavailable_action!r}"
            )
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.smac = StarCraft2Env(map_name, seed=seed, **smac_flags)
        info = self.smac.env_info()
        self.n_agents, self.n_actions = info.n_agents, info.n_actions
        self.obs_size, self.state_size = info.obs_shape, info.state_shape
        self.episode_limit = info.episode_limit
        self.unavailable_action = unavailable_action
        self.render_mode = render_mode
        bounds = self.smac.feature_bounds()
        box = spaces.Box(*bounds["obs"], (self.obs_size,), np.float32)
        self.observation_space = spaces.Tuple([box] * self.n_agents)
        self.action_space = spaces.Tuple([spaces.Discrete(self.n_actions)] * self.n_agents)
        self.state_space = spaces.Box(*bounds["state"], (self.state_size,), np.float32)

    # -- Gymnasium -------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[np.ndarray, ...], dict[str, Any]]:
        """Start an episode (``seed`` reseeds the engine); returns (observations, info)."""
        super().reset(seed=seed)
        self.smac.reset(seed=seed)
        return self._obs(), dict(RESET_INFO)

    def step(self, actions: Any) -> tuple[tuple[np.ndarray, ...], float, bool, bool, dict[str, Any]]:
        """One joint action (a sequence of ints); returns (obs, team reward, terminated, truncated, info)."""
        joint = np.asarray(actions, dtype=np.int64).reshape(-1)
        if joint.shape != (self.n_agents,):
            raise ValueError(f"expected {self.n_agents} actions, got shape {np.shape(actions)}")
        if self.unavailable_action == "noop":
            avail = np.asarray(self.smac.get_avail_actions(), dtype=bool)
            for i, a in enumerate(joint):
                if not 0 <= a < self.n_actions or not avail[i, a]:
                    joint[i] = replacement_action(avail[i])
        timeouts = self.smac.get_stats()["timeouts"]
        reward, done, info = self.smac.step(joint.tolist())
        cut = self.smac.get_stats()["timeouts"] > timeouts or bool(info.get("episode_limit"))
        truncated = bool(done) and cut  # SMAC's step limit, not the end of the battle
        return self._obs(), float(reward), bool(done) and not truncated, truncated, info

    def render(self) -> np.ndarray | None:
        """The current frame (``render_mode="rgb_array"``)."""
        return self.smac.render() if self.render_mode == "rgb_array" else None

    def close(self) -> None:
        """Release the engine."""
        self.smac.close()

    # -- the SMAC accessors multi-agent wrappers call on ``env.unwrapped`` ------------------------------
    def get_obs(self) -> list[np.ndarray]:
        """Every agent's observation."""
        return [np.asarray(o, dtype=np.float32) for o in self.smac.get_obs()]

    def get_state(self) -> np.ndarray:
        """The global state (``state_size``)."""
        return np.asarray(self.smac.get_state(), dtype=np.float32)

    def get_avail_actions(self) -> list[list[int]]:
        """Every agent's available actions (0/1 per action)."""
        return [list(map(int, row)) for row in self.smac.get_avail_actions()]

    def get_stats(self) -> dict[str, Any]:
        """SMAC's battle counters."""
        return self.smac.get_stats()

    def _obs(self) -> tuple[np.ndarray, ...]:
        return tuple(self.get_obs())


def register_maps() -> None:
    """Register ``marl/<map>-v0`` for every SMAC map (idempotent)."""
    for name in list_maps():
        env_id = f"{NAMESPACE}/{name}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=SmacGymEnv, kwargs={"map_name": name})


register_maps()
