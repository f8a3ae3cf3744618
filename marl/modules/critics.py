"""Centralised action-value critics (MADDPG's and COMA's).

:class:`MADDPGCritic` is the critic of MADDPG (Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed
Cooperative-Competitive Environments"): ``Q_i(s, a_1, ..., a_n)`` for agent ``i`` from the global state and
the joint action. One network is shared by all agents; the agent id one-hot tells which ``Q_i`` is asked
(with one agent it is DDPG's critic ``Q(s, a)``, Lillicrap et al. 2016).
"""

from __future__ import annotations

from marl.modules.dense import Dense
from marl.registry import register
from marl.utils.ms import ms, nn, ops


@register("critic", "maddpg")
class MADDPGCritic(nn.Cell):
    """``[state, joint action, agent id] -> Dense -> ReLU -> Dense -> ReLU -> Dense(1)``.

    ``action_dim`` is the per-agent action width: the one-hot size for discrete actions, the action
    dimension for continuous ones. Inputs are 2-D ``(M, ...)`` rows (flatten batch x agent first).
    """

    def __init__(self, state_dim: int, n_agents: int, action_dim: int, hidden_dim: int) -> None:
        super().__init__()
        for name, v in (
            ("state_dim", state_dim),
            ("n_agents", n_agents),
            ("action_dim", action_dim),
            ("hidden_dim", hidden_dim),
        ):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"MADDPGCritic: {name} must be a positive int, got {v!r}")
        self.state_dim, self.n_agents, self.action_dim = state_dim, n_agents, action_dim
        self.input_dim = state_dim + n_agents * action_dim + (n_agents if n_agents > 1 else 0)
        self.fc1 = Dense(self.input_dim, hidden_dim)
        self.fc2 = Dense(hidden_dim, hidden_dim)
        self.fc3 = Dense(hidden_dim, 1)
        self.relu = nn.ReLU()

    def construct(self, state_MS: ms.Tensor, joint_action_MJ: ms.Tensor, agent_id_MN: ms.Tensor) -> ms.Tensor:
        """``Q`` values ``(M, 1)``; ``joint_action_MJ`` is ``(M, n_agents * action_dim)``, ``agent_id_MN``
        the agent one-hot (ignored with a single agent)."""
        if self.n_agents > 1:
            x = ops.concat([state_MS, joint_action_MJ, agent_id_MN], 1)
        else:
            x = ops.concat([state_MS, joint_action_MJ], 1)
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


@register("critic", "coma")
class COMACritic(nn.Cell):
    """COMA's counterfactual critic (Foerster et al. 2018, "Counterfactual Multi-Agent Policy Gradients",
    AAAI): ``Q_a(s, u_-a, .)``, one value per action of agent ``a`` given the other agents' actions, so that
    the counterfactual baseline ``sum_u' pi_a(u') Q_a(s, u_-a, u')`` costs one forward pass.

    ``[input row] -> Dense -> ReLU -> Dense -> ReLU -> Dense(n_actions)`` on ``(B, T, N, C)`` rows; the
    row (:func:`marl.learners.coma_learner.coma_critic_inputs`) holds the state, the agent's observation, the
    joint action with the agent's own action zeroed, the previous joint action and the agent id (pymarl's COMA
    critic inputs; its width is 128).
    """

    def __init__(self, input_dim: int, hidden_dim: int, n_actions: int) -> None:
        super().__init__()
        for name, v in (("input_dim", input_dim), ("hidden_dim", hidden_dim), ("n_actions", n_actions)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"COMACritic: {name} must be a positive int, got {v!r}")
        self.input_dim, self.n_actions = input_dim, n_actions
        self.fc1 = Dense(input_dim, hidden_dim)
        self.fc2 = Dense(hidden_dim, hidden_dim)
        self.fc3 = Dense(hidden_dim, n_actions)
        self.relu = nn.ReLU()

    def construct(self, x_BTNC: ms.Tensor) -> ms.Tensor:
        b, t, n, c = x_BTNC.shape
        h = self.relu(self.fc2(self.relu(self.fc1(x_BTNC.reshape(b * t * n, c)))))
        return self.fc3(h).reshape(b, t, n, self.n_actions)
