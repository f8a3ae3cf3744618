"""QTRAN-base's joint action-value network ``Q_jt`` and state-value network ``V_jt``.

Son et al. 2019, "QTRAN: Learning to Factorize with Transformation for Cooperative Multi-Agent Reinforcement
Learning" (ICML). ``Q_jt(tau, u)`` sees every agent's action-observation history through its GRU hidden state
``h_i``: each ``[h_i, onehot(u_i)]`` is encoded by a shared two-layer network, the encodings are summed over
agents (order-invariant), concatenated with the state and mapped to one value. ``V_jt(s)`` is a plain MLP of
the state. Sizes follow pymarl's ``qtran_paper`` architecture with ``network_size: small`` (two hidden ReLU
layers of ``embed_dim``; the action encoder keeps its input width).
"""

from __future__ import annotations

from marl.modules.dense import Dense
from marl.utils.ms import ms, nn, ops


class QTranJoint(nn.Cell):
    """``(state_BTS, h_BTNH, actions_BTNA) -> (q_jt_BT1, v_jt_BT1)``; see the module docstring."""

    def __init__(
        self, n_agents: int, n_actions: int, state_dim: int, hidden_dim: int, embed_dim: int = 64
    ) -> None:
        super().__init__()
        sizes = {
            "n_agents": n_agents,
            "n_actions": n_actions,
            "state_dim": state_dim,
            "hidden_dim": hidden_dim,
            "embed_dim": embed_dim,
        }
        for name, v in sizes.items():
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"QTranJoint {name} must be a positive int, got {v!r}")
        self.n_agents, self.n_actions, self.state_dim, self.hidden_dim = (
            n_agents,
            n_actions,
            state_dim,
            hidden_dim,
        )
        ae, e = hidden_dim + n_actions, embed_dim
        self.action_encoding = nn.SequentialCell(Dense(ae, ae), nn.ReLU(), Dense(ae, ae))
        self.Q = nn.SequentialCell(Dense(state_dim + ae, e), nn.ReLU(), Dense(e, e), nn.ReLU(), Dense(e, 1))
        self.V = nn.SequentialCell(Dense(state_dim, e), nn.ReLU(), Dense(e, e), nn.ReLU(), Dense(e, 1))

    def construct(
        self, state_BTS: ms.Tensor, h_BTNH: ms.Tensor, actions_BTNA: ms.Tensor
    ) -> tuple[ms.Tensor, ms.Tensor]:
        b, t, n, hd = h_BTNH.shape
        ha = ops.concat([h_BTNH, actions_BTNA], 3).reshape(b * t * n, hd + self.n_actions)
        enc_BTE = self.action_encoding(ha).reshape(b * t, n, hd + self.n_actions).sum(axis=1)
        s = state_BTS.reshape(b * t, self.state_dim)
        q = self.Q(ops.concat([s, enc_BTE], 1)).reshape(b, t, 1)
        return q, self.V(s).reshape(b, t, 1)
