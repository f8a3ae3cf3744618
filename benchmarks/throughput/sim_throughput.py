"""Env steps per second of our SMAC env vs JaxMARL's SMAX, measured side by side in the same run.

    .venv/bin/python benchmarks/throughput/sim_throughput.py   # writes benchmarks/results/sim_throughput.md

One "env step" = one agent step of one env (8 game loops for us, 8 world ticks for SMAX); 64 envs
stepped once count 64.  Both sides choose uniformly random *available* actions each step and reset
finished envs.

Ours, headline ("full env step", like-for-like with SMAX's step): ``BatchedStarCraft2Env.step`` — the Numba
engine plus everything the agents consume, computed for every env every step: per-agent observations, global
state, available actions, reward and episode end (one compiled call a step, ``marl/envs/smac/fused.py``) —
plus drawing the random available actions and resetting finished envs. Secondary ("engine only"):
``BatchedSimEngine`` with the engine's own Numba availability rule, no obs/state/reward. SMAX:
``HeuristicEnemySMAX`` with the scenario of the same name, whose jitted ``step`` includes obs, reward and
auto-reset; one jitted call samples actions and steps (``vmap`` over envs). SMAX runs in ``smax_worker.py``, a
subprocess of the separate venv ``.venv-bench`` (``make bench-env`` builds it: ``pip install jaxmarl`` in a
venv of its own) because jax needs numpy 2. The "SMAX scan" column rolls 100 steps inside one jitted
``lax.scan`` (JaxMARL's favoured use, no Python per step); the ratios are taken against the per-step column
unless named "scan". Each side's timed seconds follow the same untimed warm-up (``steady_rate``; the worker's
``rate``). The machine's load average is recorded before and after every cell: a shared machine depresses and
scatters every number.

    .venv/bin/python benchmarks/throughput/sim_throughput.py --smacv2   # results/sim_throughput_smacv2.md

``--smacv2`` times SMACv2 scenarios (default protoss_10_vs_10) against SMAX's SMACv2-style scenario of the
same size (``smacv2_throughput.py`` says what each side runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

import numpy as np

from benchmarks import harness
from marl.envs.smac.smacv2.scenarios import SCENARIOS, is_scenario
from marl.envs.smac.threads import resolve_threads

ROOT = Path(__file__).resolve().parents[2]
BENCH_PY = ROOT / ".venv-bench" / "bin" / "python"
MAPS = ("3m", "8m", "27m_vs_30m")
N_ENVS = (1, 64)

SMAX_WORKER = ROOT / "benchmarks" / "throughput" / "smax_worker.py"  # runs in .venv-bench (jax needs numpy 2)


def _random_actions(eng, rs: np.random.Generator, sample_available) -> np.ndarray:
    """Uniformly random available SMAC actions (E, NA) from the engine's state."""
    return sample_available(eng.avail_actions(), rs.random((eng.n_envs, eng.n_agents)))


