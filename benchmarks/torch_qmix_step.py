"""The PyTorch contenders of ``benchmarks/learner_step.py``: pymarl2's QMIX learner step, eager or compiled.

Same maths as marl's ``QLearner`` at its defaults (RNN agent Dense -> GRUCell -> Dense, QMIX mixer with
two-layer hypernets, target nets, double Q, TD(lambda) targets, 0.5 * masked MSE, grad-norm clipping and
Adam), written the way pymarl writes it: a Python loop over time for the GRU and for the lambda-returns.

``compile=True`` wraps the loss (both unrolls, targets and the mixers; ``torch.compile`` traces the Python
loops, so its forward and backward graphs are unrolled over time) and the update (clipping + Adam) in
``torch.compile`` (default mode, inductor); ``loss.backward()`` between them runs the compiled backward.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from marl.config.schema import Config
from marl.envs.base import EnvInfo


def torch_peer(
    info: EnvInfo, cfg: Config, weights: dict[str, np.ndarray], compile: bool = False
) -> Callable[..., float]:
    """An equivalent PyTorch QMIX learner step (pymarl2 style) initialised with ``weights`` (named as
    :func:`marl.utils.ms.params_to_numpy` names ``QLearner.nets``). The returned
    ``step(inputs, avail, actions, reward, term, mask, state) -> loss`` updates its own copy of the nets."""
    import torch
    from torch import nn

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
            for i in range(t):
                h = self.rnn(torch.relu(self.fc1(x[:, i].reshape(b * n, -1))), h)
                out.append(self.fc2(h).view(b, n, a))
            return torch.stack(out, 1)

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
            q_det = q.clone().detach()
            q_det[avail == 0] = -9999999.0
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

    if compile:
        loss_fn, apply = torch.compile(loss_fn), torch.compile(apply)

    def step(*batch: torch.Tensor) -> float:
        loss = loss_fn(*batch)
        opt.zero_grad()
        loss.backward()
        apply()
        return float(loss.item())

    return step
