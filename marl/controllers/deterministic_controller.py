"""NumPy acting for deterministic-policy-gradient learners (MADDPG, DDPG).

The actor is the house MLP agent (:class:`~marl.controllers.numpy_actor.NumpyMLPAgent`, inputs from
:func:`~marl.controllers.mac.build_agent_inputs`: obs (+ agent id)); its outputs are read as

* discrete actions: logits. Training acts with a sample of ``softmax(logits / gumbel_tau)`` over the
  available actions (the Gumbel-max trick: ``argmax(logits / tau + Gumbel noise)``), optionally replaced
  by a uniform available action with probability ε; testing takes the best available action;
* continuous actions: ``mu = low + (tanh(z) + 1) / 2 * (high - low)`` (``EnvInfo.action_low/high``).
  Training adds Gaussian noise of std ``noise(t) * (high - low) / 2`` (annealed linearly from
  ``exploration.noise_start`` to ``noise_finish`` over ``noise_anneal_time`` env steps) and clips.
"""

from __future__ import annotations

import numpy as np

from marl.config.schema import AgentConfig, NoiseExplorationConfig
from marl.controllers.mac import build_agent_inputs, input_dim, linear_anneal
from marl.controllers.numpy_actor import numpy_agent
from marl.envs.base import EnvInfo


def squash(z: np.ndarray, low: float, high: float) -> np.ndarray:
    """``tanh`` pre-activations ``z`` → actions in ``[low, high]``."""
    return low + (np.tanh(z) + 1.0) * 0.5 * (high - low)


class DeterministicController:
    """Deterministic shared-parameter MLP actors over ``batch_size`` envs (see the module docstring)."""

    def __init__(
        self,
        info: EnvInfo,
        agent_cfg: AgentConfig,
        exploration: NoiseExplorationConfig,
        seed: int,
        weights: dict[str, np.ndarray],
        gumbel_tau: float = 1.0,
    ) -> None:
        if agent_cfg.name != "mlp" or agent_cfg.obs_last_action:
            raise ValueError(
                f"deterministic actors are feed-forward: need agent.name=mlp and "
                f"agent.obs_last_action=false, got {agent_cfg.name!r}, {agent_cfg.obs_last_action}"
            )
        if gumbel_tau <= 0:
            raise ValueError(f"gumbel_tau must be > 0, got {gumbel_tau}")
        self.info, self.agent_cfg, self.exploration = info, agent_cfg, exploration
        self.n_agents, self.n_actions, self.discrete = info.n_agents, info.n_actions, info.discrete
        self.input_dim = input_dim(info, agent_cfg)
        self.gumbel_tau = float(gumbel_tau)
        self.actor = numpy_agent("mlp", weights)
        self.rng = np.random.default_rng(seed)
        self.init_hidden(1)

    def init_hidden(self, batch_size: int) -> None:
        """Start ``batch_size`` envs (the actor has no memory; kept for the runner's protocol)."""
        self.batch_size = int(batch_size)

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Take the learner's actor weights (``MADDPGLearner.actor_weights()``)."""
        self.actor.load(weights)

    def epsilon(self, t_env: int) -> float:
        """Exploration level at ``t_env``: ε (discrete) or the Gaussian noise std fraction (continuous)."""
        e = self.exploration
        if self.discrete:
            return linear_anneal(t_env, e.epsilon_start, e.epsilon_finish, e.epsilon_anneal_time)
        return linear_anneal(t_env, e.noise_start, e.noise_finish, e.noise_anneal_time)

    def forward(self, obs_BNO: np.ndarray) -> np.ndarray:
        """Actor outputs ``(B, N, A)`` (logits or pre-tanh values) for one step."""
        obs = np.asarray(obs_BNO, np.float32)
        if obs.ndim != 3 or obs.shape[1:] != (self.n_agents, self.info.obs_shape):
            raise ValueError(f"obs must be (envs, {self.n_agents}, {self.info.obs_shape}), got {obs.shape}")
        m = obs.shape[0]
        x = build_agent_inputs(obs[:, None], None, False, self.agent_cfg.obs_agent_id)
        out, _ = self.actor.step(x.reshape(m * self.n_agents, self.input_dim), np.zeros((0,), np.float32))
        return out.reshape(m, self.n_agents, self.n_actions)

    def select_actions(
        self,
        obs_BNO: np.ndarray,
        avail_BNA: np.ndarray,
        t_env: int,
        test_mode: bool = False,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Actions for the envs ``rows`` (their obs/avail given row-aligned or for all envs): int64
        ``(len(rows), N)`` for discrete actions, float32 ``(len(rows), N, A)`` for continuous ones."""
        rows = np.arange(self.batch_size) if rows is None else np.asarray(rows, np.int64).reshape(-1)
        obs, avail = np.asarray(obs_BNO), np.asarray(avail_BNA)
        if obs.shape[0] != len(rows) and obs.shape[0] == self.batch_size:
            obs, avail = obs[rows], avail[rows]
        out = self.forward(obs)
        noise = 0.0 if test_mode else self.epsilon(t_env)
        if not self.discrete:
            low, high = self.info.action_low, self.info.action_high
            act = squash(out, low, high)
            if noise > 0.0:
                act = act + self.rng.normal(0.0, noise * 0.5 * (high - low), size=act.shape)
            return np.clip(act, low, high).astype(np.float32)
        ok = avail > 0
        if not ok.any(axis=2).all():
            raise ValueError("every agent needs at least one available action")
        if test_mode:
            return np.where(ok, out, -np.inf).argmax(axis=2).astype(np.int64)
        gumbel = -np.log(-np.log(self.rng.uniform(1e-10, 1.0, size=out.shape)))
        actions = np.where(ok, out / self.gumbel_tau + gumbel, -np.inf).argmax(axis=2)
        if noise > 0.0:
            uniform = np.where(ok, self.rng.random(ok.shape), -1.0).argmax(axis=2)
            actions = np.where(self.rng.random(actions.shape) < noise, uniform, actions)
        return actions.astype(np.int64)
