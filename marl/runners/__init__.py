"""Runners fill episode batches from environments (registry kind ``runner``)."""

from marl.runners import ray_runner  # noqa: F401  (registers "ray"; Ray itself is imported lazily)
from marl.runners.episode_runner import ParallelRunner, RolloutStats

__all__ = ["ParallelRunner", "RolloutStats"]
