"""A GRU recurrence and its backpropagation through time in float64 NumPy: the truth the GRU kernels'
tests hold their float32 results to (a helper module, not a test file)."""

from __future__ import annotations

import numpy as np


def gru_bptt_f64(
    gi_TMG: np.ndarray, h0_MH: np.ndarray, w_hh: np.ndarray, b_hh: np.ndarray, dh_TMH: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's GRU cell over T steps from the input projections ``gi`` (biases included, gates r, z, n)
    and the gradients of ``sum(h * dh)``: ``(h_TMH, d gi_TMG, d h0, d W_hh, d b_hh)``."""
    hd = h0_MH.shape[1]
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    hs, saved, h = [], [], h0_MH
    for t in range(gi_TMG.shape[0]):
        x, g = gi_TMG[t], h @ w_hh.T + b_hh
        r, z = sig(x[:, :hd] + g[:, :hd]), sig(x[:, hd : 2 * hd] + g[:, hd : 2 * hd])
        hn = g[:, 2 * hd :]
        n = np.tanh(x[:, 2 * hd :] + r * hn)
        saved.append((h, r, z, n, hn))
        h = n + z * (h - n)
        hs.append(h)
    d_gi, d_w, d_b_hh = np.zeros_like(gi_TMG), np.zeros_like(w_hh), np.zeros_like(b_hh)
    carry = np.zeros_like(h0_MH)
    for t in range(gi_TMG.shape[0] - 1, -1, -1):
        hp, r, z, n, hn = saved[t]
        dh = dh_TMH[t] + carry
        d_npre = dh * (1 - z) * (1 - n * n)
        dg = np.concatenate([d_npre * hn * r * (1 - r), dh * (hp - n) * z * (1 - z), d_npre * r], 1)
        d_gi[t] = np.concatenate([dg[:, : 2 * hd], d_npre], 1)
        carry = dh * z + dg @ w_hh
        d_w += dg.T @ hp
        d_b_hh += dg.sum(0)
    return np.stack(hs), d_gi, carry, d_w, d_b_hh
