"""A tiny SMAC-like environment for tests and debugging (no engine, no game).

``FakeSmacEnv`` keeps SMAC's interface and conventions (action 0 = no-op only for dead agents, 1 = stop,
``6 + j``-style "attack" actions, availability masks, ``battle_won`` in ``info``, timeouts at
``episode_limit``) with trivially cheap dynamics that a value-decomposition learner can still learn:

* there are ``n_enemies`` enemies with ``enemy_hp`` health each; attack action ``n_fixed + j`` on a living
  enemy removes one health point; enemy ``j`` is attackable by agent ``i`` only while ``(i + j + t) % 3 != 0``
  (so availability changes over time);
* every step each living enemy hits one random agent with probability ``enemy_hit_prob``; an agent dies
  after ``agent_hp`` hits;
* reward = health removed + ``kill_bonus`` per kill (+ ``win_bonus`` when all enemies are dead);
  the episode ends on a win, a loss or at ``episode_limit`` (with ``continuing_episode=True`` a time-limit
  end carries ``info["episode_limit"] = True``, as in SMAC).

Focusing fire ends the episode quickly (fewer hits taken), so a learned policy wins more often than a
random one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl.envs.base import MultiAgentEnv, check_agent_id
from marl.registry import register

N_FIXED = 2  # 0 no-op, 1 stop


class FakeSmacEnv(MultiAgentEnv):
    """A cheap cooperative "focus fire" task with SMAC's interface (see module docstring)."""

    def __init__(
        self,
        n_agents: int = 3,
        n_enemies: int = 2,
        episode_limit: int = 10,
        enemy_hp: int = 4,
        agent_hp: int = 2,
        enemy_hit_prob: float = 0.3,
        kill_bonus: float = 2.0,
        win_bonus: float = 5.0,
        continuing_episode: bool = False,
        seed: int | None = None,
    ) -> None:
        if n_agents < 1 or n_enemies < 1 or episode_limit < 1:
            raise ValueError("n_agents, n_enemies and episode_limit must be >= 1")
        self.n_agents, self.n_enemies, self.episode_limit = n_agents, n_enemies, episode_limit
        self.n_actions = N_FIXED + n_enemies
        self.enemy_hp0, self.agent_hp0 = enemy_hp, agent_hp
        self.hit_prob, self.kill_bonus, self.win_bonus = enemy_hit_prob, kill_bonus, win_bonus
        self.continuing_episode = continuing_episode
        self.rng = np.random.default_rng(seed)
        self.stats = {"battles_won": 0, "battles_game": 0, "battles_draw": 0, "timeouts": 0, "restarts": 0}
        self.reset()

    def get_rng_state(self) -> dict[str, Any]:
        """The env's random-stream state (for exact resume)."""
        return self.rng.bit_generator.state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Continue the random stream saved by :meth:`get_rng_state`."""
        self.rng.bit_generator.state = state

    # -- episode ---------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.enemy_hp = np.full(self.n_enemies, self.enemy_hp0, dtype=np.int64)
        self.agent_hp = np.full(self.n_agents, self.agent_hp0, dtype=np.int64)
        self.last_actions = np.zeros(self.n_agents, dtype=np.int64)
        return self.get_obs(), self.get_state()

    def step(self, actions: Any) -> tuple[float, bool, dict[str, Any]]:
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        if actions.shape[0] != self.n_agents:
            raise ValueError(f"expected {self.n_agents} actions, got {actions.shape[0]}")
        avail = np.asarray(self.get_avail_actions())
        for i, a in enumerate(actions):
            if not 0 <= a < self.n_actions or not avail[i, a]:
                allowed = np.flatnonzero(avail[i]).tolist()
                raise ValueError(f"agent {i}: action {int(a)} is not available (available: {allowed})")
        hp_before = self.enemy_hp.copy()
        for a in actions:
            if a >= N_FIXED:
                j = a - N_FIXED
                self.enemy_hp[j] = max(0, self.enemy_hp[j] - 1)
        kills = int(((hp_before > 0) & (self.enemy_hp == 0)).sum())
        reward = float((hp_before - self.enemy_hp).sum()) + self.kill_bonus * kills
        for _ in range(int((self.enemy_hp > 0).sum())):
            alive = np.flatnonzero(self.agent_hp > 0)
            if len(alive) and self.rng.random() < self.hit_prob:
                self.agent_hp[self.rng.choice(alive)] -= 1
        self.last_actions = actions
        self.t += 1
        won = bool((self.enemy_hp == 0).all() and (self.agent_hp > 0).any())
        lost = bool((self.agent_hp <= 0).all())
        if won:
            reward += self.win_bonus
        terminated = won or lost or self.t >= self.episode_limit
        info: dict[str, Any] = {
            "battle_won": won,
            "dead_allies": int((self.agent_hp <= 0).sum()),
            "dead_enemies": int((self.enemy_hp == 0).sum()),
        }
        if terminated:
            self.stats["battles_game"] += 1
            self.stats["battles_won"] += int(won)
            if not (won or lost):
                self.stats["timeouts"] += 1
                if self.continuing_episode:
                    info["episode_limit"] = True  # SMAC: a time-limit cut, not a task end
        return reward, terminated, info

    # -- features --------------------------------------------------------------------------------
    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        agent_id = check_agent_id(agent_id, self.n_agents)
        if self.agent_hp[agent_id] <= 0:
            return np.zeros(self.obs_size, dtype=np.float32)
        avail = np.asarray(self.get_avail_agent_actions(agent_id), dtype=np.float32)
        return np.concatenate(
            [
                self.enemy_hp / self.enemy_hp0,
                avail[N_FIXED:],
                [self.agent_hp[agent_id] / self.agent_hp0, self.t / self.episode_limit],
            ]
        ).astype(np.float32)

    @property
    def obs_size(self) -> int:
        return 2 * self.n_enemies + 2

    def get_obs(self) -> list[np.ndarray]:
        return [self.get_obs_agent(i) for i in range(self.n_agents)]

    def get_state(self) -> np.ndarray:
        return np.concatenate(
            [
                self.enemy_hp / self.enemy_hp0,
                self.agent_hp.clip(0) / self.agent_hp0,
                [self.t / self.episode_limit],
            ]
        ).astype(np.float32)

    def get_avail_agent_actions(self, agent_id: int) -> list[int]:
        agent_id = check_agent_id(agent_id, self.n_agents)
        avail = [0] * self.n_actions
        if self.agent_hp[agent_id] <= 0:
            avail[0] = 1
            return avail
        avail[1] = 1
        for j in range(self.n_enemies):
            if self.enemy_hp[j] > 0 and (agent_id + j + self.t) % 3 != 0:
                avail[N_FIXED + j] = 1
        return avail

    def get_avail_actions(self) -> list[list[int]]:
        return [self.get_avail_agent_actions(i) for i in range(self.n_agents)]

    def get_env_info(self) -> dict[str, Any]:
        return {
            "n_agents": self.n_agents,
            "n_actions": self.n_actions,
            "obs_shape": self.obs_size,
            "state_shape": self.n_enemies + self.n_agents + 1,
            "episode_limit": self.episode_limit,
        }

    def get_stats(self) -> dict[str, Any]:
        stats = dict(self.stats)
        stats["win_rate"] = stats["battles_won"] / max(1, stats["battles_game"])
        return stats


@register("env", "fake")
def make_fake_env(
    map_name: str = "fake", backend: str = "sim", seed: int | None = None, **kwargs: Any
) -> FakeSmacEnv:
    """Registry factory: ``map_name`` and ``backend`` are accepted for CLI symmetry and ignored."""
    return FakeSmacEnv(seed=seed, **kwargs)
