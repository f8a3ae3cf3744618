"""Fidelity suite: the embedded engine beside published figures, the game's unit data and recorded
episodes."""
