"""Gradient steps on single transitions drawn from replayed episodes (shared by the DQN and MADDPG learners).

The trainer hands an off-policy transition learner ``learner.batch_size`` replayed episodes; every train call
then does ``updates_per_step x (new env steps)`` gradient steps (:func:`n_updates`), each on
``transition_batch_size`` transitions drawn uniformly with replacement from the real transitions of those
episodes (:func:`sample_transitions`). :class:`TransitionUpdates` is that loop; the learner supplies how a
minibatch is cut (``minibatch``) and the compiled step (``_step``).

The sampling generator is part of a learner's checkpoint (:func:`rng_to_array` / :func:`rng_from_array`),
so a resumed run draws the same minibatches as an uninterrupted one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config.schema import Config
from marl.learners.base import NoHistograms
from marl.learners.targets import transition_mask
from marl.utils.ms import Tensor

RNG_KEY = "rng/transitions"  # the sampling generator's state in a learner's state_dict


def valid_transitions(batch: EpisodeBatch) -> tuple[np.ndarray, np.ndarray]:
    """``(episode, slot)`` indices of every real transition (``transition_mask`` > 0) of ``batch``."""
    # ``transition_mask`` would also keep the final-observation slot of an episode cut by the env's own
    # time limit before ``episode_limit`` (not terminated): a real transition also needs a filled next slot.
    mask = transition_mask(batch["filled"], batch["terminated"])[..., 0] * batch["filled"][:, 1:, 0]
    b_idx, t_idx = np.nonzero(mask > 0)
    return b_idx, t_idx


def sample_transitions(
    batch: EpisodeBatch, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` transitions ``(episode, slot)`` drawn uniformly with replacement from the real ones.

    Slot ``t`` holds the obs/state/avail before the action, the action, reward and ``terminated``; slot
    ``t + 1`` holds what followed (see :mod:`marl.buffers.episode`).
    """
    b_idx, t_idx = valid_transitions(batch)
    if len(b_idx) == 0:
        raise ValueError("batch holds no transitions (filled mask is empty)")
    pick = rng.integers(0, len(b_idx), size=n)
    return b_idx[pick], t_idx[pick]


def n_updates(new_steps: int, updates_per_step: float) -> int:
    """Gradient steps for ``new_steps`` fresh env steps (at least one per train call)."""
    return max(1, int(round(new_steps * updates_per_step)))


def rng_to_array(rng: np.random.Generator) -> np.ndarray:
    """The generator's exact state as a ``uint8`` array (its ``bit_generator.state`` as JSON bytes), so it
    can sit in a learner's ``state_dict`` next to the weights; :func:`rng_from_array` restores it."""
    return np.frombuffer(json.dumps(rng.bit_generator.state).encode(), dtype=np.uint8).copy()


def rng_from_array(rng: np.random.Generator, array: np.ndarray) -> None:
    """Set ``rng`` (in place) to the state :func:`rng_to_array` saved; the bit generator must match."""
    state = json.loads(np.asarray(array, dtype=np.uint8).tobytes().decode())
    kind = type(rng.bit_generator).__name__
    if state.get("bit_generator") != kind:
        raise ValueError(f"saved RNG state is for {state.get('bit_generator')!r}, this generator is {kind!r}")
    rng.bit_generator.state = state


class TransitionUpdates(NoHistograms):
    """Mixin for learners that train on transitions: :meth:`transition_updates` runs the gradient steps.

    The learner provides ``cfg``, ``rng``, ``last_t_env``, ``grad_steps``, ``minibatch(batch, inputs_BTNI,
    b, t) -> list[np.ndarray]`` (which may draw more from ``rng``, after the transitions) and ``_step`` (the
    compiled step: the minibatch's Tensors in, a 1-d Tensor of statistics out).
    """

    cfg: Config
    rng: np.random.Generator
    last_t_env: int | None
    grad_steps: int
    minibatch: Callable[[EpisodeBatch, np.ndarray, np.ndarray, np.ndarray], list[np.ndarray]]
    _step: Callable[..., Any]

    def transition_updates(
        self, batch: EpisodeBatch, inputs_BTNI: np.ndarray, t_env: int, stat_names: Sequence[str]
    ) -> dict[str, float]:
        """:func:`n_updates` steps (for the env steps since the last call) on minibatches of ``batch``;
        returns the step statistics averaged over the steps, named by ``stat_names``, plus ``updates``."""
        lc = self.cfg.learner
        k = n_updates(0 if self.last_t_env is None else t_env - self.last_t_env, lc.updates_per_step)
        self.last_t_env = t_env
        outs = []
        for _ in range(k):
            b, t = sample_transitions(batch, lc.transition_batch_size, self.rng)
            arrays = self.minibatch(batch, inputs_BTNI, b, t)
            outs.append(self._step(*[Tensor.from_numpy(np.ascontiguousarray(x)) for x in arrays]).asnumpy())
            self.grad_steps += 1
        stats = {name: float(v) for name, v in zip(stat_names, np.mean(outs, axis=0), strict=True)}
        stats["updates"] = float(k)
        return stats

    def save_rng(self, sd: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Add the sampling generator's state to ``sd`` (a ``state_dict``) and return it."""
        sd[RNG_KEY] = rng_to_array(self.rng)
        return sd

    def load_rng(self, sd: dict[str, np.ndarray]) -> None:
        """Restore the sampling generator from ``sd``; a checkpoint without it (older) leaves it as it is."""
        if RNG_KEY in sd:
            rng_from_array(self.rng, sd[RNG_KEY])
