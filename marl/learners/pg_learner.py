"""REINFORCE with a learned baseline (``learner.name: pg``).

Williams 1992, "Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement
Learning": ``loss = -log pi(a_t | s_t) * (G_t - V(s_t)) + value_coef * (V(s_t) - G_t)^2 / 2 - entropy bonus``
with Monte Carlo returns ``G_t`` (bootstrapped from ``V`` only where an episode was cut by the time limit).
It is :class:`~marl.learners.ppo_learner.PPOLearner` with the plain score-function objective, one gradient
step per batch of fresh episodes and no value clipping: networks, action masking, Gaussian heads, value
normalisation, controller and checkpoints are shared, not copied.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from marl.config.schema import Config
from marl.envs.base import EnvInfo
from marl.learners.ppo_learner import PPOLearner
from marl.learners.returns import discounted_returns
from marl.registry import register


@register("learner", "pg")
class PGLearner(PPOLearner):
    """REINFORCE + baseline (see the module docstring); one update per ``learner.batch_size`` episodes."""

    objective = "pg"

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        one_step = replace(cfg.learner, ppo_epochs=1, num_minibatches=1, value_clip=0.0)
        super().__init__(info, replace(cfg, learner=one_step))

    def _targets(self, arr: dict[str, np.ndarray], values_BTN: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ret = discounted_returns(
            arr["reward"], arr["terminated"], arr["mask"], values_BTN, self.cfg.learner.gamma
        )
        return (ret - values_BTN[:, :-1]) * np.broadcast_to(arr["mask"], ret.shape), ret
