"""Multi-agent controller (agent inputs, hidden state, masked epsilon-greedy) and NumPy actors."""

from marl.controllers.mac import MultiAgentController, build_agent_inputs, input_dim
from marl.controllers.numpy_actor import NumpyMLPAgent, NumpyRNNAgent, numpy_agent

__all__ = [
    "MultiAgentController",
    "NumpyMLPAgent",
    "NumpyRNNAgent",
    "build_agent_inputs",
    "input_dim",
    "numpy_agent",
]
