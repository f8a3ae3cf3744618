"""Chunked truncated BPTT for the Q-learner on long episodes (``learner.bptt_chunk``, see
:func:`resolve_bptt_chunk`).

With the compiled GRU kernels (:mod:`marl.modules.gru_kernel`) nothing is unrolled: the whole-episode step
compiles in about 5 s at any ``T`` (4.9 / 4.5 / 4.7 s at T = 61 / 201 / 401), and auto mode always trains on
whole episodes, pymarl's exact BPTT. Without them (no C++ compiler, ``MARL_KERNELS=0``) the reference
recurrence is unrolled at compile time, so compile time grows with ``T``: with the hand-written GRU BPTT about
10 / 16 / 26 / 37 / 148 CPU s at T = 61 / 101 / 151 / 201 / 401, and time buckets compile each length once
(benchmarks/results/long_episodes.md). There, above ``WHOLE_EPISODE_MAX_LIMIT`` the learner switches to
truncated BPTT in chunks of ``C`` transitions: a no-grad chunk-by-chunk pass gives both nets' Q-values and the
exact hidden state at every chunk start; double-Q + TD(lambda) targets are computed over the whole episode
from them; the loss then runs over the live chunks as rows, each starting from its exact hidden state. The
loss value is the whole-episode loss; the gradient lacks only the terms that flow back through a chunk's
starting hidden state (exact when ``C >= episode_limit``). Every graph has at most ``C`` unrolled steps and
static shapes, so each compiles once whatever the episode limit. In auto mode (``bptt_chunk = 0``, with time
buckets) a batch whose episodes all fit in ``HYBRID_MAX_SLOTS`` bucketed slots -- most batches once the agents
fight -- still takes the exact whole-episode step.
"""

from __future__ import annotations

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config.schema import Config
from marl.envs.base import EnvInfo
from marl.learners.optim import clip_and_apply
from marl.learners.targets import (
    chosen_q_loss,
    chunk_view,
    live_chunks,
    make_bootstrap,
    mixer_uses_actions,
    td_lambda_targets,
)
from marl.utils.ms import Tensor, jit, ms, nn

# Auto BPTT mode (learner.bptt_chunk = 0), chosen by measurement (benchmarks/results/long_episodes.md):
# whole-episode BPTT up to this episode limit (every SMAC map but corridor, 2c_vs_64zg, 2s_vs_1sc and
# 3s_vs_5z), chunks of about AUTO_CHUNK transitions above it.
WHOLE_EPISODE_MAX_LIMIT = 200
AUTO_CHUNK = 50
# Auto mode with chunks and time buckets: a batch whose bucketed length is at most this many slots (its
# episodes are all short) still takes the exact whole-episode step, compiled at that length.
HYBRID_MAX_SLOTS = 64


