"""Learners. Importing this package registers them (``build("learner", "q_learner", ...)``)."""

from marl.learners.coma_learner import COMALearner
from marl.learners.dqn_learner import DQNLearner
from marl.learners.maddpg_learner import MADDPGLearner
from marl.learners.pg_learner import PGLearner
from marl.learners.ppo_learner import PPOLearner
from marl.learners.q_learner import QLearner
from marl.learners.qtran_learner import QTRANLearner
from marl.learners.wqmix_learner import WQMIXLearner

__all__ = [
    "COMALearner",
    "DQNLearner",
    "MADDPGLearner",
    "PGLearner",
    "PPOLearner",
    "QLearner",
    "QTRANLearner",
    "WQMIXLearner",
]
