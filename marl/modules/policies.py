"""Actor and critic Cells for on-policy learners (PPO / MAPPO / IPPO, REINFORCE).

* :class:`PolicyNet`: a shared-parameter agent trunk (the ``rnn`` or ``mlp`` agent of
  :mod:`marl.modules.agents`, so the NumPy actors of :mod:`marl.controllers.numpy_actor` act with the same
  weights) whose outputs are categorical logits, or the Gaussian mean with a state-independent learned
  ``log_std`` for continuous actions.
* :class:`ValueNet`: an MLP value head ``V`` on the agent's own input (IPPO / single-agent PPO);
  :class:`CentralValueNet` the same head on the global state (+ agent id), MAPPO's centralised ``V(s)``.
* :func:`categorical_logp_entropy`, :func:`gaussian_logp_entropy`: masked log-probabilities and entropies.
"""

from __future__ import annotations

import math

import numpy as np

from marl.modules.dense import Dense
from marl.registry import build
from marl.utils.ms import Parameter, Tensor, ms, nn, ops

MASKED_LOGIT = -1e10  # logits of unavailable actions (finite: an all-masked padding slot stays NaN-free)


class PolicyNet(nn.Cell):
    """Shared actor: ``unroll(inputs_BTNI) -> out_BTNA`` (logits, or Gaussian means with ``log_std``)."""

    def __init__(
        self,
        agent: str,
        input_dim: int,
        hidden_dim: int,
        n_actions: int,
        discrete: bool,
        init_log_std: float = -0.5,
    ) -> None:
        super().__init__()
        self.agent = build("agent", agent, input_dim=input_dim, hidden_dim=hidden_dim, n_actions=n_actions)
        self.discrete = bool(discrete)
        self.recurrent = bool(self.agent.recurrent)
        if not self.discrete:
            self.log_std = Parameter(Tensor(np.full((n_actions,), init_log_std, np.float32)), name="log_std")

    def unroll(self, inputs_BTNI: ms.Tensor, need_grad: bool = True) -> ms.Tensor:
        return self.agent.unroll(inputs_BTNI, need_grad)


class ValueNet(nn.Cell):
    """``V``: Dense -> ReLU -> Dense -> ReLU -> Dense(1), applied row-wise with 2-D matmuls."""

    def __init__(self, input_dim: int, hidden_dim: int) -> None:
        super().__init__()
        if input_dim <= 0 or hidden_dim <= 0:
            raise ValueError(
                f"ValueNet needs positive sizes, got input_dim={input_dim}, hidden_dim={hidden_dim}"
            )
        self.fc1 = Dense(input_dim, hidden_dim)
        self.fc2 = Dense(hidden_dim, hidden_dim)
        self.fc3 = Dense(hidden_dim, 1)
        self.relu = nn.ReLU()

    def construct(self, x_BTNC: ms.Tensor) -> ms.Tensor:
        b, t, n, c = x_BTNC.shape
        h = self.relu(self.fc2(self.relu(self.fc1(x_BTNC.reshape(b * t * n, c)))))
        return self.fc3(h).reshape(b, t, n)


class CentralValueNet(ValueNet):
    """MAPPO's centralised ``V(s, agent id)`` from the state ``(B, T, S)``: :class:`ValueNet` (the same
    parameters) on each agent's row ``[state; one-hot id]``, without building the rows. The first layer's
    state part runs once per slot and its id part is a per-agent bias, so neither the ``N`` copies of the
    state nor ``N`` times the first layer's work are needed (the same sums up to float rounding). Without
    ids, ``V(s)`` is the same for every agent."""

    def __init__(self, state_dim: int, n_agents: int, agent_id: bool, hidden_dim: int) -> None:
        super().__init__(state_dim + (n_agents if agent_id else 0), hidden_dim)
        self.state_dim, self.n_agents, self.agent_id = state_dim, n_agents, bool(agent_id)

    def construct(self, state_BTS: ms.Tensor) -> ms.Tensor:
        b, t, s = state_BTS.shape
        w = self.fc1.weight  # (hidden, state_dim [+ n_agents])
        h_RH = ops.matmul(state_BTS.reshape(b * t, s), w[:, :s].T) + self.fc1.bias  # R = B * T rows
        h_RMH = h_RH[:, None, :] + w[:, s:].T[None] if self.agent_id else h_RH[:, None, :]  # M: n or 1
        m = h_RMH.shape[1]
        h = self.relu(self.fc2(self.relu(h_RMH.reshape(b * t * m, -1))))
        v_BTM = self.fc3(h).reshape(b, t, m)
        return v_BTM if self.agent_id else ops.broadcast_to(v_BTM, (b, t, self.n_agents))


