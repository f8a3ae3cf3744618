"""marl: multi-agent reinforcement learning on MindSpore (SMAC, MPE, Gymnasium)."""

__version__ = "0.2.0"
