"""Memory of a learner update on full-length episodes, against the trainer's memory check.

The check (``Trainer._check_memory``) sees only the first update, on the short episodes of an untrained
policy, and scales its peak to full-length episodes (:func:`marl.learners.base.full_length_growth`). This
benchmark does what a run does later: per ``learner.update_rows`` setting, in a fresh process, it trains
once on episodes of the first batch's lengths (uniform in [L/2, 3L/2), ``--first-len L``), prints the
check's estimate, then trains on a batch of full-length episodes and measures that update's peak resident
memory (Linux ``VmHWM``, reset before it). Batches are random padded episodes of the map's sizes.

    .venv/bin/python benchmarks/research/update_memory.py --alg mappo --map bane_vs_bane --rows 32,16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402

GIB = 2**30


def one(alg: str, map_name: str, rows: int, first_len: int) -> dict:
    """In the child: the check's estimate after a first update, and the full-length update's peak."""
    from benchmarks.research.long_episodes import synthetic_batch
    from marl import registry
    from marl.buffers.replay import peak_rss, process_rss, reset_peak_rss
    from marl.config import load_config
    from marl.envs.factory import probe_env_info
    from marl.learners.base import full_length_growth
    from marl.utils.ms import setup

    cfg = load_config(alg, map_name=map_name, overrides=[f"learner.update_rows={rows}"])
    setup(1, seed=0)
    info = probe_env_info(cfg)
    learner = registry.build("learner", cfg.learner.name, info=info, cfg=cfg)
    b, slots = cfg.learner.batch_size, info.episode_limit + 1
    lengths = np.random.default_rng(0).integers(max(2, first_len // 2), first_len * 3 // 2, size=b)
    first = synthetic_batch(info, b, 0, lengths)
    full = synthetic_batch(info, b, 1, np.full(b, info.episode_limit))  # the fresh episodes exist first
    before = reset_peak_rss()
    t0 = time.perf_counter()
    learner.train(first, 0, 0)
    first_s, peak, now = time.perf_counter() - t0, peak_rss(), process_rss()
    estimate = full_length_growth(learner, first, slots, before, peak, now)
    reset_peak_rss()
    t0 = time.perf_counter()
    learner.train(full, 0, 1)
    return {
        "agents": info.n_agents,
        "batch": b,
        "slots": slots,
        "first_max_len": int(lengths.max()),
        "first_peak_gib": (peak - before) / GIB,
        "first_kept_gib": (now - before) / GIB,
        "first_s": first_s,
        "estimate_gib": estimate / GIB,
        "measured_gib": (peak_rss() - now) / GIB,
        "peak_total_gib": peak_rss() / GIB,
        "full_s": time.perf_counter() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--alg", default="mappo")
    p.add_argument("--map", default="bane_vs_bane")
    p.add_argument("--rows", default="32,16", help="learner.update_rows values (0 = one graph)")
    p.add_argument("--first-len", type=int, default=30, help="mean episode length of the first batch")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one is not None:
        print("RESULT " + json.dumps(one(args.alg, args.map, args.one, args.first_len)), flush=True)
        return
    import mindspore  # noqa: F401  (imported: the header lists its version; the children train with it)

    run = harness.start()
    table = [
        "| alg | map | update_rows | agents x batch x slots | first update: max len, peak, kept GiB | "
        "check's estimate GiB | full-length update: measured GiB beyond the first, process peak GiB, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for rows in [int(x) for x in args.rows.split(",")]:
        argv = [
            sys.executable,
            __file__,
            "--alg",
            args.alg,
            "--map",
            args.map,
            "--first-len",
            str(args.first_len),
        ]
        out = subprocess.run([*argv, "--one", str(rows)], capture_output=True, text=True)
        res = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if not res:
            err = (out.stderr.strip().splitlines() or ["?"])[-1][:160]
            table.append(f"| {args.alg} | {args.map} | {rows} | failed (rc {out.returncode}): {err} | | | |")
            print(table[-1], file=sys.stderr, flush=True)
            continue
        r = json.loads(res[-1][len("RESULT ") :])
        table.append(
            f"| {args.alg} | {args.map} | {rows} | {r['agents']} x {r['batch']} x {r['slots']} | "
            f"{r['first_max_len']}, {r['first_peak_gib']:.2f}, {r['first_kept_gib']:.2f} | "
            f"{r['estimate_gib']:.2f} | {r['measured_gib']:.2f}, {r['peak_total_gib']:.2f}, "
            f"{r['full_s']:.0f} |"
        )
        print(table[-1], file=sys.stderr, flush=True)  # progress; the whole page goes to stdout at the end
    print("\n".join([*harness.header_lines(run, __file__, sys.argv[1:]), "", *table]))


if __name__ == "__main__":
    main()
