"""How many times does a cold start compile each of the engine's Numba kernels? (Once, since 2026-11-30.)

Numba compiles a function once for every distinct tuple of argument types it meets (``marl/envs/smac/sim/
jit.py``, "One type per argument"). This runs the engine's paths in a child process whose Numba cache
(``NUMBA_CACHE_DIR``) starts empty: SMAC's fused step on MMM and a deep copy of it, the serial and the
threaded engine, the unit-table path of the real game, SMACv2's batched env serial and threaded, and the
feature layer given a batch of separate float32 arrays (as ``benchmarks/fidelity`` builds the recorded
states). It then reads the cache's index files and lists every kernel compiled for more than one type
tuple, with the child's CPU time and the size of what it compiled. ``--source`` runs another checkout's
``marl`` (e.g. a worktree of an older commit) for a before/after, ``--append`` adds its section to the
result file.

    python benchmarks/research/numba_variants.py
    python benchmarks/research/numba_variants.py --source ../old-checkout --append
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import harness  # noqa: E402

CHILD = r"""
import copy
import numpy as np
from marl.envs.smac import StarCraft2Env
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.features import Units
from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.engine import BatchedSimEngine, SimEngine
from marl.envs.smac.smacv2.batched import BatchedSMACv2Env

class Tables:  # the engine as the real game's backend gives it: unit tables
    def __init__(self, spec): self.sim = SimEngine(spec, seed=0)
    def reset(self): return self.sim.reset()
    def step(self, actions): return self.sim.step(actions)
    def seed(self, seed): self.sim.seed(seed)

spec = load_map("MMM")
env = BatchedStarCraft2Env("MMM", 2, seed=0)
env.reset()
stop = np.ones((2, env.n_agents), dtype=np.int64)
env.step(stop)
copy.deepcopy(env).step(stop)
for threads in (1, 2):
    eng = BatchedSimEngine(spec, 2, seed=0, threads=threads)
    eng.reset()
    eng.step(stop)
    v2 = BatchedSMACv2Env("protoss_5_vs_5", 2, seed=0, threads=threads)
    v2.reset()
    v2.step(np.ones((2, v2.n_agents), dtype=np.int64))
tables = StarCraft2Env("MMM", engine=Tables(spec))
tables.reset()
tables.step([1] * tables.n_agents)
u = BatchedSimEngine(spec, 2, seed=0).reset().units()
cols = (u.pos, u.health, u.shield, u.cooldown, u.energy)  # as separate float32 arrays: fidelity's states
plain = Units(u.n_agents, *(np.array(c, dtype=np.float32) for c in cols), u.health_max)
env.features.observe(plain, np.zeros((2, env.n_agents, env.n_actions), np.float32), np.zeros(2, np.int64))
env.features.reward_and_end(plain, plain, np.zeros((2, plain.health.shape[1]), bool))
"""


def variants(cache: Path) -> dict[str, int]:
    """``{module.function: number of compiled type tuples}`` from the index files (``*.nbi``) of a Numba
    cache folder: a version pickle, then a pickle of (source stamp, {(signature, target, ...): file})."""
    out = {}
    for index in sorted(cache.rglob("*.nbi")):
        with index.open("rb") as f:
            pickle.load(f)
            _, overloads = pickle.loads(f.read())
        out[re.sub(r"-\d+\.py\d+\.nbi$", "", index.name)] = len(overloads)  # <module>.<function>-<line>...
    return out


def measure(source: Path) -> tuple[dict[str, int], float, int, int]:
    """Run the paths with ``source``'s ``marl`` on an empty cache: (variants, child CPU s, files, bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp, "PYTHONPATH": str(source)}
        cpu0 = harness.cpu_seconds()
        harness.run_command([sys.executable, "-c", CHILD], env=env, cwd=str(source))
        cpu = harness.cpu_seconds() - cpu0
        files = list(Path(tmp).rglob("*.nbc"))
        return variants(Path(tmp)), cpu, len(files), sum(f.stat().st_size for f in files)


def checkout(source: Path) -> str:
    """``source`` as a result file names it, with its commit (and whether it has uncommitted changes)."""
    from marl.provenance import code_version

    where = "this checkout" if source == harness.ROOT else harness.shown(str(source))
    code = code_version(source)
    if not code["commit"]:  # not a git checkout
        return where
    return f"{where}, commit {code['commit'][:7]}" + (" with uncommitted changes" if code["dirty"] else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, default=harness.ROOT, help="checkout whose marl to run")
    p.add_argument("--out", default=str(harness.RESULTS / "numba_variants.md"), help="result file; - prints")
    p.add_argument("--append", action="store_true", help="add a section to the result file")
    args = p.parse_args()
    run = harness.start()
    t0 = time.time()
    found, cpu, n_files, size = measure(args.source.resolve())
    wall = time.time() - t0
    more = {k: v for k, v in sorted(found.items()) if v > 1}
    lines = [
        *([] if args.append else ["# Numba compiles of the engine's paths on a cold cache", ""]),
        f"## {checkout(args.source.resolve())}",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:]),
        "",
        f"{len(found)} kernels, {sum(found.values())} compiles ({n_files} cache files, {size / 1e6:.1f} MB); "
        f"the child process: {cpu:.0f} s of CPU, {wall:.0f} s wall.",
        "",
        "| kernel compiled more than once | type tuples |",
        "|---|---|",
        *[f"| `{k}` | {v} |" for k, v in more.items()],
        *([] if more else ["| (none) | |"]),
    ]
    text = "\n".join(lines) + "\n"
    if args.out != "-":
        out = Path(args.out)
        before = out.read_text(encoding="utf-8") + "\n" if args.append and out.exists() else ""
        out.write_text(before + text, encoding="utf-8")
    print(text, end="")


if __name__ == "__main__":
    main()
