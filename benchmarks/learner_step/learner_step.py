"""QMIX learner-step benchmark: marl (MindSpore) vs PyTorch eager, ``torch.compile`` and JAX, same run.

All contenders run the same maths on the same batches from the same initial weights (MindSpore's, copied
over; the first losses are compared): RNN agent (Dense 64 -> GRUCell -> Dense), QMIX mixer (embed 32,
two-layer hypernets of 64), target nets, double Q, TD(lambda) targets, 0.5 * masked MSE, grad-norm
clipping at 10 and Adam -- the defaults of ``LearnerConfig``. Batch: 32 episodes x (episode_limit + 1)
slots, the first episode full length, the others 20..limit. Steps alternate in blocks between the
contenders so all see the same machine load.

* ``ms``: marl's ``QLearner.train`` on one padded batch (``learner.length_groups: 1``; one ``ms.jit``
  graph), the same episodes x slots, masking and loss as every peer: the peers are handed the whole padded
  batch, so this is the like-for-like row. ``ms-groups``: the same learner with the training default
  ``length_groups: 2`` (the batch's longest eighth trained apart, each part over its own bucketed length;
  fewer slots, more graphs), listed beside it as a variant: on these batches (the first episode at the
  limit, the rest 20..limit) the split saves 0-10 % of the slots, so the row shows what the split costs.
  ``torch``: the pymarl2-style step in PyTorch eager (``torch_qmix_step.py``). ``torch-compile``: the same
  step under ``torch.compile``.
* ``jax``: one ``jax.jit`` function for the whole step, GRU in ``lax.scan`` (``jax_qmix_step.py``). JAX
  needs NumPy 2, so it runs in the bench venv (``make bench-env``) as a worker process fed through an
  ``.npz`` and answering "run k steps" requests, so its blocks still alternate with the others.

The peers are written in every layout an expert would try (``jax_qmix_layouts.py``, ``torch_qmix_step.py``).
With more than one layout given (``--jax-layouts``, ``--torch-compile-layouts``; ``screen``: the default
set), each is compiled and run ``--screen-steps`` steps in turn (round robin, per map), the fastest median
becomes the contender and every layout's time is listed under the table. For JAX, ``screen`` then also tries
the layout combining the fastest choice of each kind. One thread each, checked: every process is pinned to
one CPU (``--pin-cpu``) and the CPU time per step is reported beside the wall time (CPU/wall above 1.05
would show a second thread at work).

Map sizes (agents, obs, state, actions, episode limit) come from the project's SMAC map data
(``StarCraft2Env.get_env_info``). GFLOP/s counts the matmul FLOPs of one step (:func:`step_matmul_flops`).
Results are appended to ``results/learner_step.md`` as a dated section.

    .venv/bin/python benchmarks/learner_step/learner_step.py [--steps 40] \\
        [--map-sizes 3m,8m,27m_vs_30m (default)]
        [--contenders ms,torch,torch-compile,jax] [--jax-python .venv-bench/bin/python]
        [--jax-layouts screen] [--torch-compile-layouts screen] [--screen-steps 4] [--pin-cpu auto]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.learner_step.jax_qmix_layouts import parse_layout, screening_layouts  # noqa: E402
from benchmarks.learner_step.jax_qmix_step import JaxWorker, write_npz  # noqa: E402
from benchmarks.learner_step.qmix_workload import batch_arrays, map_info, step_matmul_flops, synthetic_batch  # noqa: E402
from benchmarks.learner_step.step_contenders import (  # noqa: E402
    Contender,
    jax_contender,
    loop,
    pin,
    screening_table,
    timed,
    torch_compile_contender,
)
from benchmarks.learner_step.torch_qmix_step import parse_torch_layout, torch_peer  # noqa: E402
from marl.config.schema import AgentConfig, Config, ExplorationConfig, LearnerConfig  # noqa: E402
from marl.controllers import MultiAgentController  # noqa: E402
from marl.envs.base import EnvInfo  # noqa: E402
from marl.learners import QLearner  # noqa: E402
from marl.utils.ms import params_to_numpy, setup  # noqa: E402

__all__ = ["batch_arrays", "map_info", "step_matmul_flops", "synthetic_batch", "torch_peer"]
CONTENDERS = ("ms", "ms-groups", "torch", "torch-compile", "jax")
# torch.compile layouts screened by default: each compiles cold, 3-6 minutes at 3m sizes on a loaded 2-core
# machine (the Python loops unroll over time); a hoisted input projection ran 2.4x slower there
TORCH_SCREEN = ("default-breaks-loop", "default-graph-loop", "max-autotune-no-cudagraphs-graph-loop")
LABELS = {
    "ms": "MindSpore",
    "ms-groups": "MindSpore",
    "torch": "PyTorch eager",
    "torch-compile": "torch.compile",
    "jax": "JAX jit",
}


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def acting_latency(info: EnvInfo, learner: QLearner, envs: int, calls: int) -> float:
    """Median microseconds of ``select_actions`` (numpy obs -> numpy actions) for ``envs`` envs."""
    mac = MultiAgentController(
        info, AgentConfig(), ExplorationConfig(), seed=0, weights=learner.actor_weights()
    )
    obs = np.random.default_rng(0).normal(size=(envs, info.n_agents, info.obs_shape)).astype(np.float32)
    avail = np.ones((envs, info.n_agents, info.n_actions), np.int32)
    mac.init_hidden(envs)
    times = []
    for i in range(calls + 200):
        t0 = time.perf_counter()
        mac.select_actions(obs, avail, t_env=50_000, test_mode=False)
        if i >= 200:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


# ------------------------------------------------------------------------------------ contenders
def build_contenders(
    name: str, args: argparse.Namespace, notes: list[str], workers: list, record: list
) -> tuple:
    """Every chosen contender on map ``name``'s sizes, each after its first (compiling) step on batch 0."""
    info = map_info(name)
    cfg = Config(learner=LearnerConfig(batch_size=args.batch, use_jit=True, length_groups=1))
    batches = [synthetic_batch(info, args.batch, seed) for seed in range(4)]
    learner = QLearner(info, cfg)
    weights = params_to_numpy(learner.nets)
    arrays = [batch_arrays(b, cfg) for b in batches]
    out = []
    learners = [("ms", learner, "QLearner, one padded batch")]
    if "ms-groups" in args.contenders:  # the training default (length_groups 2), from the same weights
        grouped = QLearner(info, Config(learner=LearnerConfig(batch_size=args.batch, use_jit=True)))
        grouped.load_state_dict(learner.state_dict())
        learners.append(("ms-groups", grouped, "QLearner, length groups (training default)"))
    for key, lrn, layout in learners:
        out_ms, dt, _ = timed(lrn.train, batches[0], 0, 0)
        ms_step = loop(lambda b, lrn=lrn: lrn.train(b, 0, 0)["loss"], [[b] for b in batches])
        out.append(Contender(key, ms_step, out_ms["loss"], dt, layout=layout))
    torch_keys = [k for k in ("torch", "torch-compile") if k in args.contenders]
    if torch_keys:
        try:
            import torch
        except ImportError:
            notes.append("torch not installed (`pip install -e '.[bench]'`): torch contenders skipped")
            torch_keys = []
    tb = [[torch.from_numpy(x) for x in arr] for arr in arrays] if torch_keys else []
    if torch_keys:  # the analytic matmul count against torch's own FLOP counter, on a separate copy
        from torch.utils.flop_counter import FlopCounterMode

        torch.set_num_threads(args.torch_threads)
        with FlopCounterMode(display=False) as counter:
            torch_peer(info, cfg, weights)(*tb[0])
        flops = step_matmul_flops(info, cfg, args.batch, info.episode_limit + 1)
        notes.append(
            f"{name}: matmul FLOPs per step {flops:,} (analytic); torch.utils.flop_counter on the eager "
            f"step: {counter.get_total_flops():,}"
        )
    if "torch" in torch_keys:
        step = torch_peer(info, cfg, weights, layout="eager-loop")
        loss, dt, _ = timed(step, *tb[0])
        out.append(Contender("torch", loop(step, tb), loss, dt, layout="eager-loop"))
    if "torch-compile" in torch_keys:
        out.append(torch_compile_contender(info, cfg, weights, tb, name, args, record))
    if "jax" in args.contenders:
        if not Path(args.jax_python).exists():
            notes.append(f"{args.jax_python} missing (`make bench-env`): JAX skipped")
        else:
            names = (
                [x.name for x in screening_layouts()] if args.jax_layouts == "screen" else args.jax_layouts
            )
            with tempfile.TemporaryDirectory() as tmp:
                write_npz(Path(tmp) / "step.npz", info, cfg, weights, arrays)
                worker = JaxWorker(
                    args.jax_python, Path(tmp) / "step.npz", args.jax_threads, names, args.pin_cpu
                )
            workers.append(worker)
            out.append(jax_contender(worker, name, args, record))
            h = worker.hello
            if h["versions"] not in notes:
                notes.append(h["versions"])
            notes.append(f"{name}: JAX worker XLA_FLAGS `{h['xla_flags']}`, CPU affinity {h['affinity']}")
    return info, cfg, learner, out


