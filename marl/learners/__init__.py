"""Learners. Importing this package registers them (``build("learner", "q_learner", ...)``)."""

from marl.learners.q_learner import QLearner

__all__ = ["QLearner"]
