"""QMIX train-step benchmark at SMAC 3m sizes: marl (MindSpore) vs an equivalent PyTorch step, same run.

Both sides run the same maths on the same batch with the same initial weights (the MindSpore weights
are copied into torch and the first losses are compared): RNN agent (Dense 64 -> GRUCell -> Dense),
QMIX mixer (embed 32, two-layer hypernets of 64), target nets, double Q, TD(lambda) targets,
0.5 * masked MSE, grad-norm clipping at 10 and Adam -- the defaults of ``LearnerConfig``. Batch: 32
episodes x 61 slots, episode lengths 20-60. Steps alternate in blocks between the two frameworks so
both see the same machine load. Also measures acting latency of ``MultiAgentController``.

    .venv/bin/python benchmarks/learner_step.py [--steps 40] [--ms-threads 1] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.buffers.episode import EpisodeBatch, Scheme  # noqa: E402
from marl.config.schema import AgentConfig, Config, ExplorationConfig, LearnerConfig  # noqa: E402
from marl.controllers import MultiAgentController, build_agent_inputs  # noqa: E402
from marl.envs.base import EnvInfo  # noqa: E402
from marl.learners import QLearner  # noqa: E402
from marl.learners.targets import transition_mask  # noqa: E402
from marl.utils.ms import ms, params_to_numpy, setup  # noqa: E402

INFO_3M = EnvInfo(n_agents=3, n_actions=9, obs_shape=30, state_shape=48, episode_limit=60)


def synthetic_batch(info: EnvInfo, b: int, seed: int, max_len: int = 0) -> EpisodeBatch:
    """``b`` padded episodes of random length ``min(20, max_len)..max_len`` (default: the episode limit;
    the first episode is ``max_len`` long, shorter ones terminate)."""
    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(info), b)
    t_slots, n, a = info.episode_limit + 1, info.n_agents, info.n_actions
    max_len = max_len or info.episode_limit
    for row in range(b):
        ep_len = max_len if row == 0 else int(rng.integers(min(20, max_len), max_len + 1))
        d = eb.data
        d["obs"][row, : ep_len + 1] = rng.normal(size=(ep_len + 1, n, info.obs_shape))
        d["state"][row, : ep_len + 1] = rng.normal(size=(ep_len + 1, info.state_shape))
        avail = (rng.random((ep_len + 1, n, a)) < 0.7).astype(np.int32)
        avail[..., 0] = 1
        d["avail_actions"][row, : ep_len + 1] = avail
        scores = np.where(avail[:ep_len] > 0, rng.random((ep_len, n, a)), -1.0)
        act = scores.argmax(2)
        d["actions"][row, :ep_len, :, 0] = act
        d["actions_onehot"][row, :ep_len] = np.eye(a, dtype=np.float32)[act]
        d["reward"][row, :ep_len, 0] = rng.normal(size=ep_len)
        d["terminated"][row, ep_len - 1, 0] = float(ep_len < info.episode_limit)
        d["filled"][row, : ep_len + 1, 0] = 1.0
    assert t_slots == eb.max_seq_length
    return eb


# ------------------------------------------------------------------------------------ PyTorch peer
def torch_peer(info: EnvInfo, cfg: Config, weights: dict[str, np.ndarray]):  # noqa: ANN201
    """An equivalent PyTorch QMIX learner (pymarl2 style), initialised with ``weights``."""
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
    gamma, lam = cfg.learner.gamma, cfg.learner.td_lambda

    def step(inputs, avail, actions, reward, term, mask, state) -> float:  # noqa: ANN001
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
        loss = 0.5 * (td**2).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.learner.grad_norm_clip)
        opt.step()
        return float(loss.item())

    return step


def batch_arrays(batch: EpisodeBatch, cfg: Config) -> list[np.ndarray]:
    """The same NumPy arrays the MindSpore learner builds, for the torch step."""
    a = cfg.agent
    return [
        build_agent_inputs(batch["obs"], batch["actions_onehot"], a.obs_last_action, a.obs_agent_id),
        batch["avail_actions"].astype(np.int64),
        batch["actions"][:, :-1].astype(np.int64),
        batch["reward"][:, :-1],
        batch["terminated"][:, :-1],
        transition_mask(batch["filled"], batch["terminated"]),
        batch["state"],
    ]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def acting_latency(info: EnvInfo, learner: QLearner, envs: int, calls: int) -> float:
    """Median microseconds of ``select_actions`` (numpy obs -> numpy actions) for ``envs`` envs."""
    weights = learner.actor_weights()
    mac = MultiAgentController(info, AgentConfig(), ExplorationConfig(), seed=0, weights=weights)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(envs, info.n_agents, info.obs_shape)).astype(np.float32)
    avail = np.ones((envs, info.n_agents, info.n_actions), np.int32)
    mac.init_hidden(envs)
    times = []
    for i in range(calls + 200):
        t0 = time.perf_counter()
        mac.select_actions(obs, avail, t_env=50_000, test_mode=False)
        if i >= 200:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per framework")
    ap.add_argument("--block", type=int, default=5, help="steps per alternating block")
    ap.add_argument("--ms-threads", type=int, default=1)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--acting-calls", type=int, default=2000)
    ap.add_argument("--note", default="", help="a line about the conditions (e.g. a shared machine)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "learner_step.md"))
    args = ap.parse_args()

    setup(args.ms_threads, seed=0)
    info = INFO_3M
    cfg = Config(learner=LearnerConfig(batch_size=32, use_jit=True))
    batches = [synthetic_batch(info, 32, seed) for seed in range(4)]
    learner = QLearner(info, cfg)
    weights = params_to_numpy(learner.nets)

    t0 = time.perf_counter()
    ms_first = learner.train(batches[0], 0, 0)["loss"]
    first_call = time.perf_counter() - t0

    torch_rows = "torch not installed"
    torch_times: list[float] = []
    try:
        import torch

        torch.set_num_threads(args.torch_threads)
        torch_step = torch_peer(info, cfg, weights)
        tb = [[torch.from_numpy(np.ascontiguousarray(x)) for x in batch_arrays(b, cfg)] for b in batches]
        torch_first = torch_step(*tb[0])
        torch_rows = f"torch {torch.__version__}"
    except ImportError:
        torch_step, torch_first = None, float("nan")
    print(f"first loss: MindSpore {ms_first:.7f}  torch {torch_first:.7f}  (same weights, same batch)")

    ms_times: list[float] = []
    for i in range(3):  # warm-up
        learner.train(batches[i % 4], 0, 0)
        if torch_step is not None:
            torch_step(*tb[i % 4])
    done = 0
    while done < args.steps:
        for _ in range(args.block):
            t0 = time.perf_counter()
            learner.train(batches[done % 4], 0, 0)
            ms_times.append(time.perf_counter() - t0)
        if torch_step is not None:
            for _ in range(args.block):
                t0 = time.perf_counter()
                torch_step(*tb[done % 4])
                torch_times.append(time.perf_counter() - t0)
        done += args.block
    ms_med = statistics.median(ms_times) * 1e3
    steady = ms_med / 1e3
    compile_s = first_call - steady
    lines = [
        f"MindSpore ms/step: median {ms_med:.1f}  p10 {pct(ms_times, 10) * 1e3:.1f}  "
        f"p90 {pct(ms_times, 90) * 1e3:.1f}",
    ]
    if torch_times:
        th_med = statistics.median(torch_times) * 1e3
        lines.append(
            f"PyTorch   ms/step: median {th_med:.1f}  p10 {pct(torch_times, 10) * 1e3:.1f}  "
            f"p90 {pct(torch_times, 90) * 1e3:.1f}"
        )
        lines.append(f"ratio MindSpore/PyTorch (medians): {ms_med / th_med:.2f}x")
    lines.append(f"MindSpore first call {first_call:.1f} s -> compile ~{compile_s:.1f} s")
    act1 = acting_latency(info, learner, 1, args.acting_calls)
    act8 = acting_latency(info, learner, 8, args.acting_calls)
    lines.append(
        f"acting (controller.select_actions, NumPy actor): 1 env {act1:.0f} us, 8 envs {act8:.0f} us"
    )
    print("\n".join(lines))

    load = os.getloadavg()
    md = [
        "# Learner step benchmark (QMIX, SMAC 3m sizes)",
        "",
        f"- command: `.venv/bin/python benchmarks/learner_step.py {shlex.join(sys.argv[1:])}`".rstrip(),
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; nproc: {os.cpu_count()}; "
        f"load average before the report: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- software: Python {platform.python_version()}, MindSpore {ms.__version__}, {torch_rows}, "
        f"numpy {np.__version__}; MS threads {args.ms_threads}, torch threads {args.torch_threads}; "
        f"MS_DEV_HOST_BLOCKING_RUN={os.environ.get('MS_DEV_HOST_BLOCKING_RUN')}",
        "- workload: 3 agents, obs 30, state 48, 9 actions, batch 32 x 61 slots, episode lengths 20-60; "
        "TD(lambda=0.6) double-Q QMIX, Adam, clip 10",
        f"- {args.steps} timed steps per framework after 3 warm-up steps, alternating blocks of {args.block}",
        *([f"- note: {args.note}"] if args.note else []),
        "",
        "```",
        f"first loss: MindSpore {ms_first:.7f}  torch {torch_first:.7f}",
        *lines,
        "```",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(md) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
