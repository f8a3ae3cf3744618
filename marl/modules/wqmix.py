"""The unrestricted central mixer of Weighted QMIX.

Rashid et al. 2020, "Weighted QMIX: Expanding Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning" (NeurIPS): the central ``Q*`` mixes per-agent utilities and the state with a plain
feed-forward network (no monotonicity constraint), ``Q*(s, u) = f([s, q_1, ..., q_N]) + V(s)``. The sizes
follow the authors' SMAC setting (oxwhirl/wqmix ``cw_qmix.yaml``: ``central_mixing_embed_dim: 256``, three
hidden ReLU layers, a state-value head instead of a last bias).
"""

from __future__ import annotations

from marl.modules.dense import Dense
from marl.utils.ms import ms, nn, ops


class CentralFFMixer(nn.Cell):
    """``Q* = MLP([state, q_1..q_N]) + V(state)``, called as a mixer: ``(q_BTN, state_BTS) -> (B,T,1)``."""

    uses_actions = False

    def __init__(self, n_agents: int, state_dim: int, embed_dim: int = 256) -> None:
        super().__init__()
        for name, v in (("n_agents", n_agents), ("state_dim", state_dim), ("embed_dim", embed_dim)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"CentralFFMixer {name} must be a positive int, got {v!r}")
        self.n_agents, self.state_dim = n_agents, state_dim
        e = embed_dim
        self.net = nn.SequentialCell(
            Dense(state_dim + n_agents, e),
            nn.ReLU(),
            Dense(e, e),
            nn.ReLU(),
            Dense(e, e),
            nn.ReLU(),
            Dense(e, 1),
        )
        self.V = nn.SequentialCell(Dense(state_dim, e), nn.ReLU(), Dense(e, 1))

    def construct(self, q_BTN: ms.Tensor, state_BTS: ms.Tensor) -> ms.Tensor:
        b, t, n = q_BTN.shape
        s = state_BTS.reshape(b * t, self.state_dim)
        x = ops.concat([s, q_BTN.reshape(b * t, n)], 1)
        return (self.net(x) + self.V(s)).reshape(b, t, 1)
