"""Agent networks shared by all agents of a team (parameter sharing, as in pymarl).

Both agents expose the same interface:

* ``construct(inputs_MI, h_MH) -> (q_MA, h_MH)``: one step for ``M`` rows (env x agent);
* ``unroll(inputs_BTNI, need_grad=True) -> q_BTNA``: a whole padded episode batch, used by the learner.
  ``T`` must be static. The RNN runs the recurrence over all ``T`` steps in one compiled kernel forward
  and one backward (:mod:`marl.modules.gru_kernel`) where the kernels build, else in the readable
  reference with its hand-written BPTT (:mod:`marl.modules.gru_bptt`, unrolled when the graph is
  compiled). Pass ``need_grad=False`` where no gradient is taken (target networks): nothing is saved for
  the backward pass.
* ``hidden_dim`` and ``recurrent``.

The unroll keeps every matmul 2-D (``(B*T*N, F) @ W.T``): a 4-D @ 2-D matmul becomes a broadcast
BatchMatMul on CPU whose weight gradient was measured ~3x slower.
"""

from __future__ import annotations

from marl.modules.dense import Dense
from marl.modules.gru_kernel import gru_proj_cells
from marl.registry import register
from marl.utils.ms import ms, nn, ops


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


@register("agent", "rnn")
class RNNAgent(nn.Cell):
    """Dense -> ReLU -> GRUCell -> Dense (the DRQN agent of pymarl; Hausknecht & Stone 2015).

    GRU gate order and parameter names follow ``torch.nn.GRUCell`` (r, z, n; ``weight_ih`` etc.).
    """

    recurrent = True

    def __init__(self, input_dim: int, hidden_dim: int, n_actions: int, use_kernels: bool = True) -> None:
        super().__init__()
        _check_sizes(input_dim=input_dim, hidden_dim=hidden_dim, n_actions=n_actions)
        self.input_dim, self.hidden_dim, self.n_actions = input_dim, hidden_dim, n_actions
        self.fc1 = Dense(input_dim, hidden_dim)
        self.rnn = nn.GRUCell(hidden_dim, hidden_dim)
        self.fc2 = Dense(hidden_dim, n_actions)
        self.relu = nn.ReLU()
        self.matmul_t = ops.MatMul(transpose_b=True)
        # the recurrence over a sequence, input projection included: compiled kernels where they build, else
        # the MindSpore reference (marl.modules.gru_kernel.gru_proj_cells)
        self.sequence, self.forward_only = gru_proj_cells(use_kernels)

    def construct(self, inputs_MI: ms.Tensor, h_MH: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
        x = self.relu(self.fc1(inputs_MI))
        h = self.rnn(x, h_MH)
        return self.fc2(h), h

    def unroll(self, inputs_BTNI: ms.Tensor, need_grad: bool = True) -> ms.Tensor:
        """Q-values for every slot of a padded batch, hidden state starting at zero."""
        b, _, n, _ = inputs_BTNI.shape
        h0_MH = ops.zeros((b * n, self.hidden_dim), ms.float32)
        return self.unroll_from(inputs_BTNI, h0_MH, need_grad)[0]

    def unroll_from(
        self, inputs_BTNI: ms.Tensor, h0_MH: ms.Tensor, need_grad: bool = True
    ) -> tuple[ms.Tensor, ms.Tensor]:
        """Q-values ``(B, T, N, A)`` from hidden state ``h0_MH`` (``M = B*N`` rows, batch-major) and the
        hidden state after the last slot (chunked BPTT carries it from one chunk to the next).

        ``need_grad=False`` (target networks, no-grad passes) skips saving what the backward pass needs
        (:mod:`marl.modules.gru_kernel`, or its readable reference ``GRUProjSequenceReference``)."""
        b, t, n, _ = inputs_BTNI.shape
        h_TMH = self.hiddens(inputs_BTNI, h0_MH, need_grad)
        # Output layer on all steps at once; transpose the small (T, B, N, A) result, not the hiddens.
        q = self.fc2(h_TMH.reshape(t * b * n, self.hidden_dim))
        return q.reshape(t, b, n, self.n_actions).transpose(1, 0, 2, 3), h_TMH[t - 1]

    def unroll_hidden(self, inputs_BTNI: ms.Tensor, need_grad: bool = True) -> tuple[ms.Tensor, ms.Tensor]:
        """Q-values ``(B, T, N, A)`` and the GRU hidden state after every slot ``(B, T, N, H)`` (QTRAN's joint
        network reads the agents' hidden states), hidden state starting at zero."""
        b, t, n, _ = inputs_BTNI.shape
        h_TMH = self.hiddens(inputs_BTNI, ops.zeros((b * n, self.hidden_dim), ms.float32), need_grad)
        q = self.fc2(h_TMH.reshape(t * b * n, self.hidden_dim))
        q_BTNA = q.reshape(t, b, n, self.n_actions).transpose(1, 0, 2, 3)
        return q_BTNA, h_TMH.reshape(t, b, n, self.hidden_dim).transpose(1, 0, 2, 3)

    def unroll_rows(self, inputs_RI: ms.Tensor, b: int, t: int, n: int, need_grad: bool = True) -> ms.Tensor:
        """:meth:`unroll` of inputs given as time-major rows ``(T*B*N, I)``: the recurrence's own layout, so
        the graph transposes neither the inputs nor fc1's product (forward and backward), and a graph's
        reshape of its own 4-D input to rows, a copy on MindSpore's CPU backend (27m_vs_30m: 218 MB, ~20 ms a
        step), is not needed either. The learner writes its host arrays in this layout (``q_step_arrays``)."""
        h0_MH = ops.zeros((b * n, self.hidden_dim), ms.float32)
        h_TMH = self._recur(self.matmul_t(inputs_RI, self.fc1.weight), h0_MH, need_grad)
        q = self.fc2(h_TMH.reshape(t * b * n, self.hidden_dim))
        return q.reshape(t, b, n, self.n_actions).transpose(1, 0, 2, 3)

    def _fc1_rows(self, inputs_RI: ms.Tensor, b: int, t: int, n: int) -> ms.Tensor:
        """fc1's product (no bias) of batch-major rows, transposed to time-major rows ``(T*B*N, H)``."""
        z = self.matmul_t(inputs_RI, self.fc1.weight)
        return z.reshape(b, t, n, self.hidden_dim).transpose(1, 0, 2, 3).reshape(t * b * n, self.hidden_dim)

    def hiddens(self, inputs_BTNI: ms.Tensor, h0_MH: ms.Tensor, need_grad: bool = True) -> ms.Tensor:
        """The GRU hidden state after every slot, time-major ``(T, M, H)`` (``M = B*N``, batch-major rows)."""
        b, t, n, i = inputs_BTNI.shape
        # Time-major rows, so each step's slice is contiguous. fc1's bias and ReLU, the GRU's input projection
        # and its biases are computed inside the sequence cell, step by step (gru_proj_cells). The batch-major
        # -> time-major transpose (a copy, and another in the backward pass) is made on the narrower of the
        # inputs and fc1's product: row-wise layers commute with it (27m_vs_30m: 348 inputs, 64 outputs).
        if i <= self.hidden_dim:
            z = self.matmul_t(inputs_BTNI.transpose(1, 0, 2, 3).reshape(t * b * n, i), self.fc1.weight)
        else:
            z = self._fc1_rows(inputs_BTNI.reshape(b * t * n, i), b, t, n)
        return self._recur(z, h0_MH, need_grad)

    def _recur(self, z_RH: ms.Tensor, h0_MH: ms.Tensor, need_grad: bool) -> ms.Tensor:
        """fc1's bias and ReLU and the GRU over time-major rows ``z_RH`` (``R = T*M``) of fc1's product
        without its bias, from ``h0_MH``: hidden states ``(T, M, H)``."""
        rnn = self.rnn
        args = (z_RH, self.fc1.bias, h0_MH, rnn.weight_ih, rnn.weight_hh, rnn.bias_ih, rnn.bias_hh)
        return self.sequence(*args)[0] if need_grad else self.forward_only(*args)


@register("agent", "mlp")
class MLPAgent(nn.Cell):
    """Feed-forward agent: Dense -> ReLU -> Dense -> ReLU -> Dense (no memory; ``h`` passes through)."""

    recurrent = False

    def __init__(self, input_dim: int, hidden_dim: int, n_actions: int) -> None:
        super().__init__()
        _check_sizes(input_dim=input_dim, hidden_dim=hidden_dim, n_actions=n_actions)
        self.input_dim, self.hidden_dim, self.n_actions = input_dim, hidden_dim, n_actions
        self.fc1 = Dense(input_dim, hidden_dim)
        self.fc2 = Dense(hidden_dim, hidden_dim)
        self.fc3 = Dense(hidden_dim, n_actions)
        self.relu = nn.ReLU()

    def construct(self, inputs_MI: ms.Tensor, h_MH: ms.Tensor) -> tuple[ms.Tensor, ms.Tensor]:
        x = self.relu(self.fc2(self.relu(self.fc1(inputs_MI))))
        return self.fc3(x), h_MH

    def unroll(self, inputs_BTNI: ms.Tensor, need_grad: bool = True) -> ms.Tensor:
        """Q-values for every slot of a padded batch (all slots in one 2-D pass; ``need_grad`` is
        accepted for interface parity with :class:`RNNAgent`)."""
        b, t, n, i = inputs_BTNI.shape
        x = self.relu(self.fc2(self.relu(self.fc1(inputs_BTNI.reshape(b * t * n, i)))))
        return self.fc3(x).reshape(b, t, n, self.n_actions)
