"""Episode scheme, padded batches and replay (NumPy only)."""

from marl.buffers.episode import EpisodeBatch, Field, Scheme
from marl.buffers.replay import ReplayBuffer

__all__ = ["EpisodeBatch", "Field", "ReplayBuffer", "Scheme"]
