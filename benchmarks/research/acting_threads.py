"""The NumPy acting step with NumPy's BLAS on one thread and on two, the other core idle, busy or a twin.

    .venv/bin/python benchmarks/research/acting_threads.py --out benchmarks/results/acting_threads.md

Every rollout step of a QMIX run calls :class:`marl.controllers.numpy_actor.NumpyRNNAgent` once for all
envs' agents (8 envs × N agents rows). The matrices are a few dozen rows, so a second BLAS thread has little
to share and must be woken and joined at every product. This times the step at SMAC 3m, 8m and 27m_vs_30m
sizes, alternating, with the other core:

- ``idle``: nothing else runs;
- ``spin``: a pure-Python loop runs in a second process;
- ``twin``: a second process runs the same acting loop with the same BLAS thread count, as two runs of a
  sweep do side by side on a 2-core machine (OpenBLAS's idle workers wait by spinning, so two processes
  with two BLAS threads each take turns on the cores).

It is the measurement behind ``marl.utils.ms.setup`` putting BLAS on one thread.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.learner_step.qmix_workload import map_info  # noqa: E402
from marl.config.schema import AgentConfig  # noqa: E402
from marl.controllers import input_dim  # noqa: E402
from marl.controllers.numpy_actor import NumpyRNNAgent  # noqa: E402

MAPS = ("3m", "8m", "27m_vs_30m")
HIDDEN = AgentConfig().hidden_dim
OTHERS = ("idle", "spin", "twin")  # what the other core does (see the module docstring)


def _other(stop: mp.Event, mode: str, rows: int, inputs: int, acts: int, threads: int) -> None:
    """The second process: a Python spin loop, or the same acting loop as the timed one."""
    if mode == "spin":
        while not stop.is_set():
            sum(range(1000))
        return
    agent = _agent(inputs, acts, np.random.default_rng(2))
    x = np.ones((rows, inputs), np.float32)
    h = np.zeros((rows, HIDDEN), np.float32)
    with threadpool_limits(limits=threads, user_api="blas"):
        while not stop.is_set():
            agent.step(x, h)


def _agent(i: int, acts: int, rng: np.random.Generator, hidden: int = HIDDEN) -> NumpyRNNAgent:
    """The acting agent with random weights: ``i`` inputs, ``acts`` Q-values."""
    shapes = {
        "fc1.weight": (hidden, i),
        "fc1.bias": (hidden,),
        "rnn.weight_ih": (3 * hidden, hidden),
        "rnn.weight_hh": (3 * hidden, hidden),
        "rnn.bias_ih": (3 * hidden,),
        "rnn.bias_hh": (3 * hidden,),
        "fc2.weight": (acts, hidden),
        "fc2.bias": (acts,),
    }
    return NumpyRNNAgent({k: rng.normal(0, 0.1, s) for k, s in shapes.items()})


def _time_step(agent: NumpyRNNAgent, rows: int, inputs: int, reps: int, threads: int) -> float:
    """Median microseconds of one step over ``reps`` calls, in blocks of 50."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(rows, inputs)).astype(np.float32)
    h = np.zeros((rows, agent.hidden_dim), np.float32)
    blocks = []
    with threadpool_limits(limits=threads, user_api="blas"):
        for _ in range(20):
            agent.step(x, h)
        for _ in range(max(1, reps // 50)):
            t = time.perf_counter()
            for _ in range(50):
                agent.step(x, h)
            blocks.append((time.perf_counter() - t) / 50 * 1e6)
    return float(np.median(blocks))


def _cell(
    agent: NumpyRNNAgent, other: str, threads: int, rows: int, inputs: int, acts: int, reps: int
) -> Callable[[], float]:
    """One cell as a side of :func:`harness.alternate_all`: the step's median µs on ``threads`` BLAS threads
    while the other core does ``other`` (its process started before and stopped after)."""

    def call() -> float:
        stop, helper = mp.Event(), None
        if other != "idle":
            job = (stop, other, rows, inputs, acts, threads)
            helper = mp.Process(target=_other, args=job, daemon=True)
            helper.start()
            time.sleep(0.5)
        try:
            return _time_step(agent, rows, inputs, reps, threads)
        finally:
            if helper is not None:
                stop.set()
                helper.join()

    return call


def main(argv: list[str] | None = None) -> None:
    """Time every (map, other core, BLAS threads) cell and write a Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maps", nargs="+", default=list(MAPS), help="SMAC maps (sizes from the map data)")
    ap.add_argument("--envs", type=int, default=8, help="envs per acting step (default 8, QMIX's runner)")
    ap.add_argument("--reps", type=int, default=2000, help="calls per cell (default 2000)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    ap.add_argument("--out", type=Path, default=None, help="Markdown file to append to (default: print)")
    args = ap.parse_args(argv)
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    run = harness.start()
    rng = np.random.default_rng(0)
    rows = []
    for name in args.maps:
        info = map_info(name)
        n_rows, inputs, acts = args.envs * info.n_agents, input_dim(info, AgentConfig()), info.n_actions
        agent = _agent(inputs, acts, rng)
        job = (n_rows, inputs, acts, args.reps)
        cells = {f"{o} {t}": _cell(agent, o, t, *job) for o in OTHERS for t in (1, 2)}
        alt = harness.alternate_all(cells, args.rounds)
        for other in OTHERS:
            one, two = (alt.median(f"{other} {t}", "value") for t in (1, 2))
            rows.append(f"| {name} | {n_rows} | {other} | {one:.0f} | {two:.0f} | {two / one:.2f}x |")
    lines = [
        f"## {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:] if argv is None else argv),
        "- BLAS: "
        + ", ".join(f"{p.get('internal_api')} {p.get('version')} ({p.get('architecture')})" for p in blas),
        f"- median of {args.rounds} alternating rounds of {args.reps} calls; other core: 'spin' a Python "
        "loop in a second process, 'twin' a second process acting the same way with the same BLAS threads",
        "",
        "| map | rows | other core | 1 BLAS thread µs/step | 2 BLAS threads µs/step | 2 vs 1 |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    text = "\n".join(lines)
    if args.out is None:
        print(text)
    else:
        new = not args.out.exists()
        with args.out.open("a") as f:
            if new:
                f.write("# The NumPy acting step: BLAS threads, the other core idle, spinning or a twin\n\n")
                f.write("Written by `benchmarks/research/acting_threads.py`; see its docstring.\n\n")
            f.write(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
