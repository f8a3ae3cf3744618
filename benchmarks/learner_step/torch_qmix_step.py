"""The PyTorch contenders of ``learner_step.py``: pymarl2's QMIX learner step, eager or compiled.

Same maths as marl's ``QLearner`` at its defaults (RNN agent Dense -> GRUCell -> Dense, QMIX mixer with
two-layer hypernets, target nets, double Q, TD(lambda) targets, 0.5 * masked MSE, grad-norm clipping and
Adam), written the way pymarl writes it: a Python loop over time for the GRU and for the lambda-returns.

A layout (:func:`parse_torch_layout`) names how it runs: ``eager``, or ``torch.compile`` (inductor) in a
mode (``default``, ``reduce-overhead``, ``max-autotune-no-cudagraphs``), with or without ``fullgraph``
(``graph`` / ``breaks``), the GRU's input projection computed inside the time loop (``loop``, pymarl's
``GRUCell``) or for all steps before it (``hoist``), e.g. ``default-breaks-loop`` (the contender before
issue 49). Compiled, the loss (both unrolls, targets and the mixers; ``torch.compile`` traces the Python
loops, so its forward and backward graphs are unrolled over time) and the update (clipping + Adam) are
each one compiled function; ``loss.backward()`` between them runs the compiled backward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from marl.config.schema import Config
from marl.envs.base import EnvInfo

TORCH_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TorchLayout:
    """How the torch step runs: ``mode`` (``eager`` or a ``torch.compile`` mode), ``fullgraph`` and where
    the GRU's input projection is computed (``hoist``: before the time loop)."""

    mode: str = "eager"
    fullgraph: bool = False
    hoist: bool = False

    @property
    def name(self) -> str:
        gru = "hoist" if self.hoist else "loop"
        if self.mode == "eager":
            return f"eager-{gru}"
        return f"{self.mode}-{'graph' if self.fullgraph else 'breaks'}-{gru}"


def parse_torch_layout(name: str) -> TorchLayout:
    """``eager[-loop|-hoist]`` or ``<mode>[-graph|-breaks][-loop|-hoist]``; errors say what is allowed."""
    rest, out = name.strip(), {}
    for mode in ("eager", *TORCH_MODES):
        if rest == mode or rest.startswith(mode + "-"):
            out["mode"], rest = mode, rest[len(mode) + 1 :]
            break
    for tok in filter(None, rest.split("-")):
        key = {"graph": "fullgraph", "breaks": "fullgraph", "loop": "hoist", "hoist": "hoist"}.get(tok)
        if "mode" not in out or key is None or key in out or (key == "fullgraph" and out["mode"] == "eager"):
            raise ValueError(
                f"bad torch layout {name!r}; allowed: eager[-loop|-hoist] or "
                f"{'|'.join(TORCH_MODES)}[-graph|-breaks][-loop|-hoist]"
            )
        out[key] = tok in ("graph", "hoist")
    if "mode" not in out:
        raise ValueError(
            f"bad torch layout {name!r}; it starts with eager or one of {', '.join(TORCH_MODES)}"
        )
    return TorchLayout(**out)


