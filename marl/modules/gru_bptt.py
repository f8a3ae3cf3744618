"""The GRU recurrence over a whole sequence, with a hand-written backward pass (BPTT).

:class:`GRUSequence` runs ``h_t = GRUCell(x_t, h_{t-1})`` for ``t = 0..T-1`` given the input projections
``gi_t = W_ih x_t + b`` already computed for every step (one big matmul outside the loop). Its ``bprop`` is
written by hand instead of letting MindSpore differentiate the unrolled loop, because on CPU this workload
is bound by the number of kernels and small matmuls (see ``benchmarks/results/learner_step_levers.md``):

* per step, autodiff emits four matmuls (``dh`` and ``dW`` for ``W_hr|W_hz`` and ``W_hn``) and a bias
  gradient; here a step costs one ``(M, 3H) @ (3H, H)`` matmul and five small kernels (two adds, two
  muls, a concat), and the weight gradients are one ``(3H, T*M) @ (T*M, H)`` matmul after the loop;
* the derivative factors of the gates are computed once for all steps on ``(T, M, H)`` tensors;
* the graph to compile is smaller (no autodiff of ``T`` unrolled steps).

The gradient is exact (tests compare it with autodiff of ``nn.GRUCell``). Gate order, equations and
parameter layout follow ``torch.nn.GRUCell`` (r, z, n):
``r, z = sig(gi_rz + W_h{r,z} h)``, ``n = tanh(gi_n + r * (W_hn h + b_hn))``, ``h' = n + z * (h - n)``,
where ``b_hr`` and ``b_hz`` are folded into ``gi_rz`` by the caller.
"""

from __future__ import annotations

from marl.utils.ms import ms, nn, ops

_matmul_t = ops.MatMul(transpose_b=True)


def gru_step(
    h_MH: ms.Tensor, gi_rz_MG: ms.Tensor, gi_n_MH: ms.Tensor, w_rz: ms.Tensor, w_n: ms.Tensor, b_n: ms.Tensor
) -> tuple[ms.Tensor, ms.Tensor, ms.Tensor, ms.Tensor]:
    """One GRU step: ``(h', [r|z], n, W_hn h + b_hn)``."""
    rz = ops.sigmoid(gi_rz_MG + _matmul_t(h_MH, w_rz))
    r, z = ops.split(rz, h_MH.shape[1], 1)
    hn = ops.bias_add(_matmul_t(h_MH, w_n), b_n)
    cand = ops.tanh(gi_n_MH + r * hn)
    return cand + z * (h_MH - cand), rz, cand, hn  # cand + z (h - cand) == (1 - z) cand + z h


def _scan(
    gi_rz_TMG: ms.Tensor, gi_n_TMH: ms.Tensor, h0_MH: ms.Tensor, w_hh: ms.Tensor, b_n: ms.Tensor, save: bool
) -> tuple[list, list, list, list]:
    """The unrolled recurrence: lists of ``h``, and (``save``) of ``[r|z]``, ``n`` and ``W_hn h + b_hn``."""
    hd = h0_MH.shape[1]
    w_rz, w_n = w_hh[: 2 * hd], w_hh[2 * hd :]
    gi_rz, gi_n = ops.unstack(gi_rz_TMG, 0), ops.unstack(gi_n_TMH, 0)
    h, hs, rzs, ns, hns = h0_MH, [], [], [], []
    for step in range(len(gi_rz)):  # unrolled at compile time (T is static)
        h, rz, cand, hn = gru_step(h, gi_rz[step], gi_n[step], w_rz, w_n, b_n)
        hs.append(h)
        if save:
            rzs.append(rz)
            ns.append(cand)
            hns.append(hn)
    return hs, rzs, ns, hns


def gru_forward(
    gi_rz_TMG: ms.Tensor, gi_n_TMH: ms.Tensor, h0_MH: ms.Tensor, w_hh: ms.Tensor, b_n: ms.Tensor
) -> ms.Tensor:
    """Hidden states ``(T, M, H)`` of the recurrence, for passes that need no gradient."""
    return ops.stack(_scan(gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n, save=False)[0], 0)


class GRUSequence(nn.Cell):
    """``(gi_rz (T, M, 2H), gi_n (T, M, H), h0 (M, H), W_hh (3H, H), b_hn (H,))`` -> hidden states.

    Returns ``(h_TMH, hprev_TMH, rz_TMG, n_TMH, hn_TMH)``; only ``h_TMH`` may be used by the caller (the
    others are saved activations for ``bprop``, whose incoming gradients are ignored).
    """

    def __init__(self) -> None:
        super().__init__()
        # primitives, not functional ops: functional ops inside a ``bprop`` fail to compile (MindSpore 2.10)
        self.slice = ops.Slice()
        self.reduce_sum = ops.ReduceSum()
        self.matmul = ops.MatMul()
        self.matmul_ta = ops.MatMul(transpose_a=True)
        self.unstack = ops.Unstack(axis=0)
        self.stack = ops.Stack(axis=0)
        self.cat1 = ops.Concat(axis=1)
        self.cat2 = ops.Concat(axis=2)
        self.split2 = ops.Split(axis=2, output_num=2)
        self.zeros_like = ops.ZerosLike()

    def construct(self, gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n):  # noqa: ANN001, ANN201, D102
        hs, rzs, ns, hns = _scan(gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n, save=True)
        hprev_TMH = ops.stack([h0_MH] + hs[:-1], 0)
        return ops.stack(hs, 0), hprev_TMH, ops.stack(rzs, 0), ops.stack(ns, 0), ops.stack(hns, 0)

    def bprop(self, gi_rz_TMG, gi_n_TMH, h0_MH, w_hh, b_n, out, dout):  # noqa: ANN001, ANN201, D102
        _, hprev, rz, cand, hn = out
        t, m, hd = cand.shape
        r, z = self.split2(rz)
        # derivative factors for all steps at once: d h_t / d (pre-activations of n, r, z and W_hn h + b)
        one_minus_z = 1.0 - z
        d_n = one_minus_z * (1.0 - cand * cand)
        k_TMG = self.cat2((d_n * hn * r * (1.0 - r), (hprev - cand) * z * one_minus_z, d_n * r))
        ks, zs, dhs_out = self.unstack(k_TMG), self.unstack(z), self.unstack(dout[0])
        carry = self.zeros_like(h0_MH)
        dgs, dhs = [None] * t, [None] * t
        for step in range(t - 1, -1, -1):
            dh = dhs_out[step] + carry
            dg = self.cat1((dh, dh, dh)) * ks[step]  # d of [W_hr h, W_hz h, W_hn h + b_hn]
            carry = dh * zs[step] + self.matmul(dg, w_hh)
            dgs[step], dhs[step] = dg, dh
        dg_TMG = self.stack(dgs)
        dg_rz = self.slice(dg_TMG, (0, 0, 0), (t, m, 2 * hd))
        dg_n = self.slice(dg_TMG, (0, 0, 2 * hd), (t, m, hd))
        dg_2d = dg_TMG.reshape(t * m, 3 * hd)
        d_w_hh = self.matmul_ta(dg_2d, hprev.reshape(t * m, hd))
        # axis 0 of the 2-D view: measured 273 us, vs 1,626 us over axes (0, 1) of (T, M, H) and 929 us as
        # a ones-vector matmul
        d_b_n = self.reduce_sum(dg_n.reshape(t * m, hd), 0)
        return dg_rz, self.stack(dhs) * d_n, carry, d_w_hh, d_b_n
