"""Masks and TD(lambda) targets for padded episode batches.

Time convention (see :mod:`marl.buffers.episode`): a batch has ``T`` slots; transitions live in slots
``0..T-2`` (``reward``, ``terminated``, ``actions`` of slot ``t`` follow the obs of slot ``t``) and the
value of the next state comes from slot ``t + 1``.
"""

from __future__ import annotations

import numpy as np

from marl.utils.ms import ms, nn, ops


def transition_mask(filled_BT1: np.ndarray, terminated_BT1: np.ndarray) -> np.ndarray:
    """pymarl's loss mask ``(B, T-1, 1)``: ``filled[:, :-1]``, zeroed after the first terminated step.

    ``mask[:, 1:] *= 1 - terminated[:, :-1]``: the slot after a terminal transition holds only the
    final observation, so it is not a transition. A timed-out episode (not terminated) keeps its
    last transition and bootstraps from the final slot.
    """
    filled_all = np.asarray(filled_BT1, dtype=np.float32)
    term = np.asarray(terminated_BT1, dtype=np.float32)[:, :-1]
    # slot t is a transition only if slot t + 1 holds its next observation: this also drops the final
    # observation slot of an episode cut by the env's own time limit before episode_limit
    mask = filled_all[:, :-1] * filled_all[:, 1:]
    mask[:, 1:] = mask[:, 1:] * (1.0 - term[:, :-1])
    return mask


def check_time_bucket(bucket: int) -> None:
    """``learner.time_bucket`` must be a slot count >= 0 (0 = no bucketing)."""
    if not isinstance(bucket, int) or bucket < 0:
        raise ValueError(f"learner.time_bucket must be >= 0 (0 = no bucketing), got {bucket!r}")


