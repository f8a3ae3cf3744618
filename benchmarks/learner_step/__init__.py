"""Learner-step suite: one QMIX update timed against PyTorch and JAX peers on the same batch."""
