"""NumPy copies of the agent networks for acting.

One forward step for a handful of rows costs ~35-55 us in NumPy against ~400-700 us for a jitted
MindSpore call on CPU (measured), so rollouts act with these and the learner copies its weights over
(``QLearner.actor_weights()`` -> ``MultiAgentController.load_weights``). The maths mirrors
``marl.modules.agents`` exactly (torch/MindSpore GRU gate order r, z, n).
"""

from __future__ import annotations

import numpy as np

_RNN_KEYS = (
    "fc1.weight",
    "fc1.bias",
    "rnn.weight_ih",
    "rnn.weight_hh",
    "rnn.bias_ih",
    "rnn.bias_hh",
    "fc2.weight",
    "fc2.bias",
)
_MLP_KEYS = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _take(weights: dict[str, np.ndarray], keys: tuple[str, ...], kind: str) -> dict[str, np.ndarray]:
    missing = [k for k in keys if k not in weights]
    if missing:
        raise KeyError(f"{kind} actor weights lack {missing}; got keys {sorted(weights)}")
    # Transposed, contiguous float32 copies so every step is a plain x @ W.
    return {k: np.ascontiguousarray(np.asarray(weights[k], dtype=np.float32).T) for k in keys}


class NumpyRNNAgent:
    """NumPy twin of :class:`marl.modules.agents.RNNAgent`."""

    recurrent = True

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.load(weights)

    def load(self, weights: dict[str, np.ndarray]) -> None:
        """Copy the weights (names as ``params_to_numpy(RNNAgent)`` gives them)."""
        w = _take(weights, _RNN_KEYS, "rnn")
        self.w1, self.b1 = w["fc1.weight"], w["fc1.bias"]
        self.w_ih, self.b_ih = w["rnn.weight_ih"], w["rnn.bias_ih"]
        self.w_hh, self.b_hh = w["rnn.weight_hh"], w["rnn.bias_hh"]
        self.w2, self.b2 = w["fc2.weight"], w["fc2.bias"]
        self.hidden_dim = self.w_hh.shape[0]

    def step(self, inputs_MI: np.ndarray, h_MH: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step for ``M`` rows: returns ``(q_MA, new h_MH)``."""
        x = np.maximum(inputs_MI @ self.w1 + self.b1, 0.0)
        gi = x @ self.w_ih + self.b_ih
        gh = h_MH @ self.w_hh + self.b_hh
        hd = self.hidden_dim
        r = _sigmoid(gi[:, :hd] + gh[:, :hd])
        z = _sigmoid(gi[:, hd : 2 * hd] + gh[:, hd : 2 * hd])
        cand = np.tanh(gi[:, 2 * hd :] + r * gh[:, 2 * hd :])
        h = cand + z * (h_MH - cand)
        return h @ self.w2 + self.b2, h


class NumpyMLPAgent:
    """NumPy twin of :class:`marl.modules.agents.MLPAgent` (``h`` passes through)."""

    recurrent = False

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.load(weights)

    def load(self, weights: dict[str, np.ndarray]) -> None:
        """Copy the weights (names as ``params_to_numpy(MLPAgent)`` gives them)."""
        w = _take(weights, _MLP_KEYS, "mlp")
        self.w1, self.b1 = w["fc1.weight"], w["fc1.bias"]
        self.w2, self.b2 = w["fc2.weight"], w["fc2.bias"]
        self.w3, self.b3 = w["fc3.weight"], w["fc3.bias"]
        self.hidden_dim = self.w1.shape[1]

    def step(self, inputs_MI: np.ndarray, h_MH: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step for ``M`` rows: returns ``(q_MA, h_MH)``."""
        x = np.maximum(inputs_MI @ self.w1 + self.b1, 0.0)
        x = np.maximum(x @ self.w2 + self.b2, 0.0)
        return x @ self.w3 + self.b3, h_MH


NUMPY_AGENTS = {"rnn": NumpyRNNAgent, "mlp": NumpyMLPAgent}


def numpy_agent(name: str, weights: dict[str, np.ndarray]) -> NumpyRNNAgent | NumpyMLPAgent:
    """The NumPy actor for agent type ``name`` (``rnn`` or ``mlp``)."""
    if name not in NUMPY_AGENTS:
        raise KeyError(f"no NumPy actor for agent {name!r}; available: {sorted(NUMPY_AGENTS)}")
    return NUMPY_AGENTS[name](weights)
