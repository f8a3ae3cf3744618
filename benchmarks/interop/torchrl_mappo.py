#!/usr/bin/env python
"""TorchRL's MAPPO trained on our SMAC engine through the PettingZoo view, unchanged (an interop benchmark).

Runs in its own venv (``make torchrl-env`` builds ``.venv-torchrl``: torch, torchrl and this package installed
without MindSpore, the engine-only install). The training loop follows TorchRL's multi-agent PPO tutorial:
``PettingZooWrapper(use_mask=True, done_on_any=False, categorical_actions=True, return_state=True)``, a shared
``MultiAgentMLP`` actor over each agent's observation with a ``MaskedCategorical`` over SMAC's action mask, a
centralised ``MultiAgentMLP`` critic, ``ClipPPOLoss`` with GAE. It trains for a fixed budget of env steps or
wall-clock and appends the learning curve (env steps, episodes, win rate and return of the episodes that ended
in each batch) to ``benchmarks/results/torchrl_mappo.md``.

    .venv-torchrl/bin/python benchmarks/interop/torchrl_mappo.py --map 3m --frames 200000 --budget-s 1200
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
from torchrl.envs import PettingZooWrapper
from torchrl.modules import MaskedCategorical, MultiAgentMLP, ProbabilisticActor
from torchrl.objectives import ClipPPOLoss, ValueEstimators

from benchmarks import harness
from marl.envs.pettingzoo_view import pettingzoo_env

ROOT = Path(__file__).resolve().parents[2]


def make_env(map_name: str, seed: int) -> PettingZooWrapper:
    """Our PettingZoo view in TorchRL's wrapper, with the settings SMAC needs (README)."""
    view = pettingzoo_env(map_name, seed=seed, backend="sim")
    return PettingZooWrapper(
        view, use_mask=True, done_on_any=False, categorical_actions=True, return_state=True
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", default="3m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--frames", type=int, default=200_000, help="env steps to train")
    ap.add_argument("--budget-s", type=float, default=1200.0, help="stop after this wall-clock")
    ap.add_argument("--batch", type=int, default=2000, help="env steps per PPO iteration")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "torchrl_mappo.md"))
    args = ap.parse_args(argv)
    run, shown = harness.start(), sys.argv[1:] if argv is None else argv
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    env = make_env(args.map, args.seed)
    n_agents = len(env.group_map["agent"])
    obs_dim = env.observation_spec["agent", "observation", "observation"].shape[-1]
    n_actions = env.full_action_spec["agent", "action"].space.n
    obs_key = ("agent", "observation", "observation")
    mlp = {"share_params": True, "depth": 2, "num_cells": 64, "activation_class": nn.Tanh}
    actor_net = MultiAgentMLP(obs_dim, n_actions, n_agents, centralised=False, **mlp)
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=[obs_key], out_keys=[("agent", "logits")]),
        in_keys={"logits": ("agent", "logits"), "mask": ("agent", "action_mask")},
        out_keys=[("agent", "action")],
        distribution_class=MaskedCategorical,
        return_log_prob=True,
        log_prob_key=("agent", "sample_log_prob"),
    )
    critic_net = MultiAgentMLP(obs_dim, 1, n_agents, centralised=True, **mlp)  # MAPPO: a centralised critic
    critic = TensorDictModule(critic_net, in_keys=[obs_key], out_keys=[("agent", "state_value")])
    collector = Collector(env, actor, frames_per_batch=args.batch, total_frames=args.frames)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(args.batch), sampler=SamplerWithoutReplacement(), batch_size=500
    )
    loss = ClipPPOLoss(actor_network=actor, critic_network=critic, clip_epsilon=0.2, entropy_coeff=0.01,
                       normalize_advantage=False)  # fmt: skip
    loss.set_keys(
        reward=("agent", "reward"),
        action=("agent", "action"),
        sample_log_prob=("agent", "sample_log_prob"),
        value=("agent", "state_value"),
        done=("agent", "done"),
        terminated=("agent", "terminated"),
    )
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.99, lmbda=0.95)
    optim = torch.optim.Adam(loss.parameters(), lr=5e-4)
    rows, frames, episodes, t0 = [], 0, 0, time.time()
    for data in collector:
        frames += data.numel()
        ended = data["next", "done"].squeeze(-1)
        won = data["next", "agent", "info", "battle_won"][..., 0][ended]
        episodes += int(ended.sum())
        win = float(won.float().mean()) if len(won) else float("nan")
        with torch.no_grad():
            loss.value_estimator(
                data, params=loss.critic_network_params, target_params=loss.target_critic_network_params
            )
        buffer.extend(data.reshape(-1))
        for _ in range(4):  # PPO epochs
            for _ in range(args.batch // 500):
                mb = buffer.sample()
                out = loss(mb)
                total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                optim.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), 10.0)
                optim.step()
        collector.update_policy_weights_()
        elapsed = time.time() - t0
        rows.append((frames, episodes, win, int(ended.sum()), elapsed))
        n_ended = int(ended.sum())
        print(
            f"frames {frames:,} episodes {episodes} win rate {win:.3f} ({n_ended} ended) {elapsed:.0f}s",
            flush=True,
        )
        if elapsed > args.budget_s:
            break
    collector.shutdown()
    write(args, rows, run, shown)


def write(
    args: argparse.Namespace,
    rows: list[tuple[int, int, float, int, float]],
    run: harness.Run,
    shown: list[str],
) -> None:
    """Append this run to the results file (title on a new file), with the shared header (``run``: its
    start, ``shown``: its command-line arguments); the header's versions name torch, torchrl and tensordict
    (imported above)."""
    out = Path(args.out)
    new = not out.exists()
    lines = []
    if new:
        lines += ["# TorchRL MAPPO on our SMAC engine (PettingZoo view, unchanged)", ""]
    lines += [
        f"## {args.map}, seed {args.seed}",
        "",
        *harness.header_lines(run, __file__, shown, python=".venv-torchrl/bin/python"),
        "- no MindSpore in this venv (the engine-only install)",
        "- win rate = battles won among the episodes that ended in that batch (stochastic policy)",
        "",
        "| env steps | episodes | win rate (batch) | episodes ended | wall-clock s |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {f:,} | {e} | {w:.3f} | {n} | {s:.0f} |" for f, e, w, n, s in rows]
    with open(out, "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