def bench_map(name: str, args: argparse.Namespace, notes: list[str], record: list) -> list[str]:
    """Markdown table rows (and printed lines) for map ``name``'s sizes; screened layouts go to ``record``."""
    workers: list[JaxWorker] = []
    try:
        info, cfg, learner, cons = build_contenders(name, args, notes, workers, record)
        for i in range(3):  # warm-up (also updates: every contender sees the same batch sequence)
            for c in cons:
                c.run(1, i)
        done = 0
        while done < args.steps:
            for c in cons:
                c.block(args.block, done)
            done += args.block
    finally:
        for w in workers:
            w.close()
    t = info.episode_limit + 1
    flops = step_matmul_flops(info, cfg, args.batch, t)
    ms_med = statistics.median(cons[0].times)
    rows = []
    for c in cons:
        med = statistics.median(c.times)
        compile_s = c.compile_s if c.compile_s is not None else c.first_call_s - med
        rows.append(
            f"| {name} | {LABELS[c.key]} | {c.layout} | {med * 1e3:.1f} | {pct(c.times, 10) * 1e3:.1f} | "
            f"{pct(c.times, 90) * 1e3:.1f} | {statistics.median(c.cpu) * 1e3:.1f} | "
            f"{sum(c.cpu) / sum(c.times):.2f} | {med / ms_med:.2f}x | {flops / med / 1e9:.1f} | "
            f"{c.first_call_s:.1f} | {'-' if c.key == 'torch' else f'{compile_s:.1f}'} | {c.first_loss:.7f} |"
        )
        print(rows[-1], flush=True)
    diff = max(abs(c.first_loss - cons[0].first_loss) for c in cons)
    last = ", ".join(f"{LABELS[c.key]} {c.last_loss:.6f}" for c in cons)
    act = [acting_latency(info, learner, e, args.acting_calls) for e in (1, 8)]
    notes.append(
        f"{name}: {info.n_agents} agents, obs {info.obs_shape}, state {info.state_shape}, {info.n_actions} "
        f"actions, batch {args.batch} x {t} slots; {flops / 1e9:.2f} GFLOP of matmuls per step; first losses "
        f"agree to {diff:.1e} (max abs difference to MindSpore); loss of the last step, after "
        f"{3 + done} updates on the same batches: {last}; acting (NumPy actor) 1 env {act[0]:.0f} us, "
        f"8 envs {act[1]:.0f} us"
    )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per contender and map")
    ap.add_argument("--block", type=int, default=5, help="steps per alternating block")
    ap.add_argument("--batch", type=int, default=32, help="episodes per batch")
    ap.add_argument(
        "--map-sizes", default="3m,8m,27m_vs_30m", help="comma-separated SMAC maps whose sizes to use"
    )
    ap.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated; ms is always run")
    ap.add_argument("--ms-threads", type=int, default=1)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--jax-threads", type=int, default=1)
    ap.add_argument("--jax-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    ap.add_argument("--jax-layouts", default="screen", help="comma-separated JAX layouts, or screen (all)")
    ap.add_argument(
        "--torch-compile-layouts",
        default=",".join(TORCH_SCREEN),
        help="comma-separated torch.compile layouts",
    )
    ap.add_argument(
        "--torch-screen-every-map",
        action="store_true",
        help="screen the torch.compile layouts at every map (default: at the first; the rest run its winner)",
    )
    ap.add_argument("--screen-steps", type=int, default=4, help="steps per layout when screening layouts")
    ap.add_argument(
        "--pin-cpu",
        default="auto",
        help="CPU every contender is pinned to: N, auto (the last usable one) or none",
    )
    ap.add_argument("--acting-calls", type=int, default=2000)
    ap.add_argument("--note", default="", help="a line about the conditions (e.g. a shared machine)")
    ap.add_argument("--out", default=str(harness.RESULTS / "learner_step.md"))
    args = ap.parse_args()
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = sorted(set(args.contenders) - set(CONTENDERS))
    if bad:
        ap.error(f"unknown contenders {bad}; allowed: {', '.join(CONTENDERS)}")
    from marl.envs.smac import list_maps

    maps = [m.strip() for m in args.map_sizes.split(",") if m.strip()]
    unknown = sorted(set(maps) - set(list_maps()))
    if unknown or not maps:
        ap.error(f"unknown maps {unknown} in --map-sizes; known: {', '.join(list_maps())}")
    for key in ("steps", "block", "batch", "screen_steps"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} must be >= 1, got {getattr(args, key)}")
    try:
        if args.jax_layouts != "screen":
            args.jax_layouts = [parse_layout(x).name for x in args.jax_layouts.split(",")]
        args.torch_compile_layouts = [
            parse_torch_layout(x).name for x in args.torch_compile_layouts.split(",")
        ]
        if any(x.startswith("eager") for x in args.torch_compile_layouts):
            raise ValueError(
                "--torch-compile-layouts takes compiled layouts only (eager is the torch contender)"
            )
    except ValueError as exc:
        ap.error(str(exc))
    usable = sorted(os.sched_getaffinity(0))
    pins = {"auto": str(usable[-1]), "none": "-1"}
    if not pins.get(args.pin_cpu, args.pin_cpu).lstrip("-").isdigit() or (
        args.pin_cpu not in pins and int(args.pin_cpu) not in usable
    ):
        ap.error(f"--pin-cpu must be auto, none or one of the usable CPUs {usable}, got {args.pin_cpu!r}")
    args.pin_cpu = int(pins.get(args.pin_cpu, args.pin_cpu))
    args.usable_cpus = set(usable)
    args.pinned_cpus = {args.pin_cpu} if args.pin_cpu >= 0 else set(usable)
    pin(args.pinned_cpus)

    setup(args.ms_threads, seed=0)
    cache = None
    if "torch-compile" in args.contenders and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = tempfile.mkdtemp(prefix="inductor-")  # an empty cache: the compile time is a cold one
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    run, started = harness.start(), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    notes: list[str] = []
    header = (
        "| map | contender | layout | median ms | p10 | p90 | CPU ms | CPU/wall | vs MindSpore | GFLOP/s "
        "| first call s | compile s | first loss |"
    )
    print(header)
    record: list[dict] = []
    try:
        rows = [r for m in maps for r in bench_map(m, args, notes, record)]
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
    try:
        import torch

        torch_v = f"torch {torch.__version__}"
    except ImportError:
        torch_v = "no torch"
    md = [
        "",
        f"## {started}: MindSpore vs PyTorch eager, torch.compile and JAX ({', '.join(maps)} sizes)",
        "",
        *harness.header_lines(run, __file__, sys.argv[1:]),
        f"- {torch_v}; threads: MindSpore {args.ms_threads}, torch {args.torch_threads}, XLA "
        f"{args.jax_threads}; every process pinned to CPU {args.pin_cpu} (-1: not pinned); "
        f"MS_DEV_HOST_BLOCKING_RUN={os.environ.get('MS_DEV_HOST_BLOCKING_RUN')}",
        "- CPU ms: median process CPU time per step (all threads); CPU/wall: their sums' ratio, above 1.05 "
        "a second thread was at work; layout: the fastest of the screened ones (listed below the table); "
        "torch.compile compiles on every usable CPU (inductor's worker processes), then runs pinned",
        f"- {args.steps} timed steps per contender after 3 warm-up steps, alternating blocks of "
        f"{args.block}; compile s: first call minus the median step (JAX: its lower + compile time)",
        *[f"- {n}" for n in notes],
        *([f"- note: {args.note}"] if args.note else []),
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        *screening_table(record, args.screen_steps),
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        out.write_text("# Learner step benchmark (QMIX)\n")
    with out.open("a") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
