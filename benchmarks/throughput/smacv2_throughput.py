"""SMACv2 scenarios: env steps per second of our batched env vs JaxMARL SMAX's SMACv2-style scenario.

    .venv/bin/python benchmarks/throughput/sim_throughput.py --smacv2  # results/sim_throughput_smacv2.md

Ours: ``BatchedSMACv2Env.step`` (marl/envs/smac/smacv2/batched.py: engine, SMACv2's observations with EPO,
state, avail, reward, end; every reset draws a new team and start positions), beside the per-row path the
trainer used before (one ``SMACv2Env`` per env, stepped in turn). SMAX: ``HeuristicEnemySMAX`` with the
scenario ``smacv2_<n>_units`` (jaxmarl ``environments/smax/smax_env.py``, ``MAP_NAME_TO_SCENARIO``: n vs n
with ``smacv2_position_generation`` = SMACv2's surround-and-reflect start positions and
``smacv2_unit_type_generation`` = unit types drawn uniformly from SMAX's six, the enemies mirroring the
allies), run by ``sim_throughput.py``'s SMAX worker in ``.venv-bench``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.throughput.sim_throughput import BENCH_PY, bench_full, bench_smax, smax_scenario, steady_rate
from marl.envs.smac.threads import resolve_threads


def bench_rows(name: str, n_envs: int, seconds: float) -> dict:
    """Steps per second of ``n_envs`` ``SMACv2Env`` stepped one after another (the per-row path)."""
    from marl.envs.smac.sim.avail import sample_available
    from marl.envs.smac.smacv2.env import SMACv2Env

    envs = [SMACv2Env(name, seed=e) for e in range(n_envs)]
    for env in envs:
        env.reset()
    rs = np.random.default_rng(0)

    def one() -> None:
        for env in envs:
            avail = np.asarray(env.get_avail_actions(), dtype=bool)[None]
            _, done, _ = env.step(sample_available(avail, rs.random((1, env.n_agents)))[0])
            if done:
                env.reset()

    return {"sps": steady_rate(one, n_envs, seconds)}


SMACV2_OUT = "sim_throughput_smacv2.md"


def smacv2_main(
    maps: list[str],
    n_envs: list[int],
    seconds: float,
    threads: int,
    out: str | Path,
    started: tuple[harness.Run, list[str]] | None = None,
) -> None:
    """Time SMACv2 scenarios (batched, 1 thread, per-row) and SMAX's same-size scenario; write ``out``.
    ``started``: the run's start and command-line arguments (``sim_throughput.py --smacv2``); by default
    now and the arguments of the equivalent command."""
    run, shown = started or (
        harness.start(),
        ["--smacv2", "--maps", *maps, "--envs", *map(str, n_envs), "--seconds", f"{seconds:g}",
         "--threads", str(threads), "--out", str(out)],
    )  # fmt: skip
    rows = []
    for name in maps:
        for n in n_envs:
            load0 = os.getloadavg()[0]
            full = bench_full(name, n, seconds, threads)
            full1 = bench_full(name, n, seconds, 1)
            per_row = bench_rows(name, n, seconds)
            smax = bench_smax(name, n, seconds)
            rows.append((name, n, full, full1, per_row, smax, load0, os.getloadavg()[0]))
            peer = f"{smax['sps']:.0f}" if smax else "n/a"
            print(f"{name} x{n}: batched {full['sps']:.0f} ({full1['sps']:.0f} on 1 thread), per-row "
                  f"{per_row['sps']:.0f}, SMAX {peer}", flush=True)  # fmt: skip
    peer = next((r[5] for r in rows if r[5]), None)
    versions = f"jax {peer['jax']}, jaxmarl {peer['jaxmarl']}" if peer else "SMAX not run"
    lines = [
        "# SMACv2 scenarios: our batched env vs JaxMARL SMAX's SMACv2-style scenario, env steps per second",
        "",
        *harness.header_lines(run, Path(__file__).with_name("sim_throughput.py"), shown),
        f"- peer versions ({BENCH_PY.parent.parent.name}): {versions}",
        f"- timed {seconds}s per cell and side; random available actions; ended envs reset (ours draw a new "
        "team and start positions at every reset)",
        "- **batched** = `BatchedSMACv2Env.step` (engine + SMACv2's obs with EPO, state, avail, reward, "
        f"end) on `threads={threads}` ({resolve_threads(threads)} threads); **1t** = one thread; "
        "**per-row** = one `SMACv2Env` per env stepped in turn (the trainer's path before the batched one)",
        "- SMAX = `HeuristicEnemySMAX` jitted step with `smacv2_<n>_units` (n vs n, SMACv2's "
        "surround-and-reflect positions, unit types uniform over SMAX's 6 types of all races, episodes of "
        "at most 100 steps; ours: one race's SMACv2 team distribution, 200 steps); `scan` = 100 steps in "
        "one `lax.scan`",
        "",
        "| scenario | SMAX scenario | n_envs | ours batched sps | ours batched 1t sps | ours per-row sps "
        "| SMAX sps (jit step) | SMAX sps (scan 100) | batched/SMAX step | batched/SMAX scan "
        "| load before→after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, full, full1, per_row, smax, load0, load1 in rows:
        peer_cells = (
            f"{smax['sps']:.0f} | {smax['scan_sps']:.0f} | {full['sps'] / smax['sps']:.2f} | "
            f"{full['sps'] / smax['scan_sps']:.2f}"
            if smax
            else "n/a | n/a | n/a | n/a"
        )
        lines.append(
            f"| {name} | {smax_scenario(name)} | {n} | {full['sps']:.0f} | {full1['sps']:.0f} | "
            f"{per_row['sps']:.0f} | {peer_cells} | {load0:.1f}→{load1:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
