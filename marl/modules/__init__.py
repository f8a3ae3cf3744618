"""MindSpore ``nn.Cell`` building blocks: agents and mixers (sized explicitly, never from a config)."""

from marl.modules.agents import MLPAgent, RNNAgent
from marl.modules.mixers import QMixer, VDNMixer

__all__ = ["MLPAgent", "QMixer", "RNNAgent", "VDNMixer"]
