"""The boundary between the trainer and an algorithm: what every learner provides.

The trainer (``marl/trainer.py``) relies on this protocol and nothing else; a learner is registered with
``@register("learner", name)`` and built with ``(info: EnvInfo, cfg: Config)``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from marl.buffers.episode import EpisodeBatch


@runtime_checkable
class Learner(Protocol):
    """What the trainer calls.

    ``on_policy``: False — the trainer trains on episodes sampled from the replay buffer after every rollout;
    True — it trains once on every ``learner.batch_size`` fresh episodes, which are then dropped.
    """

    on_policy: bool

    def make_controller(self, seed: int) -> Any:
        """The acting policy the runner calls (NumPy; weights from :meth:`actor_weights`)."""

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """One update on ``batch``; its statistics (a non-finite one means the update was not applied)."""

    def actor_weights(self) -> dict[str, np.ndarray]:
        """The acting network's weights for the controller."""

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume (networks, optimizer state, counters) as NumPy arrays."""

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state_dict`."""

    def histograms(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Distributions to log (MindInsight histograms); may be empty."""


class NoHistograms:
    """Mixin for learners that log no distributions."""

    def histograms(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """No distributions."""
        return {}


def step_footprint(learner: Any, batch: EpisodeBatch) -> int:
    """Episodes x slots of the largest graph one update on ``batch`` runs, which the trainer's memory check
    scales to a batch of full-length episodes: the learner's own ``step_footprint(batch)`` where it has one
    (the Q-learner with length groups runs its batch in two parts), else the whole batch up to its longest
    episode."""
    own = getattr(learner, "step_footprint", None)
    if own is not None:
        return int(own(batch))
    return batch.batch_size * (int(batch.episode_lengths().max()) + 1)


def full_footprint(learner: Any, batch_size: int, slots: int) -> int:
    """Episodes x slots of the largest graph one update on ``batch_size`` full-length episodes of ``slots``
    slots runs (the memory check's worst case): the learner's own ``full_footprint`` where it has one (the
    Q-learner with ``learner.update_rows`` runs at most that many episodes in one graph), else the batch."""
    own = getattr(learner, "full_footprint", None)
    return int(own(batch_size, slots)) if own is not None else batch_size * slots
