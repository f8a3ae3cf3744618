"""Stochastic acting for on-policy learners: sample from a NumPy copy of the policy.

Reuses :class:`~marl.controllers.mac.MultiAgentController`'s input building, per-env hidden state and row
handling (``forward``); only the action choice differs: a sample from the masked categorical (Gumbel-max
over the available actions) or from the Gaussian ``N(mean, exp(log_std))`` for continuous actions. In
``test_mode`` the policy acts greedily (argmax / the mean). With an ``exploration`` section (COMA, as in
pymarl) a discrete policy is sampled with an epsilon floor, ``(1 - eps) pi + eps / |available|``, eps annealed
over env steps (:func:`floored_policy`); without one there is no epsilon.
"""

from __future__ import annotations

import numpy as np

from marl.config.schema import AgentConfig, ExplorationConfig
from marl.controllers.mac import MultiAgentController, epsilon_at, input_dim
from marl.controllers.numpy_actor import numpy_agent
from marl.envs.base import EnvInfo

TRUNK_PREFIX = "agent."  # PolicyNet keeps its trunk under ``agent``; ``log_std`` sits beside it


def floored_policy(logits_BNA: np.ndarray, avail_BNA: np.ndarray, epsilon: float) -> np.ndarray:
    """pymarl's COMA acting distribution: the softmax over the available actions mixed with the uniform one,
    ``(1 - epsilon) softmax + epsilon / |available|`` (zero on unavailable actions)."""
    z = np.where(avail_BNA, logits_BNA, -np.inf)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return (1.0 - epsilon) * p + epsilon * avail_BNA / avail_BNA.sum(axis=-1, keepdims=True)


class PolicyController(MultiAgentController):
    """Acting policy of PPO / PG learners over ``batch_size`` parallel envs (discrete or continuous)."""

    def __init__(
        self,
        info: EnvInfo,
        agent_cfg: AgentConfig,
        seed: int,
        weights: dict[str, np.ndarray],
        exploration: ExplorationConfig | None = None,
    ) -> None:
        # Not MultiAgentController.__init__: no epsilon schedule, continuous actions allowed, and weights
        # always come from the learner. The attributes set here are those its ``forward`` uses.
        self.info, self.agent_cfg = info, agent_cfg
        self.n_agents, self.n_actions = info.n_agents, info.n_actions
        self.input_dim = input_dim(info, agent_cfg)
        self.discrete = bool(info.discrete)
        if exploration is not None and not self.discrete:
            raise ValueError("an epsilon floor (exploration section) needs discrete actions")
        self.exploration = exploration
        self.rng = np.random.default_rng(seed)
        self.actor = None
        self.load_weights(weights)
        self.init_hidden(1)

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Take the learner's actor weights (``agent.*`` trunk and, if continuous, ``log_std``)."""
        trunk = {k[len(TRUNK_PREFIX) :]: v for k, v in weights.items() if k.startswith(TRUNK_PREFIX)}
        if self.actor is None:
            self.actor = numpy_agent(self.agent_cfg.name, trunk)
        else:
            self.actor.load(trunk)
        if not self.discrete:
            if "log_std" not in weights:
                raise KeyError(f"continuous actor weights need 'log_std'; got {sorted(weights)}")
            self.log_std = np.asarray(weights["log_std"], np.float32).reshape(self.n_actions)

    def epsilon(self, t_env: int) -> float:
        """The epsilon floor at ``t_env`` (0.0 without one), or the mean Gaussian std (continuous)."""
        if not self.discrete:
            return float(np.exp(self.log_std).mean())
        return 0.0 if self.exploration is None else epsilon_at(self.exploration, t_env)

    def select_actions(
        self,
        obs_BNO: np.ndarray,
        avail_BNA: np.ndarray,
        t_env: int,
        test_mode: bool = False,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Sampled actions of the running envs ``rows``: int64 ``(len(rows), N)`` for discrete actions
        (never an unavailable one), float32 ``(len(rows), N, n_actions)`` for continuous ones (unclipped
        samples: the env clips to its bounds, the learner scores the sample itself)."""
        rows = self._rows(rows)
        out = self.forward(obs_BNO, rows)
        if self.discrete:
            avail = self._aligned(avail_BNA, rows, "avail_actions", self.n_actions) > 0
            if not avail.any(axis=2).all():
                bad = np.argwhere(~avail.any(axis=2)).tolist()
                raise ValueError(f"every agent needs an available action; none for (env, agent) {bad}")
            eps = 0.0 if test_mode else self.epsilon(t_env)
            if eps > 0.0:  # Gumbel-max over the floored distribution's log-probabilities
                with np.errstate(divide="ignore"):
                    out = np.log(floored_policy(out, avail, eps))
            scores = out if test_mode else out - np.log(-np.log(self.rng.random(out.shape) + 1e-20) + 1e-20)
            actions = np.where(avail, scores, -np.inf).argmax(axis=2).astype(np.int64)
            last = np.zeros(out.shape, np.float32)
            np.put_along_axis(last, actions[..., None], 1.0, axis=2)
        else:
            noise = 0.0 if test_mode else self.rng.standard_normal(out.shape) * np.exp(self.log_std)
            actions = last = (out + noise).astype(np.float32)
        self.last_action_BNA[rows] = last
        return actions
