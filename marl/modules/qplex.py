"""QPLEX's duplex dueling mixer (Wang et al. 2021, "QPLEX: Duplex Dueling Multi-Agent Q-Learning", ICLR).

Each agent's Q-value is split into a value ``V_i = max_a Q_i`` and an advantage ``A_i = Q_i - V_i <= 0``.
A state-conditioned positive affine transform gives ``Q'_i = w_i(s) Q_i + b_i(s)`` (``w_i > 0``) and
``V'_i = w_i(s) V_i + b_i(s)``; the joint value is ``Q_tot = sum_i V'_i + sum_i lambda_i(s, a) (Q'_i - V'_i)``
with importance weights ``lambda_i(s, a) > 0`` from a multi-head attention over the state and the joint
action. As ``w_i, lambda_i > 0`` and ``Q'_i - V'_i = w_i A_i <= 0``, ``Q_tot`` is largest exactly when
every agent takes its own greedy action: the IGM principle (individual-global-max) holds for every
state, while ``Q_tot`` is not constrained to be monotonic in the ``Q_i`` of non-greedy actions.

The mixer takes the chosen actions and the agents' max-Q (``uses_actions = True``), so the Q-learner calls
it as ``mixer(q_BTN, state_BTS, actions_BTNA, max_q_BTN)`` (:func:`marl.learners.targets.mix`).
"""

from __future__ import annotations

from marl.modules.dense import Dense
from marl.registry import register
from marl.utils.ms import ms, nn, ops

# Keeps the transform weights and importance weights strictly positive (IGM needs lambda_i > 0).
_POSITIVE_EPS = 1e-10


def _net(in_dim: int, out_dim: int, layers: int, hidden: int) -> nn.Cell:
    """A one-layer (``Dense``) or two-layer (``Dense-ReLU-Dense``) state-conditioned network."""
    if layers == 1:
        return Dense(in_dim, out_dim)
    return nn.SequentialCell(Dense(in_dim, hidden), nn.ReLU(), Dense(hidden, out_dim))


@register("mixer", "qplex")
class QPLEXMixer(nn.Cell):
    """Duplex dueling mixer (Wang et al. 2021); see the module docstring for the formula.

    ``embed_dim`` sizes the hidden layer of the bias network ``b(s)``; ``hypernet_layers`` and
    ``hypernet_dim`` shape the transform-weight network ``w(s)`` and the attention's key and agent
    networks; ``n_heads`` is the number of attention heads ``K``:
    ``lambda_i(s, a) = sum_k |key_k(s)| * |agent_k(s)|_i * sigmoid(action_k(s, a))_i``.
    """

    uses_actions = True

    def __init__(
        self,
        n_agents: int,
        state_dim: int,
        n_actions: int,
        embed_dim: int = 32,
        hypernet_layers: int = 2,
        hypernet_dim: int = 64,
        n_heads: int = 4,
    ) -> None:
        super().__init__()
        for name, value in (
            ("n_agents", n_agents),
            ("state_dim", state_dim),
            ("n_actions", n_actions),
            ("embed_dim", embed_dim),
            ("hypernet_dim", hypernet_dim),
            ("n_heads", n_heads),
        ):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"QPLEXMixer {name} must be a positive int, got {value!r}")
        if hypernet_layers not in (1, 2):
            raise ValueError(f"QPLEXMixer hypernet_layers must be 1 or 2, got {hypernet_layers!r}")
        self.n_agents, self.state_dim, self.n_actions, self.n_heads = n_agents, state_dim, n_actions, n_heads
        self.hyper_w = _net(state_dim, n_agents, hypernet_layers, hypernet_dim)  # w_i(s), made > 0
        self.hyper_b = _net(state_dim, n_agents, 2, embed_dim)  # b_i(s)
        self.key = _net(state_dim, n_heads, hypernet_layers, hypernet_dim)  # per-head scale, made > 0
        self.agent_w = _net(state_dim, n_heads * n_agents, hypernet_layers, hypernet_dim)  # made > 0
        self.action_w = Dense(state_dim + n_agents * n_actions, n_heads * n_agents)  # through sigmoid

    def importance(self, state_MS: ms.Tensor, actions_MNA: ms.Tensor) -> ms.Tensor:
        """``lambda_i(s, a) > 0`` of shape ``(M, N)`` for ``M`` rows of state and one-hot joint action."""
        m, k, n = state_MS.shape[0], self.n_heads, self.n_agents
        key_MK1 = ops.abs(self.key(state_MS)).reshape(m, k, 1)
        agent_MKN = ops.abs(self.agent_w(state_MS)).reshape(m, k, n)
        sa_MX = ops.concat([state_MS, actions_MNA.reshape(m, n * self.n_actions)], axis=1)
        action_MKN = ops.sigmoid(self.action_w(sa_MX)).reshape(m, k, n)
        return (key_MK1 * agent_MKN * action_MKN).sum(axis=1) + _POSITIVE_EPS

    def construct(
        self, q_BTN: ms.Tensor, state_BTS: ms.Tensor, actions_BTNA: ms.Tensor, max_q_BTN: ms.Tensor
    ) -> ms.Tensor:
        b, t, n = q_BTN.shape
        m = b * t
        s_MS = state_BTS.reshape(m, self.state_dim)
        w_MN = ops.abs(self.hyper_w(s_MS)) + _POSITIVE_EPS
        b_MN = self.hyper_b(s_MS)
        q_MN = w_MN * q_BTN.reshape(m, n) + b_MN
        v_MN = w_MN * max_q_BTN.reshape(m, n) + b_MN
        lam_MN = self.importance(s_MS, actions_BTNA.reshape(m, n, self.n_actions))
        q_tot_M = v_MN.sum(axis=1) + (lam_MN * (q_MN - v_MN)).sum(axis=1)
        return q_tot_M.reshape(b, t, 1)
