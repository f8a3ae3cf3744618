"""``nn.Dense`` and a bias add whose bias gradient is a plain column sum.

MindSpore 2.10's CPU ``BiasAddGrad`` was measured 4-6x slower than ``ReduceSum`` over the same rows (2.0 ms
against 0.46 ms for a (5856, 128) gradient, the agent's input projection at SMAC 3m sizes; it was the
largest non-matmul cost of the QMIX step, see ``benchmarks/results/learner_step_levers.md``). The forward is
MindSpore's own ``BiasAdd``; only the gradient differs, and tests hold it equal to autodiff.
"""

from __future__ import annotations

from marl.utils.ms import ms, nn, ops


class BiasAdd(nn.Cell):
    """``x_NC + b_C`` for 2-D ``x``; the gradient of ``b`` is ``dout.sum(0)``."""

    def construct(self, x_NC: ms.Tensor, b_C: ms.Tensor) -> ms.Tensor:  # noqa: D102
        return ops.bias_add(x_NC, b_C)

    def bprop(self, x_NC, b_C, out, dout):  # noqa: ANN001, ANN201, D102
        return dout, dout.sum(0)


class Dense(nn.Dense):
    """``nn.Dense`` (same parameters, names and forward) with :class:`BiasAdd`'s faster bias gradient."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        if self.has_bias:
            self.bias_add = BiasAdd()
