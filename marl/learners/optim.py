"""Optimizers with PyTorch semantics (so pymarl/pymarl2 hyperparameters carry over) and grad clipping.

``mindspore.nn.RMSProp`` puts ``eps`` inside the square root (``g / sqrt(s + eps)``); with pymarl's
``eps = 1e-5`` early updates were measured 3-150x smaller than torch's ``g / (sqrt(s) + eps)``.
:class:`TorchRMSProp` implements the torch rule. ``mint.optim.Adam`` matches ``torch.optim.Adam`` inside
``ms.jit`` but did not update the parameters at all when called eagerly (PyNative, MindSpore 2.10,
checked here), so :class:`TorchAdam` implements torch's Adam with the same pattern as the RMSprop, and
the jitted and eager train steps run the same optimizer code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from marl.utils.ms import Parameter, ms, nn, ops

_rms_update = ops.MultitypeFuncGraph("rms_update")


@_rms_update.register("Float", "Float", "Float", "Tensor", "Tensor", "Tensor")
def _rms_step(
    lr: float, alpha: float, eps: float, param: ms.Tensor, square_avg: ms.Tensor, grad: ms.Tensor
) -> bool:
    s_new = alpha * square_avg + (1.0 - alpha) * grad * grad
    ops.assign(square_avg, s_new)
    ops.assign(param, param - lr * grad / (ops.sqrt(s_new) + eps))
    return True


class TorchRMSProp(nn.Cell):
    """RMSprop exactly as ``torch.optim.RMSprop`` (no momentum, not centered): eps outside the sqrt."""

    def __init__(
        self, params: Sequence[Parameter], lr: float, alpha: float = 0.99, eps: float = 1e-8
    ) -> None:
        super().__init__()
        if lr <= 0 or not 0.0 <= alpha < 1.0 or eps < 0:
            raise ValueError(f"RMSprop needs lr > 0, 0 <= alpha < 1, eps >= 0; got {lr}, {alpha}, {eps}")
        self.parameters = ms.ParameterTuple(params)
        self.square_avg = self.parameters.clone(prefix="square_avg", init="zeros")
        self.lr, self.alpha, self.eps = float(lr), float(alpha), float(eps)
        self.hyper_map = ops.HyperMap()

    def construct(self, grads: tuple[ms.Tensor, ...]) -> bool:
        return self.hyper_map(
            ops.partial(_rms_update, self.lr, self.alpha, self.eps), self.parameters, self.square_avg, grads
        )


_adam_update = ops.MultitypeFuncGraph("adam_update")


@_adam_update.register(
    "Function",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
    "Tensor",
)
def _adam_step(
    adam_op,
    beta1_power: ms.Tensor,
    beta2_power: ms.Tensor,
    lr: ms.Tensor,
    beta1: ms.Tensor,
    beta2: ms.Tensor,
    eps_t: ms.Tensor,
    param: ms.Tensor,
    exp_avg: ms.Tensor,
    exp_avg_sq: ms.Tensor,
    grad: ms.Tensor,
) -> bool:
    adam_op(param, exp_avg, exp_avg_sq, beta1_power, beta2_power, lr, beta1, beta2, eps_t, grad)
    return True


class TorchAdam(nn.Cell):
    """Adam exactly as ``torch.optim.Adam`` (no weight decay, no amsgrad; Kingma & Ba 2015).

    One fused ``Adam`` kernel per parameter (instead of ~16 element-wise kernels: this workload is bound
    by the number of kernels). That kernel computes ``w -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + e)``;
    with ``e = eps sqrt(1 - b2^t)`` this is exactly torch's ``w -= lr/(1-b1^t) m / (sqrt(v/(1-b2^t)) + eps)``.
    """

    def __init__(
        self,
        params: Sequence[Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__()
        if lr <= 0 or not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0) or eps < 0:
            raise ValueError(f"Adam needs lr > 0, betas in [0, 1), eps >= 0; got {lr}, {betas}, {eps}")
        self.parameters = ms.ParameterTuple(params)
        self.exp_avg = self.parameters.clone(prefix="exp_avg", init="zeros")
        self.exp_avg_sq = self.parameters.clone(prefix="exp_avg_sq", init="zeros")
        self.state_step = Parameter(
            ms.Tensor(np.zeros((1,), np.float32)), name="state_step", requires_grad=False
        )
        self.beta1, self.beta2, self.eps = float(betas[0]), float(betas[1]), float(eps)
        self.consts = [ms.Tensor(float(x), ms.float32) for x in (lr, betas[0], betas[1])]  # kernel inputs
        self.adam_op = ops.Adam()
        self.hyper_map = ops.HyperMap()

    def construct(self, grads: tuple[ms.Tensor, ...]) -> bool:
        step = self.state_step + 1.0
        ops.assign(self.state_step, step)
        beta1_power, beta2_power = ops.pow(self.beta1, step), ops.pow(self.beta2, step)
        eps_t = self.eps * ops.sqrt(1.0 - beta2_power)
        lr, beta1, beta2 = self.consts
        update = ops.partial(
            _adam_update,
            self.adam_op,
            beta1_power.reshape(()),
            beta2_power.reshape(()),
            lr,
            beta1,
            beta2,
            eps_t.reshape(()),
        )
        return self.hyper_map(update, self.parameters, self.exp_avg, self.exp_avg_sq, grads)


def make_optimizer(name: str, params: Sequence[Parameter], lr: float, alpha: float, eps: float) -> nn.Cell:
    """``adam`` (:class:`TorchAdam`, torch defaults betas=(0.9, 0.999), eps=1e-8, as pymarl2 uses) or
    ``rmsprop`` (:class:`TorchRMSProp` with ``alpha``/``eps``, as pymarl uses)."""
    if name == "adam":
        return TorchAdam(params, lr=lr)
    if name == "rmsprop":
        return TorchRMSProp(params, lr=lr, alpha=alpha, eps=eps)
    raise ValueError(f"unknown optimizer {name!r}; allowed: adam, rmsprop")


def clip_grad_norm(grads: tuple[ms.Tensor, ...], max_norm: float) -> tuple[tuple[ms.Tensor, ...], ms.Tensor]:
    """Scale ``grads`` so their global L2 norm is at most ``max_norm`` (``torch.nn.utils.clip_grad_norm_``
    semantics: coefficient ``max_norm / (norm + 1e-6)`` clamped to 1). Returns ``(grads, norm)``;
    ``max_norm <= 0`` disables clipping but still reports the norm."""
    flat = ops.concat([g.reshape(-1) for g in grads])  # one reduction, not one per parameter
    norm = ops.sqrt((flat * flat).sum())
    if max_norm <= 0:
        return grads, norm
    coef = ops.clamp(max_norm / (norm + 1e-6), max=1.0)
    return tuple(g * coef for g in grads), norm


def clip_and_apply(optimizer: nn.Cell, grads: tuple[ms.Tensor, ...], max_norm: float) -> ms.Tensor:
    """Clip ``grads`` (:func:`clip_grad_norm`) and apply them with ``optimizer`` only when their norm is
    finite, so a NaN/inf loss or gradient never reaches the weights or the optimizer state (the trainer
    then stops or skips, ``learner.on_nonfinite``). Returns the unclipped norm (non-finite = skipped)."""
    grads, norm = clip_grad_norm(grads, max_norm)
    if ops.isfinite(norm):  # graph-mode control flow, as MindSpore's own loss-scale cells skip overflow
        optimizer(grads)
    return norm