class ActorCritic(nn.Cell):
    """Actor and critic under one parent Cell (unique parameter names ``actor.*`` / ``critic.*``)."""

    def __init__(self, actor: PolicyNet, critic: ValueNet) -> None:
        super().__init__()
        self.actor, self.critic = actor, critic


def categorical_logp_entropy(
    logits_BTNA: ms.Tensor, avail_BTNA: ms.Tensor, actions_BTN1: ms.Tensor
) -> tuple[ms.Tensor, ms.Tensor]:
    """Log-probability of the taken actions and entropy ``(B, T, N)`` of the masked categorical."""
    masked = ops.masked_fill(logits_BTNA, avail_BTNA == 0, MASKED_LOGIT)
    logp_all = ops.log_softmax(masked, -1)
    logp = ops.gather_elements(logp_all, 3, actions_BTN1).squeeze(3)
    entropy = -(ops.exp(logp_all) * logp_all).sum(-1)
    return logp, entropy


def floored_categorical(logits_BTNA: ms.Tensor, avail_BTNA: ms.Tensor, epsilon: ms.Tensor) -> ms.Tensor:
    """pymarl's COMA policy ``(1 - eps) softmax + eps / |available|`` ``(B, T, N, A)`` (the acting
    distribution of :func:`~marl.controllers.policy_controller.floored_policy`); ``epsilon`` is a scalar
    tensor (0 gives the plain masked categorical)."""
    avail = avail_BTNA.astype(logits_BTNA.dtype)
    p = ops.softmax(ops.masked_fill(logits_BTNA, avail_BTNA == 0, MASKED_LOGIT), -1)
    uniform = avail / ops.maximum(avail.sum(-1, keepdims=True), 1.0)  # all-masked padding slots: zeros
    return (1.0 - epsilon) * p + epsilon * uniform


def floored_categorical_logp_entropy(
    logits_BTNA: ms.Tensor, avail_BTNA: ms.Tensor, actions_BTN1: ms.Tensor, epsilon: ms.Tensor
) -> tuple[ms.Tensor, ms.Tensor]:
    """:func:`categorical_logp_entropy` of :func:`floored_categorical`."""
    p = floored_categorical(logits_BTNA, avail_BTNA, epsilon)
    logp_all = ops.log(ops.maximum(p, 1e-30))
    logp = ops.gather_elements(logp_all, 3, actions_BTN1).squeeze(3)
    entropy = -(p * logp_all).sum(-1)
    return logp, entropy


def gaussian_logp_entropy(
    mean_BTNA: ms.Tensor, log_std_A: ms.Tensor, actions_BTNA: ms.Tensor
) -> tuple[ms.Tensor, ms.Tensor]:
    """Log-density of the taken actions and entropy ``(B, T, N)`` of a diagonal Gaussian."""
    z = (actions_BTNA - mean_BTNA) * ops.exp(-log_std_A)
    logp = (-0.5 * z * z - log_std_A - 0.5 * math.log(2.0 * math.pi)).sum(-1)
    entropy = (log_std_A + 0.5 * math.log(2.0 * math.pi * math.e)).sum() * ops.ones_like(logp)
    return logp, entropy
