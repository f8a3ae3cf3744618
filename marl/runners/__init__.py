"""Runners fill episode batches from environments (registry kind ``runner``)."""

from marl.runners.episode_runner import ParallelRunner, RolloutStats

__all__ = ["ParallelRunner", "RolloutStats"]