def resolve_bptt_chunk(bptt_chunk: int, episode_limit: int, recurrent: bool, compiled: bool = False) -> int:
    """Transitions per truncated-BPTT chunk for ``learner.bptt_chunk``; 0 = whole-episode BPTT.

    ``-1`` = whole episode; ``0`` = auto (whole episode when the recurrence runs in the compiled kernels,
    ``compiled``, whose compile time does not grow with ``T``, or when ``episode_limit <=
    WHOLE_EPISODE_MAX_LIMIT``; else the episode split evenly into chunks of at most ``AUTO_CHUNK``);
    ``C > 0`` = chunks of ``C``. A feed-forward agent has no loop over time, so it always trains on the
    whole episode.
    """
    if not isinstance(bptt_chunk, int) or bptt_chunk < -1:
        raise ValueError(
            f"learner.bptt_chunk must be -1 (whole episode), 0 (auto) or a positive chunk "
            f"length, got {bptt_chunk!r}"
        )
    if not recurrent or bptt_chunk == -1:
        return 0
    if bptt_chunk == 0:
        if compiled or episode_limit <= WHOLE_EPISODE_MAX_LIMIT:
            return 0
        n_chunks = -(-episode_limit // AUTO_CHUNK)
        return -(-episode_limit // n_chunks)
    return bptt_chunk


def chunk_group_sizes(n_rows: int, batch_size: int) -> list[int]:
    """Row counts of the groups the chunked loss runs over ``n_rows`` live chunk rows in: full groups of
    ``batch_size``, then the rest padded up to the smallest of ``batch_size / 2^k`` (at least
    ``batch_size / 8``) that holds it -- at most four shapes to compile, and a few rows more than a batch
    cost a small group, not a second full one."""
    full, rest = divmod(n_rows, batch_size)
    sizes = [batch_size] * full
    if rest:
        size, floor = batch_size, max(1, batch_size // 8)
        while size // 2 >= max(rest, floor):
            size //= 2
        sizes.append(size)
    return sizes


class ChunkedBPTT:
    """Mixin of :class:`~marl.learners.q_learner.QLearner`: the chunked loss and its graphs.

    The learner provides ``info``, ``cfg``, ``nets``, ``params``, ``optimizer``, ``bptt_chunk``,
    ``hybrid_slots``, ``_arrays``, ``train_slots`` and ``_lambda_tensors``, and stores what
    :meth:`_make_chunked` returns as ``_forward, _targets_fn, _grad_fn, _apply``.
    """

    info: EnvInfo
    cfg: Config
    nets: nn.Cell
    bptt_chunk: int
    hybrid_slots: int

    def _use_chunks(self, batch: EpisodeBatch) -> bool:
        """Whether ``batch`` trains with chunked BPTT: always when chunks are on, except that in auto mode
        a batch of short episodes (at most ``HYBRID_MAX_SLOTS`` bucketed slots) takes the whole-episode
        step."""
        if not self.bptt_chunk:
            return False
        return not self.hybrid_slots or self.train_slots(batch["filled"]) > self.hybrid_slots

    def _make_chunked(self):  # noqa: ANN202 (returns compiled functions)
        """Truncated BPTT in chunks of ``C = bptt_chunk`` transitions: four graphs, none with a loop over
        ``T`` slots. ``forward``: online + target unroll of one chunk from given hidden states, no
        gradient, compiled once. ``targets``: double-Q bootstrap + TD(lambda) over the whole episode,
        loop-free. ``grad_fn``: value_and_grad of the chosen-Q loss over ``B`` chunk rows that start from
        the exact hidden states of the no-grad pass; fixed shape, so compiled once; summed over groups of
        rows. ``apply``: clip + optimizer. The loss equals the whole-episode loss; only the gradient
        through a chunk's starting hidden state is cut."""
        lc, nets = self.cfg.learner, self.nets
        agent, target_agent, mixer = nets.agent, nets.target_agent, nets.mixer
        gamma, lam, clip = float(lc.gamma), float(lc.td_lambda), float(lc.grad_norm_clip)
        m_t, pow_vec = self._lambda_tensors(self.t_slots)
        optimizer = self.optimizer
        bootstrap = make_bootstrap(nets.target_mixer, bool(lc.double_q))
        uses_actions = mixer_uses_actions(mixer)

        def forward(inputs_BCNI, h_MH, target_h_MH):
            q_BCNA, h_MH = agent.unroll_from(inputs_BCNI, h_MH, need_grad=False)
            target_q_BCNA, target_h_MH = target_agent.unroll_from(inputs_BCNI, target_h_MH, need_grad=False)
            return q_BCNA, target_q_BCNA, h_MH, target_h_MH

        def targets(q_BTNA, target_q_BTNA, avail_BTNA, reward_BT1, term_BT1, mask_BT1, state_BTS):
            target_max = bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS)
            return td_lambda_targets(reward_BT1, term_BT1, mask_BT1, target_max, m_t, pow_vec, gamma, lam)

        def loss_fn(inputs_RCNI, h0_MH, actions_RCN1, avail_RCNA, state_RCS, targets_RCK, mask_RC1, n_valid):
            q_RCNA, _ = agent.unroll_from(inputs_RCNI, h0_MH)  # h0 is an input: no gradient into it
            return chosen_q_loss(
                mixer,
                uses_actions,
                q_RCNA,
                actions_RCN1,
                avail_RCNA,
                state_RCS,
                targets_RCK,
                mask_RC1,
                n_valid,
            )

        grad_fn = ms.value_and_grad(loss_fn, None, weights=self.params, has_aux=True)

        def apply(*grads):  # varargs: a tuple argument of tensors would be a constant (recompiles)
            return clip_and_apply(optimizer, grads, clip)

        fns = (forward, targets, grad_fn, apply)
        return tuple(jit(f) for f in fns) if lc.use_jit else fns

    def _forward_chunks(self, inputs_BTNI: np.ndarray, filled_BT1: np.ndarray) -> tuple[np.ndarray, ...]:
        """No-grad online and target Q ``(B, T, N, A)`` chunk by chunk, and the online hidden state at the
        start of every chunk ``(B, K, N, H)``. Chunks after the last filled slot are not run (their Q stay
        0; only padding slots, which every target and loss masks out)."""
        c, (b, t, n) = self.bptt_chunk, inputs_BTNI.shape[:3]
        hd, n_act = self.nets.agent.hidden_dim, self.info.n_actions
        n_fwd = -(-t // c)
        last = int(((filled_BT1[..., 0] > 0) * np.arange(1, t + 1)).max())  # slots to cover
        xs = chunk_view(inputs_BTNI, c, n_fwd)
        q, target_q = (np.zeros((b, n_fwd * c, n, n_act), np.float32) for _ in range(2))
        h_starts = np.zeros((b, n_fwd, n, hd), np.float32)
        h = target_h = Tensor.from_numpy(np.zeros((b * n, hd), np.float32))
        for k in range(-(-last // c)):
            h_starts[:, k] = h.asnumpy().reshape(b, n, hd)
            x_k = Tensor.from_numpy(np.ascontiguousarray(xs[:, k]))
            q_k, tq_k, h, target_h = self._forward(x_k, h, target_h)
            q[:, k * c : (k + 1) * c], target_q[:, k * c : (k + 1) * c] = q_k.asnumpy(), tq_k.asnumpy()
        return q[:, :t], target_q[:, :t], h_starts

    def _chunk_groups(self, batch: EpisodeBatch) -> tuple[list[list[ms.Tensor]], ms.Tensor]:
        """NumPy batch -> groups of ``B`` chunk rows for the chunked loss, and the batch's transition count.

        Every chunk of ``C`` transitions that holds a real transition becomes one row, with its exact
        starting hidden state and its TD(lambda) targets computed over the whole episode; all-padding
        chunks are skipped; the rows are cut into groups by :func:`chunk_group_sizes`, the last one padded
        with empty rows (mask 0)."""
        inputs, avail, actions, reward, term, mask, state = self._arrays(batch)
        c, (b, t, n) = self.bptt_chunk, inputs.shape[:3]
        q, target_q, h_starts = self._forward_chunks(inputs, batch["filled"])
        tgt = self._targets_fn(
            *(
                Tensor.from_numpy(np.ascontiguousarray(x))
                for x in (q, target_q, avail, reward, term, mask, state)
            )
        ).asnumpy()
        n_chunks = -(-(t - 1) // c)
        b_idx, k_idx = live_chunks(mask, c)
        sizes = chunk_group_sizes(len(b_idx), b)
        bounds = np.cumsum([0] + sizes)

        def take(x: np.ndarray, per_transition: bool = True) -> np.ndarray:
            picked = (chunk_view(x, c, n_chunks) if per_transition else x)[b_idx, k_idx]
            pad = np.zeros((bounds[-1] - len(b_idx),) + picked.shape[1:], picked.dtype)
            return np.concatenate([picked, pad])

        arrays = [
            take(inputs[:, :-1]),
            take(h_starts, per_transition=False),
            take(actions),
            take(avail[:, :-1]),
            take(state[:, :-1]),
            take(tgt),
            take(mask),
        ]
        groups = []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            part = [np.ascontiguousarray(x[lo:hi]) for x in arrays]
            part[1] = part[1].reshape((hi - lo) * n, -1)  # (rows, N, H) -> (rows * N, H) hidden-state rows
            groups.append([Tensor.from_numpy(x) for x in part])
        return groups, Tensor(np.float32(mask.sum() * tgt.shape[2]))  # as the broadcast mask counts

    def _chunked_loss_and_grads(self, batch: EpisodeBatch) -> tuple[ms.Tensor, ms.Tensor, tuple]:
        """Loss, stats and gradients of ``batch`` summed over its groups of chunk rows."""
        groups, n_valid = self._chunk_groups(batch)
        loss = stats = grads = None
        for group in groups:
            (g_loss, g_stats), g_grads = self._grad_fn(*group, n_valid)
            if grads is None:
                loss, stats, grads = g_loss, g_stats, g_grads
            else:
                loss, stats = loss + g_loss, stats + g_stats
                grads = tuple(a + g for a, g in zip(grads, g_grads, strict=True))
        return loss, stats, grads
