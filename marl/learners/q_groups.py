"""Length groups for the Q-learner's whole-episode step (``learner.length_groups``).

A replay batch is padded to its longest episode (pymarl's ``max_t_filled``), and the step's cost grows with
batch x slots. While the agents still explore, a few episodes of a batch run to the time limit and the rest
end far sooner: QMIX on 8m (limit 120, batch 128) drew 1-9 episodes of 121 slots into every batch of its
first 35k env steps, while the batch's mean was 28-40 filled slots, so about two thirds of the step's work
was padding (``benchmarks/results/learn_smac.md``).

With ``length_groups: 2`` the batch is split by length: its ``max(1, B // 8)`` longest episodes form one group
and the rest the other, and each group runs over its own bucketed length (``learner.time_bucket``). The two
groups' gradients are summed in the graph that clips and applies them. The loss is a sum over transitions
divided by the whole batch's transition count, and every target depends only on its own episode, so loss,
statistics and gradient are those of the one-batch step up to float rounding
(``tests/test_q_length_groups.py``). Where the split would save nothing (the groups' lengths are equal) the
one-batch step runs. Each group shape compiles once, like the time buckets.
"""

from __future__ import annotations

import numpy as np

from marl.learners.optim import clip_and_apply
from marl.learners.targets import bucketed_slots, transition_mask
from marl.utils.ms import Tensor, jit, ms, ops

ALLOWED = (1, 2)


def check_length_groups(n_groups: int) -> None:
    """``learner.length_groups`` must be 1 (one padded batch) or 2 (the longest eighth apart)."""
    if n_groups not in ALLOWED:
        raise ValueError(
            f"learner.length_groups must be 1 (one padded batch) or 2 (the longest eighth of the batch "
            f"trained apart), got {n_groups!r}"
        )


def split_by_length(
    filled_BT1: np.ndarray, n_groups: int, t_slots: int, bucket: int
) -> list[tuple[np.ndarray, int]] | None:
    """``[(rows, slots), ...]`` of each group, the longest episodes first, or None where one padded batch
    costs no more (``n_groups`` 1, or the rest as long as the longest once bucketed)."""
    if n_groups < 2:
        return None
    lengths_B = np.asarray(filled_BT1)[..., 0].sum(axis=1)
    n_long = max(1, len(lengths_B) // 8)
    if n_long >= len(lengths_B):
        return None
    order = np.argsort(-lengths_B, kind="stable")
    long_rows, rest_rows = np.sort(order[:n_long]), np.sort(order[n_long:])
    t_long = bucketed_slots(filled_BT1[long_rows], t_slots, bucket)
    t_rest = bucketed_slots(filled_BT1[rest_rows], t_slots, bucket)
    if t_rest >= t_long:
        return None
    return [(long_rows, t_long), (rest_rows, t_rest)]


class LengthGroups:
    """Mixin of :class:`~marl.learners.q_learner.QLearner`: the length-grouped step and its two graphs.

    The learner provides ``info``, ``cfg``, ``nets``, ``params``, ``optimizer``, ``t_slots`` and ``_cut``, and
    stores :meth:`_make_grouped`'s result as ``_groups``.
    """

    def _make_grouped(self, loss_fn):  # noqa: ANN001, ANN202 (graph functions)
        """``(grad_fn, apply)``: the value and gradient of ``loss_fn`` on one group (its loss divided by the
        whole batch's count ``n_valid``), and the sum of both groups' gradients clipped and applied."""
        n_params, clip, optimizer = len(self.params), float(self.cfg.learner.grad_norm_clip), self.optimizer

        def group_loss(inputs, avail, actions, reward, term, mask, state, m_t, pow_vec, n_valid):
            return loss_fn(inputs, avail, actions, reward, term, mask, state, m_t, pow_vec, n_valid)

        grad_fn = ms.value_and_grad(group_loss, None, weights=self.params, has_aux=True)

        def apply(*grads):  # both groups' gradients, one after the other (varargs: see q_chunked's apply)
            summed = tuple(grads[i] + grads[n_params + i] for i in range(n_params))
            return clip_and_apply(optimizer, summed, clip)

        return (jit(grad_fn), jit(apply)) if self.cfg.learner.use_jit else (grad_fn, apply)

    def _group_split(self, filled_BT1: np.ndarray) -> list[tuple[np.ndarray, int]] | None:
        """The groups of a batch with this ``filled`` mask (:func:`split_by_length`), or None."""
        lc = self.cfg.learner
        return split_by_length(filled_BT1, lc.length_groups, self.t_slots, lc.time_bucket)

    def step_footprint(self, batch) -> int:  # noqa: ANN001
        """Episodes x slots of the largest graph an update on ``batch`` runs (for the trainer's memory
        check, :func:`~marl.learners.base.step_footprint`)."""
        groups = self._groups and self._group_split(batch["filled"])
        lengths_B = batch.episode_lengths() + 1
        if not groups:
            return len(lengths_B) * int(lengths_B.max())
        return max(len(rows) * int(lengths_B[rows].max()) for rows, _ in groups)

    def _grouped_loss_and_grads(self, batch, groups) -> tuple[ms.Tensor, ms.Tensor, list[tuple]]:  # noqa: ANN001
        """Loss and stats of the whole batch (summed over ``groups``) and each group's gradients."""
        grad_fn = self._groups[0]
        mask = transition_mask(batch["filled"], batch["terminated"])
        per_slot = 1 if self.nets.mixer is not None else self.info.n_agents  # targets (B, T, K): K values
        n_valid = Tensor(np.float32(mask.sum() * per_slot))
        loss = stats = None
        grads = []
        for rows, t in groups:
            (g_loss, g_stats), g_grads = grad_fn(*self._cut(batch, t, rows), n_valid)
            loss, stats = (g_loss, g_stats) if loss is None else (loss + g_loss, stats + g_stats)
            grads.append(g_grads)
        return loss, stats, grads

    def _grouped_step(self, batch, groups) -> np.ndarray:  # noqa: ANN001
        """One update over ``groups``: ``[loss, *stats, grad_norm]`` as the one-batch step returns it."""
        loss, stats, grads = self._grouped_loss_and_grads(batch, groups)
        grad_norm = self._groups[1](*grads[0], *grads[1])
        return ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)]).asnumpy()
