"""Value-decomposition mixers: ``construct(q_BTN, state_BTS) -> q_tot_BT1``.

* :class:`VDNMixer` -- Sunehag et al. 2018, "Value-Decomposition Networks For Cooperative Multi-Agent
  Learning": ``Q_tot = sum_a Q_a``.
* :class:`QMixer` -- Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep
  Multi-Agent Reinforcement Learning": a one-hidden-layer mixing network whose weights are produced by
  hypernetworks from the global state and made non-negative with ``abs``, so ``dQ_tot/dQ_a >= 0``.
"""

from __future__ import annotations

import numpy as np

from marl.modules.dense import Dense
from marl.registry import register
from marl.utils.ms import AbsGrad, ms, nn, ops


@register("mixer", "vdn")
class VDNMixer(nn.Cell):
    """Sum of the agents' Q-values (Sunehag et al. 2018). ``state`` is accepted and ignored."""

    def __init__(self, n_agents: int | None = None, state_dim: int | None = None, **_unused: int) -> None:
        super().__init__()
        self.n_agents = n_agents

    def construct(self, q_BTN: ms.Tensor, state_BTS: ms.Tensor) -> ms.Tensor:
        return q_BTN.sum(axis=2, keepdims=True)


def _hypernet(state_dim: int, out_dim: int, layers: int, hidden: int) -> nn.Cell:
    if layers == 1:
        return Dense(state_dim, out_dim)
    return nn.SequentialCell(Dense(state_dim, hidden), nn.ReLU(), Dense(hidden, out_dim))


@register("mixer", "qmix")
class QMixer(nn.Cell):
    """Monotonic mixing network with state-conditioned hypernetworks (Rashid et al. 2018).

    ``Q_tot = w_final(s)^T elu(W1(s)^T q + b1(s)) + V(s)`` with ``W1 = |hyper_w_1(s)|`` of shape
    ``(N, E)`` and ``w_final = |hyper_w_final(s)|`` of shape ``(E,)``; ``V`` is a two-layer network.
    """

    def __init__(
        self,
        n_agents: int,
        state_dim: int,
        embed_dim: int = 32,
        hypernet_layers: int = 2,
        hypernet_dim: int = 64,
    ) -> None:
        super().__init__()
        for name, value in (
            ("n_agents", n_agents),
            ("state_dim", state_dim),
            ("embed_dim", embed_dim),
            ("hypernet_dim", hypernet_dim),
        ):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"QMixer {name} must be a positive int, got {value!r}")
        if hypernet_layers not in (1, 2):
            raise ValueError(f"QMixer hypernet_layers must be 1 or 2, got {hypernet_layers!r}")
        self.n_agents, self.state_dim, self.embed_dim = n_agents, state_dim, embed_dim
        self.hyper_w_1 = _hypernet(state_dim, embed_dim * n_agents, hypernet_layers, hypernet_dim)
        self.hyper_w_final = _hypernet(state_dim, embed_dim, hypernet_layers, hypernet_dim)
        self.hyper_b_1 = Dense(state_dim, embed_dim)
        self.V = nn.SequentialCell(Dense(state_dim, embed_dim), nn.ReLU(), Dense(embed_dim, 1))
        # Constant 0/1 matrices that turn the per-row products q^T W1 and hidden . w_final into 2-D
        # matmuls (broadcast-multiply + ReduceSum over a middle axis was measured ~1.7x slower, fwd+grad).
        eye = np.eye(embed_dim, dtype=np.float32)
        self._repeat_q = ms.Tensor(np.repeat(np.eye(n_agents, dtype=np.float32), embed_dim, axis=1))
        self._sum_agents = ms.Tensor(np.tile(eye, (n_agents, 1)))
        self._sum_embed = ms.Tensor(np.ones((embed_dim, 1), np.float32))
        self.matmul = ops.MatMul()
        self.abs = Abs()
        self.elu = Elu()

    def construct(self, q_BTN: ms.Tensor, state_BTS: ms.Tensor) -> ms.Tensor:
        b, t, n = q_BTN.shape
        s = state_BTS.reshape(b * t, self.state_dim)  # 2-D for every hypernet matmul
        w1 = self.abs(self.hyper_w_1(s))  # (BT, N*E), row-major (agent, embed)
        q_rep = self.matmul(q_BTN.reshape(b * t, n), self._repeat_q)  # (BT, N*E): q_a repeated E times
        hidden = self.elu(self.matmul(q_rep * w1, self._sum_agents) + self.hyper_b_1(s))  # q^T W1 + b1
        w_final = self.abs(self.hyper_w_final(s))
        y = self.matmul(hidden * w_final, self._sum_embed) + self.V(s)
        return y.reshape(b, t, 1)


def qmix_reference(mixer: QMixer, q_BTN: ms.Tensor, state_BTS: ms.Tensor) -> ms.Tensor:
    """The readable form of :meth:`QMixer.construct` (pymarl's batched-matmul QMixer) with the same
    weights: ``hidden = elu(q^T W1 + b1)``, ``Q_tot = hidden w_final + V(s)``. The fast form is tested
    equal to this one."""
    b, t, n = q_BTN.shape
    e = mixer.embed_dim
    s = state_BTS.reshape(b * t, mixer.state_dim)
    w1 = ops.abs(mixer.hyper_w_1(s)).reshape(b * t, n, e)
    b1 = mixer.hyper_b_1(s).reshape(b * t, 1, e)
    hidden = ops.elu(ops.bmm(q_BTN.reshape(b * t, 1, n), w1) + b1)  # (BT, 1, E)
    w_final = ops.abs(mixer.hyper_w_final(s)).reshape(b * t, e, 1)
    v = mixer.V(s).reshape(b * t, 1, 1)
    return (ops.bmm(hidden, w_final) + v).reshape(b, t, 1)


class Abs(nn.Cell):
    """``|x|`` with MindSpore's ``AbsGrad`` kernel as its gradient (``dout * sign(x)``, 0 at 0).

    ``ops.abs``'s own gradient goes through the slow ``Sign`` kernel; ``relu(x) + relu(-x)`` (same values and
    gradient) was measured 2.4x faster, and this cell 2.5x faster again: fwd+grad on (1952, 96), the QMIX
    hypernet output at 3m sizes, 180-210 against 480-515 us, one kernel each way instead of four
    (``benchmarks/results/learner_step_levers.md``). Tests hold it equal to autodiff of ``ops.abs``."""

    def __init__(self) -> None:
        super().__init__()
        self.abs_grad = AbsGrad()

    def construct(self, x: ms.Tensor) -> ms.Tensor:  # noqa: D102
        return ops.abs(x)

    def bprop(self, x, out, dout):  # noqa: ANN001, ANN201, D102
        return (self.abs_grad(x, dout),)


class Elu(nn.Cell):
    """``elu(x)`` (alpha 1) with its gradient from the output: ``dout * (min(out, 0) + 1)`` (``exp(x)``
    where ``x <= 0``, 1 elsewhere). MindSpore's CPU ``EluGrad`` took 0.19-0.22 ms on the QMIX mixer's
    (1920, 32) at 3m sizes, the slowest element-wise kernel of the step
    (``benchmarks/results/learner_step_levers.md``); these three element-wise kernels take a fraction of
    that. Tests hold it equal to autodiff of ``ops.elu``."""

    def construct(self, x: ms.Tensor) -> ms.Tensor:  # noqa: D102
        return ops.elu(x)

    def bprop(self, x, out, dout):  # noqa: ANN001, ANN201, D102
        return (dout * (ops.minimum(out, 0.0) + 1.0),)