def bucketed_slots(filled_BT1: np.ndarray, t_slots: int, bucket: int) -> int:
    """Slots a whole-episode learner needs for a padded batch: its longest episode's filled slots rounded
    up to a multiple of ``bucket`` (at least 2, at most ``t_slots``); ``bucket = 0`` keeps all ``t_slots``.

    Cutting the all-padding tail changes no loss, target or gradient (recurrent nets are causal and
    padding is masked), while a few static lengths keep the number of compiled graphs small.
    """
    check_time_bucket(bucket)
    if bucket == 0:
        return t_slots
    longest = int(np.asarray(filled_BT1)[..., 0].sum(axis=1).max())
    return min(t_slots, max(2, -(-longest // bucket) * bucket))


def lambda_return_matrices(t_slots: int, gamma: float, td_lambda: float) -> tuple[np.ndarray, np.ndarray]:
    """Constants of the loop-free lambda-return for ``T = t_slots`` slots.

    With ``c_k = mask_k * (r_k + (1 - lambda) * gamma * Q_{k+1} * (1 - term_k))`` the backward recursion
    ``G_t = lambda * gamma * G_{t+1} + c_t`` (``t = T-2 .. 0``, ``G_{T-1} = Q_{T-1} * (1 - sum_k term_k)``)
    unrolls to ``G_t = sum_{k>=t} (lambda gamma)^(k-t) c_k + (lambda gamma)^(T-1-t) G_{T-1}``, i.e.
    ``G = M @ c + pow * G_{T-1}`` with ``M[t, k] = (lambda gamma)^(k-t)`` for ``k >= t`` (else 0) and
    ``pow[t] = (lambda gamma)^(T-1-t)``. Returns ``(M.T, pow)`` as float32 arrays of shape
    ``(T-1, T-1)`` and ``(T-1,)``; ``lambda = 0`` gives ``M = I`` and ``pow = 0`` (one-step targets).
    """
    if t_slots < 2:
        raise ValueError(f"need at least 2 time slots for a transition, got {t_slots}")
    if not 0.0 <= td_lambda <= 1.0:
        raise ValueError(f"td_lambda must be in [0, 1], got {td_lambda}")
    n = t_slots - 1
    decay = float(td_lambda) * float(gamma)
    idx = np.arange(n)
    diff = idx[None, :] - idx[:, None]  # k - t
    m = np.where(diff >= 0, np.power(decay, np.maximum(diff, 0), dtype=np.float64), 0.0)
    pow_vec = np.power(decay, (n - idx).astype(np.float64))
    return np.ascontiguousarray(m.T, dtype=np.float32), pow_vec.astype(np.float32)


def td_lambda_targets_reference(
    reward_BT1: np.ndarray,
    terminated_BT1: np.ndarray,
    mask_BT1: np.ndarray,
    target_q_BTK: np.ndarray,
    gamma: float,
    td_lambda: float,
) -> np.ndarray:
    """The readable form of :func:`td_lambda_targets`: pymarl2's backward recursion, in NumPy.

    ``G_{T-1} = Q_{T-1} (1 - terminated anywhere)`` and, going back in time,
    ``G_t = lambda gamma G_{t+1} + mask_t (r_t + (1 - lambda) gamma Q_{t+1} (1 - term_t))``; returns the
    ``T-1`` targets ``(B, T-1, K)``. The fast form is tested equal to this one.
    """
    q = np.asarray(target_q_BTK, dtype=np.float64)
    ret = np.zeros_like(q)
    ret[:, -1] = q[:, -1] * (1.0 - np.asarray(terminated_BT1).sum(axis=1))
    for t in range(q.shape[1] - 2, -1, -1):
        bootstrap = (1.0 - td_lambda) * gamma * q[:, t + 1] * (1.0 - terminated_BT1[:, t])
        ret[:, t] = td_lambda * gamma * ret[:, t + 1] + mask_BT1[:, t] * (reward_BT1[:, t] + bootstrap)
    return ret[:, :-1]


def td_lambda_targets(
    reward_BT1: ms.Tensor,
    terminated_BT1: ms.Tensor,
    mask_BT1: ms.Tensor,
    target_q_BTK: ms.Tensor,
    m_t: ms.Tensor,
    pow_vec: ms.Tensor,
    gamma: float,
    td_lambda: float,
) -> ms.Tensor:
    """Loop-free TD(lambda) targets ``(B, T-1, K)`` (pymarl2's ``build_td_lambda_targets``); the readable
    loop is :func:`td_lambda_targets_reference`.

    ``reward/terminated/mask`` cover the ``T-1`` transitions; ``target_q_BTK`` covers all ``T`` slots
    (``K`` = 1 after a mixer, ``N`` for independent learners); ``m_t, pow_vec`` come from
    :func:`lambda_return_matrices`.
    """
    b, t, k = target_q_BTK.shape
    n = t - 1
    q_next = target_q_BTK[:, 1:]
    c = mask_BT1 * (reward_BT1 + (1.0 - td_lambda) * gamma * q_next * (1.0 - terminated_BT1))  # (B, n, K)
    g_last = target_q_BTK[:, n] * (1.0 - terminated_BT1.sum(axis=1))  # (B, K)
    # sum_k M[t, k] c[b, k, :] as one 2-D matmul: (B*K, n) @ M.T
    c_rows = c.transpose(0, 2, 1).reshape(b * k, n)
    g = ops.matmul(c_rows, m_t).reshape(b, k, n).transpose(0, 2, 1)
    return g + pow_vec.reshape(1, n, 1) * g_last.reshape(b, 1, k)


def mixer_uses_actions(mixer: object) -> bool:
    """Whether a mixer (class or instance) takes the actions and the agents' max-Q (see :func:`mix`).

    A mixer declares it with a class attribute ``uses_actions = True``; mixers without it (VDN, QMIX)
    are called ``mixer(q_BTN, state_BTS)``."""
    return bool(getattr(mixer, "uses_actions", False))


def mix(mixer: nn.Cell | None, uses_actions: bool, q_BTN, state_BTS, actions_BTNA, max_q_BTN):  # noqa: ANN201
    """The mixer interface: ``Q_tot (B, T, 1)`` of the agents' Q-values ``q_BTN`` of the actions
    ``actions_BTNA`` (one-hot), given the global state and each agent's max-Q ``max_q_BTN`` over its
    available actions. ``mixer=None`` (IQL) returns ``q_BTN`` unmixed. ``uses_actions`` is
    :func:`mixer_uses_actions` of the mixer, resolved outside the graph."""
    if mixer is None:
        return q_BTN
    if uses_actions:
        return mixer(q_BTN, state_BTS, actions_BTNA, max_q_BTN)
    return mixer(q_BTN, state_BTS)


def _greedy(q_BTNA, avail_BTNA):  # noqa: ANN202
    """Greedy action ``(B, T, N, 1)`` and max-Q ``(B, T, N)`` over the available actions."""
    q_avail = ops.masked_fill(q_BTNA, avail_BTNA == 0, -9999999.0)
    return ops.argmax(q_avail, dim=3, keepdim=True), q_avail.max(axis=3)


def make_bootstrap(target_mixer: nn.Cell | None, double_q: bool):  # noqa: ANN202 (a graph function)
    """``bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS) -> (B, T, K)``: the target network's value
    of every slot, the action picked by the online net (double Q) or by the target net, then mixed (a mixer
    that uses actions gets that action and the target agents' max-Q)."""
    uses_actions = mixer_uses_actions(target_mixer)

    def bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS):
        if double_q:  # action chosen by the online net, valued by the target net
            best_BTN1, _ = _greedy(ops.stop_gradient(q_BTNA), avail_BTNA)
            target_BTN = ops.gather_elements(target_q_BTNA, 3, best_BTN1).squeeze(3)
        else:
            best_BTN1, target_BTN = _greedy(target_q_BTNA, avail_BTNA)
        if not uses_actions:
            return mix(target_mixer, False, target_BTN, state_BTS, None, None)
        _, max_q_BTN = _greedy(target_q_BTNA, avail_BTNA)
        best_BTNA = ops.one_hot(best_BTN1.squeeze(3), target_q_BTNA.shape[3], 1.0, 0.0)
        return mix(target_mixer, True, target_BTN, state_BTS, best_BTNA, max_q_BTN)

    return bootstrap


def chosen_q_loss(
    mixer: nn.Cell | None,
    uses_actions: bool,
    q_BTNA: ms.Tensor,
    actions_BTN1: ms.Tensor,
    avail_BTNA: ms.Tensor,
    state_BTS: ms.Tensor,
    targets: ms.Tensor,
    mask_BT1: ms.Tensor,
    n_valid: ms.Tensor | None = None,
) -> tuple[ms.Tensor, ms.Tensor]:
    """The Q-learner's loss, shared by the whole-episode and the chunked step: the (mixed) online Q of the
    taken actions against fixed ``targets`` (:func:`masked_td_loss`). Every input covers the same
    ``T`` transitions (the whole episode's ``T-1``, or a chunk's ``C``)."""
    chosen_BTN = ops.gather_elements(q_BTNA, 3, actions_BTN1).squeeze(3)
    if uses_actions:
        _, max_q_BTN = _greedy(ops.stop_gradient(q_BTNA), avail_BTNA)
        actions_BTNA = ops.one_hot(actions_BTN1.squeeze(3), q_BTNA.shape[3], 1.0, 0.0)
        chosen = mix(mixer, True, chosen_BTN, state_BTS, actions_BTNA, max_q_BTN)
    else:
        chosen = mix(mixer, False, chosen_BTN, state_BTS, None, None)
    return masked_td_loss(chosen, targets, mask_BT1, n_valid)


def masked_td_loss(
    chosen: ms.Tensor, targets: ms.Tensor, mask_BT1: ms.Tensor, n_valid: ms.Tensor | None = None
) -> tuple[ms.Tensor, ms.Tensor]:
    """``0.5 * sum(mask * (chosen - targets)^2) / n_valid`` and the stats (|td|, chosen Q, target), with
    ``n_valid = sum(mask)`` unless given (a part of a batch divides by the count of the whole batch)."""
    mask = ops.broadcast_to(mask_BT1, chosen.shape)
    if n_valid is None:
        n_valid = mask.sum()
    td = (chosen - targets) * mask
    loss = 0.5 * (td * td).sum() / n_valid
    stats = ops.stack(
        [ops.abs(td).sum() / n_valid, (chosen * mask).sum() / n_valid, (targets * mask).sum() / n_valid]
    )
    return loss, stats


# ------------------------------------------------------------------------ chunked (truncated) BPTT
def chunk_view(x_BT: np.ndarray, chunk: int, n_chunks: int) -> np.ndarray:
    """``(B, T, ...) -> (B, n_chunks, chunk, ...)``: slots ``k*chunk .. k*chunk + chunk - 1`` in chunk ``k``;
    zero-padded at the end when ``n_chunks * chunk > T``, cut when it is shorter."""
    b, t = x_BT.shape[:2]
    need = n_chunks * chunk
    if need > t:
        x_BT = np.concatenate([x_BT, np.zeros((b, need - t) + x_BT.shape[2:], x_BT.dtype)], axis=1)
    return x_BT[:, :need].reshape((b, n_chunks, chunk) + x_BT.shape[2:])


def live_chunks(mask_BT1: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """``(episode index, chunk index)`` of every chunk of ``chunk`` transitions holding at least one real
    transition (``mask_BT1`` from :func:`transition_mask`); chunks that are all padding are left out."""
    n_chunks = -(-mask_BT1.shape[1] // chunk)
    live = chunk_view(mask_BT1, chunk, n_chunks)[..., 0].sum(axis=2) > 0  # (B, K)
    b_idx, k_idx = np.nonzero(live)
    return b_idx, k_idx
