"""Interop suite: EPyMARL and TorchRL training on this engine through its Gym and PettingZoo views."""
