"""Episode replay buffer with uniform sampling (NumPy only)."""

from __future__ import annotations

import numpy as np

from marl.buffers.episode import EpisodeBatch, Scheme


class ReplayBuffer:
    """A ring buffer of ``capacity`` padded episodes.

    Storage is allocated once at construction (and its size printed), so a too-large buffer fails at
    start, not hours into a run.
    """

    def __init__(self, scheme: Scheme, capacity: int, verbose: bool = True) -> None:
        if capacity <= 0:
            raise ValueError(f"buffer_size must be a positive number of episodes, got {capacity}")
        self.scheme = scheme
        self.capacity = capacity
        self.storage = EpisodeBatch(scheme, capacity)
        self.index = 0  # next slot to write
        self.size = 0  # episodes stored
        self.episodes_in = 0  # episodes ever inserted
        if verbose:
            mib = self.storage.nbytes() / 2**20
            print(
                f"[buffer] {capacity} episodes x {scheme.max_seq_length} slots: {mib:.1f} MiB "
                f"({scheme.bytes_per_episode() / 1024:.1f} KiB per episode)"
            )

    def insert(self, batch: EpisodeBatch) -> None:
        """Copy the episodes of ``batch`` in, overwriting the oldest when full."""
        n = batch.batch_size
        idx = (self.index + np.arange(n)) % self.capacity
        for k, v in batch.data.items():
            self.storage.data[k][idx] = v
        self.index = int((self.index + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.episodes_in += n

    def can_sample(self, batch_size: int) -> bool:
        return self.size >= batch_size

    def sample(self, batch_size: int, rng: np.random.Generator) -> EpisodeBatch:
        """``batch_size`` distinct episodes chosen uniformly."""
        if not self.can_sample(batch_size):
            raise ValueError(f"cannot sample {batch_size} episodes from a buffer holding {self.size}")
        idx = rng.choice(self.size, size=batch_size, replace=False)
        return self.storage.select(idx)

    def state_dict(self) -> dict:
        """Counters (the episodes themselves are not checkpointed)."""
        return {"index": self.index, "size": self.size, "episodes_in": self.episodes_in}
