"""Length groups for whole-episode learner steps (``learner.length_groups``): Q-learner and PPO/PG.

A batch is padded to its longest episode (pymarl's ``max_t_filled``), and a step's cost grows with batch x
slots. While the agents still explore, a few episodes of a batch run to the time limit and the rest end
far sooner: QMIX on 8m (limit 120, batch 128) drew 1-9 episodes of 121 slots into every batch of its
first 35k env steps, while the batch's mean was 28-40 filled slots, so about two thirds of the step's work
was padding (``benchmarks/results/learn_smac.md``).

With ``length_groups: 2`` the batch is split by length: its ``max(1, B // 8)`` longest episodes form one group
and the rest the other, and each group runs over its own bucketed length (``learner.time_bucket``). The two
groups' gradients are summed in the graph that clips and applies them. Every loss term is a sum over
transitions divided by the whole batch's count, and every target depends only on its own episode, so loss,
statistics and gradient are those of the one-batch step up to float rounding
(``tests/test_length_groups.py``). Where the split would save nothing (the groups' lengths are equal) the
one-batch step runs. Each group shape compiles once, like the time buckets.

With ``learner.update_rows: R`` (Q-learner; PPO/PG with one minibatch per epoch) no graph takes more than
``R`` episodes: the batch, or each length group, runs in row parts of at most ``R`` episodes, and all parts'
gradients are summed in the same way (gradient accumulation; exact up to float rounding). The graphs'
memory then grows with ``R`` instead of the batch (the parts' inputs, each over its own slots, are held
through the update), which lets a large map (bane_vs_bane: 24 agents, 201 slots, batch 128) train on a
machine where the one-graph update would not fit (the trainer's memory check names an ``R`` that fits).
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


def split_rows(
    groups: list[tuple[np.ndarray, int]] | None, n_rows: int, t_slots: int, max_rows: int
) -> list[tuple[np.ndarray, int]] | None:
    """``groups`` (or, where None, the whole batch of ``n_rows`` episodes over ``t_slots``) with every group
    of more than ``max_rows`` episodes cut into row parts of ``max_rows`` (the last one shorter), in row
    order; None where the result is one part (``max_rows`` 0: no limit)."""
    if max_rows <= 0:
        return groups
    parts = []
    for rows, t in groups or [(np.arange(n_rows), t_slots)]:
        parts += [(rows[i : i + max_rows], t) for i in range(0, len(rows), max_rows)]
    return parts if len(parts) > 1 else None


def grouped_graphs(loss_fn, params: list, optimizer, clip: float, use_jit: bool):  # noqa: ANN001, ANN201
    """``(grad_fn, apply, add)`` for ``loss_fn(*group, n_valid) -> (loss, stats)``: the value and gradient of
    one group's loss (divided by the whole batch's count ``n_valid``), the sum of two groups' gradients
    clipped and applied (``clip_and_apply``; returns the unclipped norm), and the sum of two groups'
    gradients (to accumulate more than two parts)."""
    n_params = len(params)
    grad_fn = ms.value_and_grad(loss_fn, None, weights=params, has_aux=True)

    def add(*grads):  # two groups' gradients, one after the other (varargs: see q_chunked's apply)
        return tuple(grads[i] + grads[n_params + i] for i in range(n_params))

    def apply(*grads):
        return clip_and_apply(optimizer, add(*grads), clip)

    return (jit(grad_fn), jit(apply), jit(add)) if use_jit else (grad_fn, apply, add)


def length_group_graphs(lc, loss_fn, params: list, optimizer, splittable: bool, usable: bool = True):  # noqa: ANN001, ANN201
    """:func:`grouped_graphs` of ``loss_fn`` where ``learner.length_groups`` (of config ``lc``) asks for
    them and ``usable``, else None. ``splittable``: False where a subclass brings a loss that cannot be
    split (then ``length_groups > 1`` is refused)."""
    check_length_groups(lc.length_groups)
    if lc.length_groups > 1 and not splittable:
        raise ValueError(
            f"learner.length_groups={lc.length_groups} splits the loss of q_learner, ppo and pg only; "
            f"learner {lc.name!r} trains one padded batch: set learner.length_groups=1"
        )
    rows = lc.update_rows
    if rows > 0 and not splittable:
        raise ValueError(
            f"learner.update_rows={rows} splits the loss of q_learner, ppo and pg only; learner {lc.name!r} "
            f"trains one padded batch: set learner.update_rows=0"
        )
    if rows > 0 and not usable:
        print(
            f"[learner] learner.update_rows={rows} is not used: chunked BPTT (learner.bptt_chunk) or "
            "minibatches (learner.num_minibatches > 1) already bound the step's memory"
        )
    if (lc.length_groups < 2 and rows <= 0) or not usable:
        return None
    return grouped_graphs(loss_fn, params, optimizer, float(lc.grad_norm_clip), lc.use_jit)


def group_tensors(host: list[np.ndarray], rows: np.ndarray | slice, t: int) -> list[ms.Tensor]:
    """The episodes ``rows`` of the per-transition arrays ``host`` over the ``t - 1`` transitions of ``t``
    slots as tensors; float64 arrays become float32 (contiguous float32 arrays of all rows and transitions
    are shared, not copied)."""
    cut = [x[rows, : t - 1] for x in host]
    return [
        Tensor.from_numpy(np.ascontiguousarray(x, np.float32 if x.dtype == np.float64 else None)) for x in cut
    ]


def grouped_update(graphs: tuple, parts: list[list[ms.Tensor]], n_valid: ms.Tensor) -> np.ndarray:
    """One update over two or more groups' input tensors ``parts``: ``[loss, *stats, grad_norm]`` of the
    whole batch, as a one-batch step returns it (the groups' losses and statistics, each divided by
    ``n_valid``, summed; their gradients summed in order, then clipped and applied)."""
    grad_fn, apply, add = graphs
    (loss, stats), grads = grad_fn(*parts[0], n_valid)
    for part in parts[1:-1]:
        (loss_b, stats_b), grads_b = grad_fn(*part, n_valid)
        loss, stats, grads = loss + loss_b, stats + stats_b, add(*grads, *grads_b)
    (loss_b, stats_b), grads_b = grad_fn(*parts[-1], n_valid)
    grad_norm = apply(*grads, *grads_b)
    return ops.concat([(loss + loss_b).reshape(1), stats + stats_b, grad_norm.reshape(1)]).asnumpy()


class GroupSplit:
    """Mixin of the Q-learner and the PPO learner: how an update on a batch is split into graphs, and the
    memory check's footprints of it. The learner provides ``cfg`` and ``t_slots``, and stores
    :func:`grouped_graphs` of its loss as ``_groups`` (None: one graph)."""

    def _group_split(self, filled_BT1: np.ndarray) -> list[tuple[np.ndarray, int]] | None:
        """The groups of a batch with this ``filled`` mask (:func:`split_by_length`), each cut into row parts
        of at most ``learner.update_rows`` episodes (:func:`split_rows`), or None (one graph)."""
        lc = self.cfg.learner
        groups = split_by_length(filled_BT1, lc.length_groups, self.t_slots, lc.time_bucket)
        if lc.update_rows <= 0:
            return groups
        t_all = bucketed_slots(filled_BT1, self.t_slots, lc.time_bucket)
        return split_rows(groups, len(filled_BT1), t_all, lc.update_rows)

    def full_footprint(self, batch_size: int, slots: int) -> int:
        """Episodes x slots of the largest graph an update on ``batch_size`` episodes of ``slots`` slots
        runs (the memory check's worst case: at most ``learner.update_rows`` episodes where set)."""
        rows = self.cfg.learner.update_rows if self._groups else 0  # not used by chunks or minibatches
        return (min(rows, batch_size) if rows > 0 else batch_size) * slots

    def _part_footprints(self, batch) -> list[int]:  # noqa: ANN001
        """Episodes x slots of each graph an update on ``batch`` runs (one: the whole batch)."""
        groups = self._groups and self._group_split(batch["filled"])
        lengths_B = batch.episode_lengths() + 1
        if not groups:
            return [len(lengths_B) * int(lengths_B.max())]
        return [len(rows) * int(lengths_B[rows].max()) for rows, _ in groups]

    def step_footprint(self, batch) -> int:  # noqa: ANN001
        """Episodes x slots of the largest graph an update on ``batch`` runs (for the trainer's memory
        check, :func:`~marl.learners.base.step_footprint`)."""
        return max(self._part_footprints(batch))

    def held_footprint(self, batch) -> int:  # noqa: ANN001
        """Episodes x slots of every part's inputs, all built before the first part runs
        (:func:`~marl.learners.base.held_footprint`)."""
        return sum(self._part_footprints(batch))


class LengthGroups(GroupSplit):
    """Mixin of :class:`~marl.learners.q_learner.QLearner`: its length-grouped step.

    The learner also provides ``info``, ``nets`` and ``_cut``.
    """

    def _group_inputs(self, batch, groups) -> tuple[list[list[ms.Tensor]], ms.Tensor]:  # noqa: ANN001
        """Each group's input tensors and the whole batch's transition count (as the loss's mask counts)."""
        mask = transition_mask(batch["filled"], batch["terminated"])
        per_slot = 1 if self.nets.mixer is not None else self.info.n_agents  # targets (B, T, K): K values
        n_valid = Tensor(np.float32(mask.sum() * per_slot))
        return [self._cut(batch, t, rows, part=i) for i, (rows, t) in enumerate(groups)], n_valid

    def _grouped_step(self, batch, groups) -> np.ndarray:  # noqa: ANN001
        """One update over ``groups``: ``[loss, *stats, grad_norm]`` as the one-batch step returns it."""
        return grouped_update(self._groups, *self._group_inputs(batch, groups))
