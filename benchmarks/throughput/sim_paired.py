"""Our SMAC env vs JaxMARL's SMAX in paired rounds: each ratio from windows timed seconds apart.

    .venv/bin/python benchmarks/throughput/sim_paired.py  # writes benchmarks/results/sim_throughput_paired.md

``sim_throughput.py`` times each side once for several seconds, one after the other; on a shared machine
whose speed drifts by a third between runs minutes apart, one cell's ratio then moves as much as the
difference it is meant to show. Here the two sides stay loaded side by side (ours in this process, SMAX in
a long-lived worker of ``.venv-bench`` that answers one timing request at a time) and take turns: each round
times our per-step API (``full_stepper``), our compiled rollout (``rollout_stepper``), SMAX's jitted step
and its 100-step ``lax.scan``, each for ``--seconds`` after the same untimed warm-up, in an order reversed
every other round. A round's ratios compare windows a few seconds apart, so a drift slower than that
cancels; the report gives each ratio's median over the rounds, its range, and in how many rounds it
reached 2. Only one side runs at a time; the idle one waits on a pipe. ``--cpus`` holds both sides to the
given cores (the worker inherits the affinity): on this project's 2-core VM the two cores ran our 1-env step
at different speeds while SMAX's scan ran alike on both (``results/sim_throughput_paired_cpu*.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness
from benchmarks.throughput.sim_throughput import (
    BENCH_PY,
    MAPS,
    N_ENVS,
    ROOT,
    SMAX_WORKER,
    full_stepper,
    rollout_stepper,
    steady_rate,
)
from marl.envs.smac.threads import resolve_threads

SIDES = ("full", "rollout", "smax_step", "smax_scan")
RATIOS = (("full", "smax_step"), ("full", "smax_scan"), ("rollout", "smax_scan"))


class SmaxServer:
    """A SMAX worker that stays loaded: ``rate(kind, seconds)`` times its jitted ``step`` or 100-step
    ``scan`` on request (one line out, one JSON line back). ``cmd`` is the worker's command line."""

    def __init__(self, cmd: Sequence[str]) -> None:
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        self.proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.head = self._read()  # compile time and versions, once the worker is ready

    @classmethod
    def smax(cls, scenario: str, n_envs: int) -> SmaxServer:
        """``smax_worker.py`` in ``.venv-bench`` for one SMAX scenario."""
        if not BENCH_PY.exists():
            raise SystemExit(f"{BENCH_PY} is missing: `make bench-env` builds the peer's venv")
        return cls([str(BENCH_PY), str(SMAX_WORKER), scenario, str(n_envs), "serve"])

    def _read(self) -> dict:
        """The worker's next JSON line (lines the imports print are skipped)."""
        while line := self.proc.stdout.readline():
            if line.startswith("{"):
                return json.loads(line)
        self.proc.wait()
        raise RuntimeError(f"SMAX worker exited ({self.proc.returncode}):\n{self.proc.stderr.read()[-2000:]}")

    def rate(self, kind: str, seconds: float) -> float:
        """Env steps a second of the worker's ``kind`` ('step' or 'scan') over ``seconds``."""
        self.proc.stdin.write(f"{kind} {seconds}\n")
        self.proc.stdin.flush()
        return float(self._read()["sps"])

    def close(self) -> None:
        """End the worker (its stdin closes; it exits after the last answer)."""
        self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def __enter__(self) -> SmaxServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summarize(rounds: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per side the median rate; per ratio ``a/b`` (each round's ``a`` over the same round's ``b``) the
    median, minimum, maximum and the number of rounds at 2 or more."""
    out: dict[str, dict[str, float]] = {s: {"median": statistics.median(r[s] for r in rounds)} for s in SIDES}
    for a, b in RATIOS:
        ratios = [r[a] / r[b] for r in rounds]
        out[f"{a}/{b}"] = {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
            "at_least_2": sum(x >= 2.0 for x in ratios),
        }
    return out


def paired_cell(
    name: str, n_envs: int, rounds: int, seconds: float, threads: int, server: SmaxServer
) -> list:
    """``rounds`` rounds of the four timings of one map and env count (see the module docstring)."""
    one, _ = full_stepper(name, n_envs, threads)
    hundred = rollout_stepper(name, n_envs, threads)
    timers = {
        "full": lambda: steady_rate(one, n_envs, seconds),
        "rollout": lambda: steady_rate(hundred, 100 * n_envs, seconds),
        "smax_step": lambda: server.rate("step", seconds),
        "smax_scan": lambda: server.rate("scan", seconds),
    }
    return harness.alternate_all(timers, rounds, mirror=True).by_round()  # SIDES, then reversed, ...


def report(cells: list[tuple], args: argparse.Namespace, head: dict, run: harness.Run) -> str:
    """The results page: provenance (the harness header since ``run``), then one row per cell."""
    cores = "all" if args.cpus is None else ", ".join(map(str, args.cpus)) + " only (both sides)"

    def rng(s: dict) -> str:
        return f"{s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}] ({s['at_least_2']}/{args.rounds})"

    lines = [
        "# Our SMAC env vs JaxMARL SMAX, paired rounds: env steps per second",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:], python="python"),
        f"- peer versions ({BENCH_PY.parent.parent.name}): jax {head['jax']}, jaxmarl {head['jaxmarl']}",
        f"- ours on {resolve_threads(args.threads)} threads "
        f"(`threads={args.threads}`), XLA on every core it may use; {args.rounds} rounds of {args.seconds} s "
        f"a side; cores: {cores}",
        "- **full** = `BatchedStarCraft2Env.step` (obs, state, avail, reward, end for every env; random "
        "available actions; resets); **rollout** = `random_rollout`, 100 steps a compiled call; SMAX = "
        "`HeuristicEnemySMAX`, **step** = its jitted step, **scan** = 100 steps in one `lax.scan`",
        "- rates: medians over the rounds; ratios: median [min, max] of each round's ratio (rounds at 2 or "
        "more / rounds)",
        "",
        "| map | n_envs | full sps | rollout sps | SMAX step sps | SMAX scan sps | full/SMAX step "
        "| full/SMAX scan | rollout/SMAX scan |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, s in cells:
        rates = " | ".join(f"{s[side]['median']:.0f}" for side in SIDES)
        ratios = " | ".join(rng(s[f"{a}/{b}"]) for a, b in RATIOS)
        lines.append(f"| {name} | {n} | {rates} | {ratios} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maps", nargs="+", default=list(MAPS))
    ap.add_argument("--envs", nargs="+", type=int, default=list(N_ENVS))
    ap.add_argument("--rounds", type=int, default=7, help="paired rounds per cell")
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per side and round")
    ap.add_argument("--threads", type=int, default=0, help="our threads (0 = all cores, as XLA)")
    ap.add_argument(
        "--cpus",
        type=int,
        nargs="+",
        default=None,
        help="run both sides on these cores only (their SMAX worker too)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sim_throughput_paired.md"))
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        ap.error(f"--rounds must be >= 1 and --seconds > 0 (got {args.rounds}, {args.seconds})")
    if args.cpus is not None:
        allowed = sorted(os.sched_getaffinity(0))
        if not set(args.cpus) <= set(allowed):
            ap.error(f"--cpus {args.cpus}: this process may run on cores {allowed} only")
        os.sched_setaffinity(0, args.cpus)  # the worker, started later, inherits it
    run, cells, raw, head = harness.start(), [], {}, {}
    for name in args.maps:
        for n in args.envs:
            with SmaxServer.smax(name, n) as server:
                head = server.head
                rounds = paired_cell(name, n, args.rounds, args.seconds, args.threads, server)
            s = summarize(rounds)
            cells.append((name, n, s))
            raw[f"{name} x{n}"] = rounds
            print(
                f"{name} x{n}: " + ", ".join(f"{k} {v['median']:.2f}" for k, v in s.items() if "/" in k),
                flush=True,
            )
    text = report(cells, args, head, run)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"head": head, "rounds": raw}, indent=1) + "\n")


if __name__ == "__main__":
    main()