def torch_peer(
    info: EnvInfo,
    cfg: Config,
    weights: dict[str, np.ndarray],
    layout: str | bool = "eager",
    backend: str = "inductor",
) -> Callable[..., float]:
    """An equivalent PyTorch QMIX learner step (pymarl2 style) initialised with ``weights`` (named as
    :func:`marl.utils.ms.params_to_numpy` names ``QLearner.nets``), run as ``layout`` (a name for
    :func:`parse_torch_layout`; ``True``: ``default-breaks-loop``, ``False``: ``eager-loop``). The returned
    ``step(inputs, avail, actions, reward, term, mask, state) -> loss`` updates its own copy of the nets;
    ``step.save()`` / ``step.restore()`` keep and put back the weights and optimizer state. ``backend``:
    ``torch.compile``'s (tests use ``aot_eager``: the same tracing without inductor's minutes of codegen)."""
    import torch
    from torch import nn

    if isinstance(layout, bool):
        layout = "default-breaks-loop" if layout else "eager-loop"
    lay = parse_torch_layout(layout)

    n, a, hd, e = info.n_agents, info.n_actions, cfg.agent.hidden_dim, cfg.mixer.embed_dim
    s, hyp, in_dim = info.state_shape, cfg.mixer.hypernet_dim, weights["agent.fc1.weight"].shape[1]

    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.rnn, self.fc2 = nn.Linear(in_dim, hd), nn.GRUCell(hd, hd), nn.Linear(hd, a)

        def unroll(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, N, I) -> (B, T, N, A), pymarl loop
            b, t = x.shape[:2]
            h = x.new_zeros(b * n, hd)
            out = []
            if not lay.hoist:
                for i in range(t):
                    h = self.rnn(torch.relu(self.fc1(x[:, i].reshape(b * n, -1))), h)
                    out.append(self.fc2(h).view(b, n, a))
                return torch.stack(out, 1)
            emb = torch.relu(self.fc1(x.transpose(0, 1).reshape(t, b * n, -1)))
            gi_all = nn.functional.linear(emb, self.rnn.weight_ih, self.rnn.bias_ih)  # (T, M, 3H)
            for i in range(t):
                gi, gh = gi_all[i], nn.functional.linear(h, self.rnn.weight_hh, self.rnn.bias_hh)
                r = torch.sigmoid(gi[:, :hd] + gh[:, :hd])
                z = torch.sigmoid(gi[:, hd : 2 * hd] + gh[:, hd : 2 * hd])
                h = (1 - z) * torch.tanh(gi[:, 2 * hd :] + r * gh[:, 2 * hd :]) + z * h
                out.append(h)
            return self.fc2(torch.stack(out, 0)).view(t, b, n, a).transpose(0, 1)

    class Mixer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hyper_w_1 = nn.Sequential(nn.Linear(s, hyp), nn.ReLU(), nn.Linear(hyp, e * n))
            self.hyper_w_final = nn.Sequential(nn.Linear(s, hyp), nn.ReLU(), nn.Linear(hyp, e))
            self.hyper_b_1 = nn.Linear(s, e)
            self.V = nn.Sequential(nn.Linear(s, e), nn.ReLU(), nn.Linear(e, 1))

        def forward(self, q: torch.Tensor, st: torch.Tensor) -> torch.Tensor:
            b = q.size(0)
            st = st.reshape(-1, s)
            q = q.reshape(-1, 1, n)
            w1 = torch.abs(self.hyper_w_1(st)).view(-1, n, e)
            hidden = torch.nn.functional.elu(torch.bmm(q, w1) + self.hyper_b_1(st).view(-1, 1, e))
            w_final = torch.abs(self.hyper_w_final(st)).view(-1, e, 1)
            return (torch.bmm(hidden, w_final) + self.V(st).view(-1, 1, 1)).view(b, -1, 1)

    class Nets(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.agent, self.target_agent, self.mixer, self.target_mixer = Agent(), Agent(), Mixer(), Mixer()

    nets = Nets()
    nets.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
    params = list(nets.agent.parameters()) + list(nets.mixer.parameters())
    opt = torch.optim.Adam(params, lr=cfg.learner.lr)
    gamma, lam, clip = cfg.learner.gamma, cfg.learner.td_lambda, cfg.learner.grad_norm_clip

    def loss_fn(inputs, avail, actions, reward, term, mask, state) -> torch.Tensor:  # noqa: ANN001
        q = nets.agent.unroll(inputs)
        chosen = torch.gather(q[:, :-1], 3, actions).squeeze(3)
        with torch.no_grad():
            tq = nets.target_agent.unroll(inputs)
            q_det = torch.where(avail == 0, -9999999.0, q.detach())
            best = q_det.max(dim=3, keepdim=True)[1]
            tmax = nets.target_mixer(torch.gather(tq, 3, best).squeeze(3), state)
            ret = torch.zeros_like(tmax)
            ret[:, -1] = tmax[:, -1] * (1 - term.sum(dim=1))
            for t in range(ret.shape[1] - 2, -1, -1):
                ret[:, t] = lam * gamma * ret[:, t + 1] + mask[:, t] * (
                    reward[:, t] + (1 - lam) * gamma * tmax[:, t + 1] * (1 - term[:, t])
                )
            targets = ret[:, :-1]
        chosen = nets.mixer(chosen, state[:, :-1])
        td = (chosen - targets) * mask
        return 0.5 * (td**2).sum() / mask.sum()

    def apply() -> None:
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()

    if lay.mode != "eager":
        mode = None if lay.mode == "default" else lay.mode
        opts = {"mode": mode} if backend == "inductor" else {}
        loss_fn = torch.compile(loss_fn, fullgraph=lay.fullgraph, backend=backend, **opts)
        apply = torch.compile(apply, backend=backend, **opts)

    def step(*batch: torch.Tensor) -> float:
        loss = loss_fn(*batch)
        opt.zero_grad()
        loss.backward()
        apply()
        return float(loss.item())

    saved: list[torch.Tensor] = []

    def tensors() -> list[torch.Tensor]:  # every parameter and optimizer state tensor, in a fixed order
        st = [v for p in params for v in opt.state[p].values() if isinstance(v, torch.Tensor)]
        return [*nets.parameters(), *st]

    def save() -> None:
        """Keeps a copy of the weights and optimizer state for :func:`restore`."""
        saved[:] = [t.detach().clone() for t in tensors()]

    def restore() -> None:
        """Weights and optimizer state back to :func:`save`'s copy, in place (compiled code stays)."""
        with torch.no_grad():
            for t, v in zip(tensors(), saved, strict=True):
                t.copy_(v)

    step.save, step.restore = save, restore
    return step
