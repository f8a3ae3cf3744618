#!/usr/bin/env python
"""What training only over the filled slots buys: the QMIX train step at batch 128 (pymarl2's default)
for batches whose longest episode ends at different lengths, MindSpore vs the PyTorch peer, same run.

``learner.time_bucket`` (default 16) makes the MindSpore step run over the longest episode's slots rounded
up to a multiple of 16 (61, 48 and 32 slots below); each length compiles once (the compile time is
printed). The PyTorch peer does what pymarl does, ``batch[:, :max_t_filled]``, with no rounding.
Steps alternate between lengths and frameworks in blocks, so all see the same machine load.

    .venv/bin/python benchmarks/research/time_buckets.py [--steps 12] \\
        [--out benchmarks/results/time_buckets.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks
from benchmarks import harness  # noqa: E402
from benchmarks.learner_step.learner_step import batch_arrays, map_info, synthetic_batch, torch_peer  # noqa: E402
from marl.config.schema import Config, LearnerConfig  # noqa: E402
from marl.learners import QLearner  # noqa: E402
from marl.utils.ms import params_to_numpy, setup  # noqa: E402

LONGEST = (60, 47, 31)  # transitions of the longest episode -> 61, 48, 32 slots with buckets of 16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12, help="timed steps per length and framework")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--ms-threads", type=int, default=1, help="MindSpore CPU kernel threads")
    ap.add_argument("--out", default=str(harness.RESULTS / "time_buckets.md"))
    args = ap.parse_args()
    setup(args.ms_threads, seed=0)
    run = harness.start()
    info, cfg = map_info("3m"), Config(learner=LearnerConfig(batch_size=args.batch, use_jit=True))
    learner = QLearner(info, cfg)
    batches = {n: [synthetic_batch(info, args.batch, s, max_len=n) for s in range(2)] for n in LONGEST}
    compile_s = {}
    for n in LONGEST:  # first call per length: compile + one step
        t0 = time.perf_counter()
        learner.train(batches[n][0], 0, 0)
        compile_s[n] = time.perf_counter() - t0
    try:
        import torch

        torch.set_num_threads(1)
        torch_step = torch_peer(info, cfg, params_to_numpy(learner.nets))
        cut = {  # pymarl: batch[:, :max_t_filled]; the last four arrays cover T - 1 transitions
            n: [
                [
                    torch.from_numpy(np.ascontiguousarray(x[:, : n + 1 if i in (0, 1, 6) else n]))
                    for i, x in enumerate(batch_arrays(b, cfg))
                ]
                for b in batches[n]
            ]
            for n in LONGEST
        }
    except ImportError:
        torch_step = None
    sides = {}
    for n in LONGEST:  # each step of a side on its two batches in turn
        sides[f"ms {n}"] = harness.in_turn(lambda b: learner.train(b, 0, 0), batches[n])
        if torch_step is not None:
            sides[f"torch {n}"] = harness.in_turn(lambda arrays: torch_step(*arrays), cut[n])
    alt = harness.alternate_all(sides, args.steps)
    rows = []
    for n in LONGEST:
        slots = learner.train_slots(batches[n][0]["filled"])
        ms_ms = alt.median(f"ms {n}") * 1e3
        th_ms = alt.median(f"torch {n}") * 1e3 if torch_step is not None else float("nan")
        ratio = ms_ms / th_ms
        rows.append(f"| {n} | {slots} | {ms_ms:.0f} | {th_ms:.0f} | {ratio:.2f}x | {compile_s[n]:.1f} |")
    md = [
        "# Time buckets: the QMIX train step over the filled slots only",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:]),
        f"- workload: SMAC 3m sizes, batch {args.batch} episodes (limit 60), QMIX + TD(lambda) + Adam; "
        f"{args.steps} timed steps per length and framework, interleaved; MindSpore threads "
        f"{args.ms_threads}, torch threads 1",
        "",
        "| longest episode | MindSpore slots | MindSpore ms/step | PyTorch ms/step (pymarl cut) | ratio "
        "| MindSpore first call (compile) s |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    print("\n".join(md))
    Path(args.out).write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
