"""Env steps per second of the Ray runner against the local parallel runner, at 1, 2 and 4 workers.

    .venv/bin/python benchmarks/throughput/ray_runner.py                     # SMAC 3m on the embedded engine
    .venv/bin/python benchmarks/throughput/ray_runner.py --envs-per-worker 4 # each worker: a batch of 4 envs
    .venv/bin/python benchmarks/throughput/ray_runner.py --step-delay-ms 5   # + 5 ms idle a step (slow game)

One "env step" = one step of one env (all agents act), counted from the runners' own episode lengths.
Every runner plays whole batches of episodes with the same NumPy QMIX actor (RNN, hidden 64, ε = 1:
uniform random available actions), so the numbers include the controller and the EpisodeBatch filling,
as in training. With n workers and k envs per worker (n*k envs in all), rows are: ``parallel`` = all
envs stepped in this process; ``parallel subprocess`` = one worker process per env
(``runner.subprocess=true``); ``ray`` = n Ray actors holding k envs each (a local Ray started here;
``ray.worker_cpus=0`` so 4 actors fit on 2 cores). ``--step-delay-ms`` adds an idle wait to every env
step (stands in for a slow env such as the real game, whose time is spent in another process). A
warm-up batch is not timed. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness
from marl import registry
from marl.buffers import Scheme
from marl.config.schema import AgentConfig, ExplorationConfig, RayConfig
from marl.controllers import MultiAgentController
from marl.runners import ParallelRunner
from marl.runners.episode_runner import _Bound
from marl.runners.ray_runner import RayRunner, connect
from marl.trainer import EnvFactory


class SlowFactory:
    """``factory(row)`` whose env sleeps ``delay_s`` in every step (picklable for workers)."""

    def __init__(self, factory: EnvFactory, delay_s: float) -> None:
        self.factory, self.delay_s = factory, delay_s

    def __call__(self, row: int) -> Any:
        env = self.factory(row)
        step, delay = env.step, self.delay_s

        def slow_step(actions: Any) -> Any:
            time.sleep(delay)
            return step(actions)

        env.step = slow_step
        return env


def _measure(runner: ParallelRunner, seconds: float) -> tuple[float, int]:
    runner.run(0)  # warm-up: actors started, caches filled
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, stats = runner.run(0)
        steps += sum(stats.lengths)
    return steps / (time.perf_counter() - t0), steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="sc2", help="registry env (default sc2 = SMAC)")
    p.add_argument("--map", default="3m", help="map (default 3m)")
    p.add_argument("--backend", default="sim")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--envs-per-worker", type=int, default=1, help="envs held by each worker (default 1)")
    p.add_argument("--step-delay-ms", type=float, default=0.0, help="idle ms added to every env step")
    p.add_argument("--seconds", type=float, default=5.0, help="timed seconds per row (default 5)")
    args = p.parse_args()

    factory = EnvFactory(args.env, args.map, args.backend, {}, seed=0, offset=0)
    if args.step_delay_ms > 0:
        factory = SlowFactory(factory, args.step_delay_ms / 1000)
    probe = factory(0)
    info = probe.env_info()
    probe.close()
    scheme = Scheme(info)
    expl = ExplorationConfig(epsilon_start=1.0, epsilon_finish=1.0, epsilon_anneal_time=1)
    weights = MultiAgentController(info, AgentConfig(), expl, seed=0)._weights
    run = harness.start()
    owns = connect("local")
    rows = []
    try:
        for n in args.workers:
            k = args.envs_per_worker
            fns = [_Bound(factory, i) for i in range(n * k)]
            kinds = {
                "parallel": lambda c, fns=fns: ParallelRunner(fns, scheme, c),
                "parallel subprocess": lambda c, fns=fns: ParallelRunner(fns, scheme, c, subprocess=True),
                "ray": lambda c, fns=fns, n=n: RayRunner(fns, scheme, c, RayConfig(num_workers=n)),
            }
            for kind, make in kinds.items():
                runner = make(MultiAgentController(info, AgentConfig(), expl, seed=0, weights=weights))
                try:
                    rate, steps = _measure(runner, args.seconds)
                finally:
                    runner.close()
                rows.append((n, n * k, kind, rate, steps))
                print(f"[bench] {n} workers, {n * k} envs, {kind}: {rate:,.0f} env steps/s", flush=True)
    finally:
        if owns:
            import ray

            ray.shutdown()
    print()
    print("\n".join(harness.header_lines(run, __file__, sys.argv[1:])))
    print(
        f"- env {args.env} {args.map} ({args.backend}), {args.step_delay_ms:g} ms step delay, "
        f"{args.seconds:g} s per row"
    )
    print()
    print("| workers | envs | runner | env steps/s | steps timed |")
    print("|---|---|---|---|---|")
    for n, envs, kind, rate, steps in rows:
        print(f"| {n} | {envs} | {kind} | {rate:,.0f} | {steps} |")


if __name__ == "__main__":
    registry.ensure_loaded("env")
    main()
