"""MindSpore ``nn.Cell`` building blocks: agents and mixers (sized explicitly, never from a config)."""

from marl.modules.agents import MLPAgent, RNNAgent
from marl.modules.critics import MADDPGCritic
from marl.modules.dueling import DuelingMLPAgent, DuelingRNNAgent
from marl.modules.mixers import QMixer, VDNMixer

__all__ = ["DuelingMLPAgent", "DuelingRNNAgent", "MADDPGCritic", "MLPAgent", "QMixer", "RNNAgent", "VDNMixer"]
