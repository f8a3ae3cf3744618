#!/usr/bin/env python
"""What length groups buy: the QMIX train step at batch 128 (or MAPPO's train call, ``--alg mappo``) with
``learner.length_groups`` 1 and 2, same weights, same batches, alternating, on batches whose episode
lengths are those of uniformly random play on the embedded engine (the policy of a run's first steps).

A few random episodes run to the time limit and the rest end far sooner, so one padded batch is mostly
padding. With ``length_groups: 2`` the batch's longest eighth trains apart from the rest, each part over its
own bucketed length (``marl/learners/length_groups.py``). The episodes' contents are random
(``synthetic_batch``): only their lengths matter to the step's cost. The first call of each learner
compiles every shape it needs (printed); the losses of the first step are compared.

    .venv/bin/python benchmarks/research/length_groups.py [--maps 3m 8m] [--alg qmix|mappo] [--steps 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks
from benchmarks import harness  # noqa: E402
from benchmarks.learner_step.qmix_workload import map_info, synthetic_batch  # noqa: E402
from marl.config import load_config  # noqa: E402
from marl.config.schema import Config, LearnerConfig  # noqa: E402
from marl.envs.smac.batched_env import BatchedStarCraft2Env  # noqa: E402
from marl.envs.smac.sim.avail import sample_available  # noqa: E402
from marl.learners import QLearner  # noqa: E402
from marl.learners.length_groups import split_by_length  # noqa: E402
from marl.learners.ppo_learner import PPOLearner  # noqa: E402
from marl.learners.targets import bucketed_slots  # noqa: E402
from marl.utils.ms import setup  # noqa: E402


def random_play_lengths(name: str, episodes: int, seed: int = 0) -> np.ndarray:
    """Steps of ``episodes`` episodes of uniformly random available actions (SMAC's time limit included)."""
    env = BatchedStarCraft2Env(name, 64, seed=seed)
    env.reset()
    rs, out = np.random.default_rng(seed), []
    while len(out) < episodes:
        _, term, _ = env.step(
            sample_available(env.get_avail_actions().astype(bool), rs.random((64, env.n_agents)))
        )
        if term.any():
            out.extend(env._steps[term].tolist())
            env.reset_envs(term)
    return np.array(out[:episodes])


def make_learner(alg: str, name: str, info, batch: int, groups: int):  # noqa: ANN001, ANN201
    """``qmix``: the default QLearner config at ``batch``; ``mappo``: the MAPPO config for SMAC (batch 128,
    15 epochs, one minibatch), both with ``length_groups`` = ``groups``."""
    if alg == "qmix":
        return QLearner(
            info, Config(learner=LearnerConfig(batch_size=batch, use_jit=True, length_groups=groups))
        )
    cfg = load_config("mappo", overrides=[f"env.map_name={name}", f"learner.length_groups={groups}"])
    return PPOLearner(info, cfg)


def bench_map(name: str, args: argparse.Namespace) -> tuple[str, list[str]]:
    info = map_info(name)
    lengths = random_play_lengths(name, 2000)
    rng = np.random.default_rng(1)
    batch = args.batch if args.alg == "qmix" else 128  # MAPPO's SMAC setting: 128 episodes per update
    draws = [rng.choice(lengths, batch) for _ in range(4)]
    batches = [synthetic_batch(info, batch, s, lengths=d.tolist()) for s, d in enumerate(draws)]
    learners = {g: make_learner(args.alg, name, info, batch, g) for g in (1, 2)}
    learners[2].load_state_dict(learners[1].state_dict())
    first, loss = {}, {}
    for g, learner in learners.items():  # every batch once: compiles each shape these batches need
        t0 = time.perf_counter()
        loss[g] = learner.train(batches[0], 0, 0)["loss"]  # MAPPO: the mean over its epochs
        for b in batches[1:]:
            learner.train(b, 0, 0)
        first[g] = time.perf_counter() - t0
    one, two = (harness.in_turn(lambda b, lr=lr: lr.train(b, 0, 0), batches) for lr in learners.values())
    alt = harness.alternate(one, two, args.steps, names=("1", "2"))  # the batches in turn, as both saw them
    med = {g: alt.median(str(g)) * 1e3 for g in learners}
    limit = info.episode_limit
    shapes, bucket = [], learners[1].cfg.learner.time_bucket
    for b in batches:
        groups = split_by_length(b["filled"], 2, limit + 1, bucket)
        one = f"{batch}x{bucketed_slots(b['filled'], limit + 1, bucket)}"
        shapes.append(one if groups is None else " + ".join(f"{len(r)}x{t}" for r, t in groups))
    filled = [float(d.mean() + 1) for d in draws]
    note = (
        f"- {name}: random play, 2000 episodes: mean {lengths.mean():.1f} steps, "
        f"{100 * (lengths >= limit).mean():.1f} % "
        f"at the limit ({limit}); batches (episodes x slots, groups): {'; '.join(shapes)}; mean filled slots "
        f"{statistics.mean(filled):.1f}; first-step loss {loss[1]:.7f} vs {loss[2]:.7f}"
    )
    row = (
        f"| {name} | {med[1]:.0f} | {med[2]:.0f} | {med[1] / med[2]:.2f}x | {first[1]:.1f} | {first[2]:.1f} |"
    )
    return row, [note]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maps", nargs="+", default=["3m", "8m"])
    ap.add_argument(
        "--alg", choices=("qmix", "mappo"), default="qmix", help="the learner (mappo: PPO, 15 epochs)"
    )
    ap.add_argument("--steps", type=int, default=10, help="timed steps per learner and map")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--ms-threads", type=int, default=1, help="MindSpore CPU kernel threads")
    ap.add_argument("--out", default=str(harness.RESULTS / "length_groups.md"))
    args = ap.parse_args()
    setup(args.ms_threads, seed=0)
    run = harness.start()
    workload = (
        f"QMIX at batch {args.batch} (the default config)"
        if args.alg == "qmix"
        else "MAPPO's SMAC config (batch 128, 15 epochs, one minibatch; a step = one train call)"
    )
    rows, notes = [], []
    for name in args.maps:
        row, note = bench_map(name, args)
        rows.append(row)
        notes += note
    md = [
        f"## {time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {args.alg.upper()} with and without length groups",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:]),
        f"- MindSpore threads {args.ms_threads}",
        f"- workload: {workload}; {args.steps} timed "
        "steps per learner, alternating over 4 batches; 'first calls' = one step on each batch, every "
        "shape's compile included",
        *notes,
        "",
        "| map | one batch ms/step | length groups ms/step | speed-up | one batch first calls s "
        "| length groups first calls s |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    print("\n".join(md))
    out = Path(args.out)
    head = "" if out.exists() else "# Length groups: learner steps on batches with a few long episodes\n\n"
    with out.open("a") as f:
        f.write(head + "\n".join(md) + "\n\n")


if __name__ == "__main__":
    main()
