"""Logging: ``Logger.log(key, value, t)`` fanning out to console, JSONL and MindInsight; learning curves."""

from marl.logging.logger import CURVES_FILE, LOG_FILE, Logger
from marl.logging.plots import plot_curves, read_scalars

__all__ = ["CURVES_FILE", "LOG_FILE", "Logger", "plot_curves", "read_scalars"]