def _uniform_rows(rs: np.random.Generator, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    """One (E, NA) array of uniforms a step, drawn 1024 steps at a time: the numbers of one draw a step,
    in the same order, without a generator call per step."""
    while True:
        yield from rs.random((1024, *shape))


def steady_rate(step: Callable[[], None], n_envs: int, seconds: float) -> float:
    """Env steps per second of ``step()`` (one step of ``n_envs`` envs, resets included) over ``seconds``,
    after an untimed warm-up of a quarter of that (at most 1 s): the first seconds of a fresh process's
    threaded cell ran far below its steady rate (3m x 64 on 2 threads: 257 steps/s against 226k)."""
    for secs in (min(1.0, seconds / 4), seconds):  # the warm-up, then the timed loop
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < secs:
            step()
            n += 1
    return n * n_envs / (time.perf_counter() - t0)


def bench_ours(name: str, n_envs: int, seconds: float, threads: int) -> dict:
    """Steps per second of ``BatchedSimEngine`` on one map (compile time reported separately)."""
    from marl.envs.smac.maps import load_map
    from marl.envs.smac.sim.avail import sample_available
    from marl.envs.smac.sim.engine import BatchedSimEngine

    spec = load_map(name)
    t0 = time.perf_counter()
    eng = BatchedSimEngine(spec, n_envs, seed=0, threads=threads)
    eng.reset()
    rs = np.random.default_rng(0)
    eng.step(_random_actions(eng, rs, sample_available))
    first_s = time.perf_counter() - t0
    eng.reset()
    steps = np.zeros(n_envs, dtype=int)

    def one() -> None:
        eng.step(_random_actions(eng, rs, sample_available))
        steps[:] += 1
        done = (eng.battle_status() != 0) | (steps >= spec.episode_limit)
        if done.any():
            eng.reset_envs(done)
            steps[done] = 0

    return {"sps": steady_rate(one, n_envs, seconds), "first_call_s": first_s}


def full_stepper(
    name: str, n_envs: int, threads: int, fused: bool = True
) -> tuple[Callable[[], None], float]:
    """(one step of ``n_envs`` envs with random available actions and resets, seconds to the first step) of
    ``BatchedStarCraft2Env``, or of ``BatchedSMACv2Env`` for a SMACv2 scenario; ``fused=False``: the env's
    stage-by-stage reference step."""
    from marl.envs.smac.batched_env import BatchedStarCraft2Env
    from marl.envs.smac.sim.avail import sample_available
    from marl.envs.smac.smacv2.batched import BatchedSMACv2Env

    t0 = time.perf_counter()
    cls = BatchedSMACv2Env if is_scenario(name) else BatchedStarCraft2Env
    env = cls(name, n_envs, seed=0, threads=threads, **({} if fused else {"fused": False}))
    env.reset()
    rs = np.random.default_rng(0)
    # the first step loads the compiled engine and sampler from the Numba cache: not timed
    env.step(sample_available(env.get_avail_actions(), rs.random((n_envs, env.n_agents))))
    first_s = time.perf_counter() - t0
    env.reset()
    rows = _uniform_rows(rs, (n_envs, env.n_agents))

    def one() -> None:
        _, terminated, _ = env.step(sample_available(env.get_avail_actions(), next(rows)))
        # count_nonzero, not .any(): NumPy's reduction machinery costs about 3 us a call, 15 % of a
        # 1-env step of 3m, which is the loop's and not the env's (SMAX's step resets inside the jit)
        if np.count_nonzero(terminated):
            env.reset_envs(terminated)

    return one, first_s


def bench_full(name: str, n_envs: int, seconds: float, threads: int, fused: bool = True) -> dict:
    """Steps per second of :func:`full_stepper`'s step (engine + obs + state + avail + reward + end)."""
    one, first_s = full_stepper(name, n_envs, threads, fused)
    return {"sps": steady_rate(one, n_envs, seconds), "first_call_s": first_s}


def rollout_stepper(name: str, n_envs: int, threads: int) -> Callable[[], None]:
    """100 uniformly random steps of ``n_envs`` full envs in one call of
    :func:`marl.envs.smac.rollout.random_rollout` (engine, obs, state, avail, reward, end, auto-reset; no
    Python between steps: the like-for-like of SMAX's ``lax.scan`` of 100 steps), loaded and warmed."""
    from marl.envs.smac.batched_env import BatchedStarCraft2Env
    from marl.envs.smac.rollout import random_rollout

    env = BatchedStarCraft2Env(name, n_envs, seed=0, threads=threads)
    env.reset()
    rs = np.random.default_rng(0)

    def hundred() -> None:
        random_rollout(env, rs.random((100, n_envs, env.n_agents)))

    hundred()  # loads the compiled loop: not timed
    return hundred


def bench_rollout(name: str, n_envs: int, seconds: float, threads: int) -> dict:
    """Steps per second of :func:`rollout_stepper` on ``threads``."""
    return {"sps": steady_rate(rollout_stepper(name, n_envs, threads), 100 * n_envs, seconds)}


def smax_scenario(name: str) -> str:
    """SMAX's scenario for one of ours: the map itself, or for a SMACv2 scenario ``smacv2_<n>_units``."""
    if not is_scenario(name):
        return name
    sc = SCENARIOS[name]
    if sc.n_units != sc.n_enemies or sc.n_units not in (5, 10, 20):
        raise ValueError(f"SMAX has no SMACv2-style scenario of size {sc.n_units} vs {sc.n_enemies}")
    return f"smacv2_{sc.n_units}_units"


def cold_compile_seconds() -> float:
    """Import + reset + first step of 3m (engine and SMAC features) in a fresh process with an empty Numba
    cache."""
    code = (
        "import time; t0 = time.perf_counter(); import numpy as np; "
        "from marl.envs.smac.batched_env import BatchedStarCraft2Env; "
        "e = BatchedStarCraft2Env('3m', 1, 0); e.reset(); e.step(np.ones((1, 3), int)); "
        "e.engine.avail_actions(); print(time.perf_counter() - t0)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, NUMBA_CACHE_DIR=tmp),
            check=True,
        )
    return float(out.stdout.strip().splitlines()[-1])


def bench_smax(name: str, n_envs: int, seconds: float) -> dict | None:
    """Run the SMAX worker in the bench venv; None (with a message) if that venv is missing."""
    if not BENCH_PY.exists():
        print(f"SMAX skipped: {BENCH_PY} missing (make bench-env)")
        return None
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [str(BENCH_PY), str(SMAX_WORKER), smax_scenario(name), str(n_envs), str(seconds)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if out.returncode != 0:
        print(f"SMAX {name} x{n_envs} failed:\n{out.stderr[-2000:]}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per cell")
    ap.add_argument("--maps", nargs="+", default=list(MAPS))
    ap.add_argument("--envs", nargs="+", type=int, default=list(N_ENVS))
    ap.add_argument(
        "--threads", type=int, default=0, help="our engine's threads for the headline (0 = all cores, as XLA)"
    )
    ap.add_argument(
        "--out", default=None, help="results file (default benchmarks/results/sim_throughput[_smacv2].md)"
    )
    ap.add_argument(
        "--smacv2", action="store_true", help="SMACv2 scenarios (default protoss_10_vs_10) vs SMAX"
    )
    args = ap.parse_args(argv)
    run, shown = harness.start(), sys.argv[1:] if argv is None else argv
    results = ROOT / "benchmarks" / "results"
    if args.smacv2:
        from benchmarks.throughput.smacv2_throughput import SMACV2_OUT, smacv2_main

        maps = args.maps if args.maps != list(MAPS) else ["protoss_10_vs_10"]
        out = args.out or results / SMACV2_OUT
        return smacv2_main(maps, args.envs, args.seconds, args.threads, out, (run, shown))
    args.out = args.out or str(results / "sim_throughput.md")
    cold = cold_compile_seconds()
    print(f"cold Numba compile: {cold:.1f} s", flush=True)
    rows = []
    for name in args.maps:
        for n in args.envs:
            load0 = os.getloadavg()[0]
            full = bench_full(name, n, args.seconds, args.threads)
            full1 = bench_full(name, n, args.seconds, 1)
            ref = bench_full(name, n, args.seconds, args.threads, fused=False)
            ours = bench_ours(name, n, args.seconds, args.threads)
            roll = bench_rollout(name, n, args.seconds, args.threads)
            smax = bench_smax(name, n, args.seconds)
            load1 = os.getloadavg()[0]
            rows.append((name, n, full, full1, ref, ours, roll, smax, load0, load1))
            s = f"{smax['sps']:.0f}" if smax else "n/a"
            print(
                f"{name} x{n}: full env step {full['sps']:.0f} sps ({full1['sps']:.0f} on 1 thread, "
                f"{ref['sps']:.0f} stage by stage), "
                f"engine only {ours['sps']:.0f} sps, rollout {roll['sps']:.0f} sps, "
                f"SMAX {s} (load {load0:.1f} -> {load1:.1f})",
                flush=True,
            )
    peer = next((r[7] for r in rows if r[7]), None)
    versions = f"jax {peer['jax']}, jaxmarl {peer['jaxmarl']}" if peer else "SMAX not run"

    lines = [
        "# Our SMAC env vs JaxMARL SMAX: env steps per second",
        "",
        *harness.header_lines(run, __file__, shown),
        f"- peer versions ({BENCH_PY.parent.parent.name}): {versions}",
        f"- timed {args.seconds}s per cell and side; random available actions; finished envs reset",
        f"- our cold Numba compile (empty cache, import + reset + first full step of 3m): {cold:.1f} s; "
        "later processes load the on-disk cache",
        "- **full** = `BatchedStarCraft2Env.step` with obs + state + avail + reward + end for every env "
        "(like-for-like with SMAX's step; the headline), one compiled call per step (`fused.py`); "
        "**stage by stage** = the same step with `fused=False` (its readable reference, one Python call per "
        "stage); **engine** = `BatchedSimEngine` only",
        f"- ours on `threads={args.threads}` ({resolve_threads(args.threads)} threads; "
        "XLA also uses every core); "
        "**full 1t** = the same full step on one thread; **rollout** = `random_rollout`: 100 random steps of "
        "the full env per compiled call, auto-reset, on the same threads (like-for-like with SMAX's scan)",
        "- SMAX = `HeuristicEnemySMAX` jitted step incl. obs/reward/auto-reset; ratios against its "
        "per-step column, `scan` = 100 steps in one `lax.scan`",
        "",
        "| map | n_envs | ours full sps | ours full 1t sps | ours stage by stage sps | ours engine sps "
        "| ours rollout sps "
        "| SMAX sps (jit step) | SMAX sps (scan 100) | full/SMAX step | full/SMAX scan | rollout/SMAX scan "
        "| engine/SMAX step | SMAX compile s | load before→after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, full, full1, ref, ours, roll, smax, load0, load1 in rows:
        sps = (full["sps"], full1["sps"], ref["sps"], ours["sps"], roll["sps"])
        ours_cells = f"| {name} | {n} | " + " | ".join(f"{x:.0f}" for x in sps) + " "
        if smax:
            lines.append(
                ours_cells
                + f"| {smax['sps']:.0f} | {smax['scan_sps']:.0f} | {full['sps'] / smax['sps']:.2f} | "
                f"{full['sps'] / smax['scan_sps']:.2f} | {roll['sps'] / smax['scan_sps']:.2f} | "
                f"{ours['sps'] / smax['sps']:.2f} | {smax['compile_s']:.1f} | {load0:.1f}→{load1:.1f} |"
            )
        else:
            lines.append(
                ours_cells + f"| n/a | n/a | n/a | n/a | n/a | n/a | n/a | {load0:.1f}→{load1:.1f} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
