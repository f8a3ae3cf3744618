"""marl: multi-agent reinforcement learning on MindSpore (SMAC, MPE, Gymnasium)."""

__version__ = "0.1.0"
