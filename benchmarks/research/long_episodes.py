"""Compile time and step time of the Q-learner's train step for long episodes: whole-episode BPTT vs
chunked truncated BPTT (``learner.bptt_chunk``).

Every measurement runs in a fresh subprocess (a clean compile cache, and a compile failure such as the
call-depth limit cannot take the driver down), with a wall-clock limit. ``compile_s`` is the wall time of
the first ``train`` call (graph compiles + one step); ``step_s`` is the median of the following steps.
Batches are random padded episodes of random length in ``[limit/4, limit]`` (shorter ones terminate).

    .venv/bin/python benchmarks/research/long_episodes.py --sizes 3m --limits 60,100,150,200 --modes whole
    .venv/bin/python benchmarks/research/long_episodes.py --sizes corridor --limits 400 --modes chunk,whole \\
        --batch 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402

SIZES = {  # n_agents, n_actions, obs_shape, state_shape (docs/smac.md §2)
    "3m": (3, 9, 30, 48),
    "corridor": (6, 30, 156, 282),
    "2c_vs_64zg": (2, 70, 332, 342),
}


def synthetic_batch(info, b: int, seed: int, lengths=None):  # noqa: ANN001, ANN201
    """``b`` padded episodes of random length in [limit/4, limit], or of ``lengths`` (shorter ones than the
    limit terminate)."""
    from marl.buffers.episode import EpisodeBatch, Scheme

    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(info), b)
    n, a, lim = info.n_agents, info.n_actions, info.episode_limit
    d = eb.data
    for row in range(b):
        ep_len = int(rng.integers(max(1, lim // 4), lim + 1)) if lengths is None else int(lengths[row])
        d["obs"][row, : ep_len + 1] = rng.normal(size=(ep_len + 1, n, info.obs_shape))
        d["state"][row, : ep_len + 1] = rng.normal(size=(ep_len + 1, info.state_shape))
        avail = (rng.random((ep_len + 1, n, a)) < 0.7).astype(np.int32)
        avail[..., 0] = 1
        d["avail_actions"][row, : ep_len + 1] = avail
        act = np.argmax(avail[:ep_len] * rng.random((ep_len, n, a)), axis=2)
        d["actions"][row, :ep_len, :, 0] = act
        d["actions_onehot"][row, :ep_len] = np.eye(a, dtype=np.float32)[act]
        d["reward"][row, :ep_len, 0] = rng.normal(size=ep_len)
        d["terminated"][row, ep_len - 1, 0] = float(ep_len < lim)
        d["filled"][row, : ep_len + 1, 0] = 1.0
    return eb


def one(args: argparse.Namespace) -> dict:
    """Run in the child: build a learner, time the first call and the following ones."""
    from marl.config.schema import Config, LearnerConfig
    from marl.envs.base import EnvInfo
    from marl.learners import QLearner
    from marl.utils.ms import ms, setup

    setup(1, seed=0)
    if args.recursion_limit:
        ms.set_recursion_limit(args.recursion_limit)
    n, a, obs, state = SIZES[args.sizes]
    info = EnvInfo(n_agents=n, n_actions=a, obs_shape=obs, state_shape=state, episode_limit=args.limit)
    chunk = {"whole": -1, "chunk": args.chunk, "auto": 0}[args.mode]
    learner = QLearner(info, Config(learner=LearnerConfig(batch_size=args.batch, bptt_chunk=chunk)))
    batches = [synthetic_batch(info, args.batch, s) for s in range(3)]
    t0, c0 = time.perf_counter(), time.process_time()
    stats = learner.train(batches[0], 0, 0)
    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    steps, cpus = [], []
    for i in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        learner.train(batches[(i + 1) % 3], 0, i + 1)
        steps.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {
        "compile_s": round(first, 2),
        "compile_cpu_s": round(first_cpu, 2),
        "step_s": round(float(np.median(steps)), 3) if steps else None,
        "step_cpu_s": round(float(np.median(cpus)), 3) if cpus else None,
        "loss": stats["loss"],
        "chunk": learner.bptt_chunk,
        "load": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", choices=sorted(SIZES), default="3m")
    p.add_argument("--limits", default="60,100,150,200", help="episode limits (T = limit + 1 slots)")
    p.add_argument("--modes", default="whole", help="comma list of whole | chunk | auto")
    p.add_argument("--chunk", type=int, default=50, help="bptt_chunk for --modes chunk")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--timeout", type=float, default=420.0, help="seconds per measurement")
    p.add_argument("--recursion-limit", type=int, default=0, help="ms.set_recursion_limit (0 = leave)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(args)), flush=True)
        return
    import mindspore  # noqa: F401  (imported: the header lists its version; the children train with it)

    run = harness.start()
    table = [
        "| T | mode | chunk | first call: wall s | first call: CPU s | step: wall s | step: CPU s | loss "
        "| load |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def row(line: str) -> None:  # progress on stderr; the whole page goes to stdout at the end
        table.append(line)
        print(line, file=sys.stderr, flush=True)

    for limit in [int(x) for x in args.limits.split(",")]:
        for mode in args.modes.split(","):
            cmd = [
                sys.executable,
                __file__,
                "--one",
                "--limit",
                str(limit),
                "--mode",
                mode,
                "--sizes",
                args.sizes,
                "--batch",
                str(args.batch),
                "--steps",
                str(args.steps),
                "--chunk",
                str(args.chunk),
                "--recursion-limit",
                str(args.recursion_limit),
            ]
            t0 = time.perf_counter()
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd="/tmp")
                res = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
                if res:
                    r = json.loads(res[-1][len("RESULT ") :])
                    cells = [
                        limit + 1,
                        mode,
                        r["chunk"],
                        r["compile_s"],
                        r["compile_cpu_s"],
                        r["step_s"],
                        r.get("step_cpu_s"),
                        f"{r['loss']:.5f}",
                        r["load"],
                    ]
                    row("| " + " | ".join(str(x) for x in cells) + " |")
                else:
                    err = out.stderr.strip().splitlines() or ["?"]
                    msg = next((ln for ln in reversed(err) if "Error" in ln), err[-1])[:160]
                    row(
                        f"| {limit + 1} | {mode} | | failed after {time.perf_counter() - t0:.0f} s | | | | "
                        f"| rc {out.returncode}: {msg} |"
                    )
            except subprocess.TimeoutExpired:
                row(f"| {limit + 1} | {mode} | | > {args.timeout:.0f} s (killed) | | | | | timeout |")
    head = harness.header_lines(run, __file__, sys.argv[1:])
    print("\n".join([*head, f"- sizes {args.sizes}, batch {args.batch}", "", *table]))


if __name__ == "__main__":
    main()
