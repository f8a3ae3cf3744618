"""Dueling Q heads (Wang et al. 2016, "Dueling Network Architectures for Deep Reinforcement Learning").

``Q(h, a) = V(h) + A(h, a) - mean_a' A(h, a')`` with linear value and advantage streams on the agent's
last hidden layer. The agents are the house :class:`~marl.modules.agents.MLPAgent` /
:class:`~marl.modules.agents.RNNAgent` with their output ``Dense`` replaced by a :class:`DuelingHead`
(same call signature), so ``unroll`` and ``construct`` are reused unchanged.

Because both streams are linear in ``h``, the aggregated head IS a linear layer with weights
``W_q = 1 w_v^T + W_a - 1 mean_rows(W_a)`` and bias ``b_q = b_v + b_a - mean(b_a)``.
:func:`plain_agent_weights` folds a dueling agent's weights into those of the plain agent, so acting
reuses the plain NumPy actors (:mod:`marl.controllers.numpy_actor`) with the exact same Q-values; the
dueling parametrisation only changes how learning distributes the gradient.
"""

from __future__ import annotations

import numpy as np

from marl.modules.agents import MLPAgent, RNNAgent
from marl.modules.dense import Dense
from marl.registry import register
from marl.utils.ms import ms, nn

# dueling agent name -> (plain agent name, name of the output layer that the dueling head replaces)
PLAIN_AGENT = {"dueling_mlp": ("mlp", "fc3"), "dueling_rnn": ("rnn", "fc2")}


class DuelingHead(nn.Cell):
    """``(M, H) -> (M, A)``: value stream ``Dense(H, 1)`` plus mean-subtracted advantages ``Dense(H, A)``."""

    def __init__(self, hidden_dim: int, n_actions: int) -> None:
        super().__init__()
        self.value = Dense(hidden_dim, 1)
        self.advantage = Dense(hidden_dim, n_actions)

    def construct(self, h_MH: ms.Tensor) -> ms.Tensor:
        adv_MA = self.advantage(h_MH)
        return self.value(h_MH) + adv_MA - adv_MA.mean(axis=1, keep_dims=True)


@register("agent", "dueling_mlp")
class DuelingMLPAgent(MLPAgent):
    """:class:`MLPAgent` with a dueling output head (Wang et al. 2016)."""

    def __init__(self, input_dim: int, hidden_dim: int, n_actions: int) -> None:
        super().__init__(input_dim, hidden_dim, n_actions)
        self.fc3 = DuelingHead(hidden_dim, n_actions)


@register("agent", "dueling_rnn")
class DuelingRNNAgent(RNNAgent):
    """:class:`RNNAgent` with a dueling output head (Wang et al. 2016)."""

    def __init__(self, input_dim: int, hidden_dim: int, n_actions: int) -> None:
        super().__init__(input_dim, hidden_dim, n_actions)
        self.fc2 = DuelingHead(hidden_dim, n_actions)


def plain_agent_weights(name: str, weights: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray]]:
    """``(plain agent name, weights)`` computing the same Q-values as dueling agent ``name``.

    Non-dueling names pass through unchanged. The head ``<layer>.value.*`` / ``<layer>.advantage.*`` is
    folded into ``<layer>.weight`` / ``<layer>.bias`` (see the module docstring).
    """
    if name not in PLAIN_AGENT:
        return name, dict(weights)
    plain, layer = PLAIN_AGENT[name]
    out = {k: v for k, v in weights.items() if not k.startswith(f"{layer}.")}
    w_v, b_v = weights[f"{layer}.value.weight"], weights[f"{layer}.value.bias"]  # (1, H), (1,)
    w_a, b_a = weights[f"{layer}.advantage.weight"], weights[f"{layer}.advantage.bias"]  # (A, H), (A,)
    out[f"{layer}.weight"] = (w_v + w_a - w_a.mean(axis=0, keepdims=True)).astype(np.float32)
    out[f"{layer}.bias"] = (b_v + b_a - b_a.mean()).astype(np.float32)
    return plain, out
