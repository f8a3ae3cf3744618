"""Advantages, returns and a running value normaliser for on-policy learners (NumPy, outside the graph).

Time convention (see :mod:`marl.buffers.episode`): values cover all ``T`` slots, rewards / terminated /
mask cover the ``T - 1`` transitions. A transition with ``mask = 0`` (padding, or the slot after a
terminal step) gets zero advantage and does not leak into earlier ones. An episode cut by the time limit
is stored as not terminated, so its last transition bootstraps from the value of the final slot.
"""

from __future__ import annotations

import numpy as np


def _check(
    reward_BT1: np.ndarray, term_BT1: np.ndarray, mask_BT1: np.ndarray, values_BTN: np.ndarray
) -> None:
    b, t1 = reward_BT1.shape[:2]
    if values_BTN.ndim != 3 or values_BTN.shape[:2] != (b, t1 + 1):
        raise ValueError(
            f"values must be (B, T, N) with T = transitions + 1 = {t1 + 1}, got {values_BTN.shape}"
        )
    for name, x in (("terminated", term_BT1), ("mask", mask_BT1)):
        if x.shape[:2] != (b, t1):
            raise ValueError(f"{name} must be (B, T-1, 1) = {(b, t1, 1)}, got {x.shape}")


def gae(
    reward_BT1: np.ndarray,
    term_BT1: np.ndarray,
    mask_BT1: np.ndarray,
    values_BTN: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation (Schulman et al. 2016) for every agent's value ``V_BTN``.

    ``delta_t = r_t + gamma * V_{t+1} * (1 - term_t) - V_t``;
    ``A_t = mask_t * (delta_t + gamma * lam * (1 - term_t) * A_{t+1})``. Returns ``(adv, returns)`` of
    shape ``(B, T-1, N)`` with ``returns = A + V`` (lam = 1: Monte Carlo returns, bootstrapped at cuts).
    """
    _check(reward_BT1, term_BT1, mask_BT1, values_BTN)
    r = np.asarray(reward_BT1, np.float64)
    nonterm = 1.0 - np.asarray(term_BT1, np.float64)
    mask = np.asarray(mask_BT1, np.float64)
    v = np.asarray(values_BTN, np.float64)
    t1 = r.shape[1]
    adv = np.zeros(v[:, :-1].shape)
    nxt = np.zeros(adv[:, 0].shape)
    for t in range(t1 - 1, -1, -1):  # vectorised over (B, N); T is small
        delta = r[:, t] + gamma * v[:, t + 1] * nonterm[:, t] - v[:, t]
        nxt = mask[:, t] * (delta + gamma * lam * nonterm[:, t] * nxt)
        adv[:, t] = nxt
    ret = (adv + v[:, :-1]) * mask
    return adv.astype(np.float32), ret.astype(np.float32)


def discounted_returns(
    reward_BT1: np.ndarray, term_BT1: np.ndarray, mask_BT1: np.ndarray, values_BTN: np.ndarray, gamma: float
) -> np.ndarray:
    """Monte Carlo returns ``G_t = r_t + gamma (1 - term_t) G_{t+1}``, where past the last transition
    ``G`` is the bootstrap value ``V`` of the final slot (zero after a true termination). ``(B, T-1, N)``.

    These are GAE's returns with ``lam = 1`` (the advantages telescope to ``G - V``).
    """
    return gae(reward_BT1, term_BT1, mask_BT1, values_BTN, gamma, 1.0)[1]


class RunningMeanStd:
    """Exact running mean and variance of every value ever added (parallel Welford merge; Chan et al. 1979).

    Used as MAPPO's value normalisation (Yu et al. 2022): the critic predicts normalised returns, targets
    are normalised with the statistics including the newest batch, and predictions are de-normalised
    before GAE. Unlike MAPPO's exponential (beta = 0.99999) average, every sample weighs the same.
    """

    def __init__(self, eps: float = 1e-5) -> None:
        self.mean, self.var, self.count, self.eps = 0.0, 1.0, 0.0, eps

    def update(self, x: np.ndarray) -> None:
        """Fold the samples ``x`` (any shape) into the statistics."""
        x = np.asarray(x, np.float64).reshape(-1)
        if x.size == 0:
            return
        n, m, v = float(x.size), float(x.mean()), float(x.var())
        total = self.count + n
        delta = m - self.mean
        m2 = self.var * self.count + v * n + delta * delta * self.count * n / total
        self.mean, self.var, self.count = self.mean + delta * n / total, m2 / total, total

    @property
    def std(self) -> float:
        return float(np.sqrt(max(self.var, self.eps)))

    def normalize(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x) - self.mean) / self.std).astype(np.float32)

    def denormalize(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) * self.std + self.mean).astype(np.float32)

    def state(self) -> np.ndarray:
        return np.array([self.mean, self.var, self.count], np.float64)

    def load(self, arr: np.ndarray) -> None:
        self.mean, self.var, self.count = (float(v) for v in np.asarray(arr).reshape(3))
