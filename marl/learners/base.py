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


def held_footprint(learner: Any, batch: EpisodeBatch) -> int:
    """Episodes x slots of the inputs one update on ``batch`` holds at once, which the memory check scales
    to full-length episodes too: the learner's own ``held_footprint(batch)`` where it has one (an update in
    parts builds every part's inputs before the first part runs: the whole batch, each part over its own
    slots), else :func:`step_footprint`."""
    own = getattr(learner, "held_footprint", None)
    return int(own(batch)) if own is not None else step_footprint(learner, batch)


def full_footprint(learner: Any, batch_size: int, slots: int) -> int:
    """Episodes x slots of the largest graph one update on ``batch_size`` full-length episodes of ``slots``
    slots runs (the memory check's worst case): the learner's own ``full_footprint`` where it has one (the
    Q-learner with ``learner.update_rows`` runs at most that many episodes in one graph), else the batch."""
    own = getattr(learner, "full_footprint", None)
    return int(own(batch_size, slots)) if own is not None else batch_size * slots


def full_length_growth(
    learner: Any, batch: EpisodeBatch, slots: int, before: int, peak: int, now: int
) -> int:
    """Bytes beyond ``now`` that an update on full-length episodes (``slots`` slots) will peak at, from the
    first update on ``batch``, which peaked at ``peak`` and left ``now`` from ``before``: its peak growth,
    taken as proportional to episodes x slots, of its largest graph (:func:`step_footprint`) or of the
    inputs it holds at once (:func:`held_footprint`), whichever grows more. (MAPPO on bane_vs_bane, first
    update on episodes of up to 44 steps: 5.3 GiB estimated, 5.4 GiB measured; ``update_memory.md``.)"""
    b = batch.batch_size
    full = full_footprint(learner, b, slots)
    scale = max(
        full / max(step_footprint(learner, batch), 1), b * slots / max(held_footprint(learner, batch), 1)
    )
    return max(int(max(peak - before, 0) * scale) - max(now - before, 0), 0)
