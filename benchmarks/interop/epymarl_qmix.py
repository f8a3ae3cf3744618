#!/usr/bin/env python
"""EPyMARL's QMIX trained on our SMAC engine through EPyMARL's ``gymma`` env (an interop benchmark).

EPyMARL (Papoudakis et al., 2021, github.com/uoe-agents/epymarl) is not part of this project: the user clones
it and makes a Python with its requirements, torch and this package's engine-only install (``pip install .``),
then points ``--epymarl`` and ``--python`` at them (README, "In other libraries"). This script runs
``src/main.py --config=qmix --env-config=gymma with env_args.key=marl.envs.smac.gym_view:marl/<map>-v0``,
reads the run's Sacred logs (``results/sacred/.../metrics.json``) while it trains, stops it at the first
greedy test (EPyMARL's ``test_nepisode`` episodes) with a win rate >= ``--target`` or when ``--budget-s`` runs
out, and appends the figures (env steps and wall-clock to the target, env steps/s) to
``benchmarks/results/epymarl_qmix.md``, beside our own QMIX's figures on the same map when ``--ours-md``
names a table written by ``benchmarks/learning/learn_smac.py``.

**EPyMARL's gymma wrapper is patched at run time** (``--unpatched`` runs it as it is): its ``get_state()``
returns the concatenated observations and its ``get_avail_actions()`` marks every action available, whatever
the env offers; with our env, which declares ``state_size``, the unpatched wrapper fails at the first step
(its state size is ours, 48 on 3m, its states are 90 long). The launcher below replaces these two methods,
in memory, by calls to the env's own ``get_state()`` and ``get_avail_actions()`` (what EPyMARL's SMAClite
wrapper calls) and changes nothing else; EPyMARL's files are not modified.

    python benchmarks/interop/epymarl_qmix.py --epymarl ~/epymarl --python ~/venvs/epymarl/bin/python --map 3m
    python benchmarks/interop/epymarl_qmix.py ... --preset pymarl2 --ours-md <scratch>/learn_3m.md \\
        --budget-s 2700
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
KEY = (
    "marl.envs.smac.gym_view:marl/{}-v0"  # Gymnasium imports the module before ':', which registers the maps
)

# Overrides of EPyMARL's own QMIX config (src/config/algs/qmix.yaml + envs/gymma.yaml) per preset.
PRESETS: dict[str, list[str]] = {
    "epymarl": [],  # EPyMARL's QMIX as it ships
    # As close to our QMIX (pymarl2's tuned settings, configs/algs/qmix.yaml) as EPyMARL's options go. Left
    # different: EPyMARL's Q-learner has 1-step targets (ours TD(lambda=0.6)) and counts the target update in
    # training steps (one per 8-env batch: 25 = our 200 episodes).
    "pymarl2": [
        "lr=0.001",
        "batch_size=128",
        "runner=parallel",
        "batch_size_run=8",
        "epsilon_anneal_time=100000",
        "use_rnn=True",
        "obs_last_action=True",
        "standardise_rewards=False",
        "target_update_interval_or_tau=25",
    ],
}

LAUNCHER = """
import logging, os, runpy, sys
import numpy as np
main = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.dirname(main))
from envs import gymma
def get_state(self):
    return np.asarray(self._env.unwrapped.get_state(), dtype=np.float32)
def get_avail_actions(self):
    return [[int(a) for a in row] for row in self._env.unwrapped.get_avail_actions()]
gymma.GymmaWrapper.get_state = get_state
gymma.GymmaWrapper.get_avail_actions = get_avail_actions
logging.getLogger("numba").setLevel(logging.WARNING)  # EPyMARL's root logger is at DEBUG
sys.argv = sys.argv[1:]
runpy.run_path(main, run_name="__main__")
"""


def build_command(
    python: str,
    epymarl: Path,
    map_name: str,
    seed: int,
    t_max: int,
    preset: str,
    *,
    time_limit: int = 60,
    test_interval: int = 10_000,
    test_nepisode: int = 100,
    patched: bool = True,
    extra: list[str] | None = None,
) -> list[str]:
    """The EPyMARL command line (its Sacred ``with`` overrides) for one run."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    main = str(Path(epymarl) / "src" / "main.py")
    head = [python, "-c", LAUNCHER, main] if patched else [python, main]
    overrides = [
        f"env_args.key={KEY.format(map_name)}",
        f"env_args.time_limit={time_limit}",
        f"seed={seed}",
        f"t_max={t_max}",
        "use_cuda=False",
        f"test_interval={test_interval}",
        f"test_nepisode={test_nepisode}",
        f"log_interval={test_interval}",
        f"runner_log_interval={test_interval}",
        f"learner_log_interval={test_interval}",
        *PRESETS[preset],
        *(extra or []),
    ]
    return [*head, "--config=qmix", "--env-config=gymma", "with", *overrides]


def _epoch(stamp: str) -> float:
    """Sacred's timestamps are naive UTC ISO strings."""
    return dt.datetime.fromisoformat(stamp).replace(tzinfo=dt.timezone.utc).timestamp()


def parse_metrics(metrics: dict, launch: float, target: float) -> dict:
    """Figures from a Sacred ``metrics.json``: first greedy test at ``target``, env steps/s, best test."""
    test = metrics.get("test_battle_won_mean", {"steps": [], "values": [], "timestamps": []})
    steps = [int(t) for t in test["steps"]]
    wins = [float(v) for v in test["values"]]
    stamps = [_epoch(s) for s in test["timestamps"]]
    hit = next((i for i, w in enumerate(wins) if w >= target), None)
    last_t = max((int(t) for m in metrics.values() for t in m["steps"]), default=0)
    last_s = max((_epoch(s) for m in metrics.values() for s in m["timestamps"]), default=launch)
    out = {
        "reached": hit is not None,
        "t_env": steps[hit] if hit is not None else None,
        "win": wins[hit] if hit is not None else None,
        "launch_s": stamps[hit] - launch if hit is not None else None,
        "best": max(wins, default=float("nan")),
        "tests": len(wins),
        "t_end": last_t,
        "end_s": last_s - launch,
    }
    out["steps_per_s"] = (
        out["t_env"] / out["launch_s"] if hit is not None else last_t / max(out["end_s"], 1e-9)
    )
    return out


def parse_learn_smac(text: str, map_name: str) -> list[dict]:
    """Rows for ``map_name`` from the per-seed table ``benchmarks/learning/learn_smac.py`` writes."""
    rows, header = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:3] == ["map", "seed", "reached"]:
            header = cells
        elif header and len(cells) == len(header) and cells[0] == map_name:
            rec = dict(zip(header, cells, strict=True))
            rows.append(
                {
                    "seed": int(rec["seed"]),
                    "reached": rec["reached"] == "yes",
                    "t_env": int(rec["t_env at target"].replace(",", ""))
                    if rec["reached"] == "yes"
                    else None,
                    "launch_min": rec["since launch"],
                }
            )
        elif not line.strip().startswith("|"):
            header = None
    return rows


def _run_dir(base: Path, after: float) -> Path | None:
    """The Sacred run folder written since ``after`` (EPyMARL: results/sacred/<alg>/<key>/<id>/run.json)."""
    fresh = [p for p in base.glob("**/run.json") if p.stat().st_mtime >= after]
    return max(fresh, key=lambda p: p.stat().st_mtime).parent if fresh else None


def _versions(python: str, epymarl: Path) -> str:
    """Package versions in ``python`` and EPyMARL's commit (and whether its ``src/`` was changed)."""
    names = ("torch", "sacred", "numpy", "gymnasium", "numba", "marl")
    code = f"import importlib.metadata as m; print(', '.join(f'{{p}} {{m.version(p)}}' for p in {names!r}))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
    ms = subprocess.run([python, "-c", "import mindspore"], capture_output=True, timeout=120).returncode == 0
    git = ["git", "-C", str(epymarl)]
    head = subprocess.run([*git, "log", "-1", "--format=%h %cs"], capture_output=True, text=True).stdout
    dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True).stdout
    state = "its src/ modified" if dirty.strip() else "its src/ unmodified"
    where = "MindSpore installed" if ms else "no MindSpore"
    return f"{out}; {where}; EPyMARL {head.strip() or 'unknown (not a git checkout)'}, {state}"


def train(cmd: list[str], epymarl: Path, target: float, budget_s: float, log: Path) -> tuple[dict, dict]:
    """Run EPyMARL, stop it at the target or the budget; returns (figures, run facts)."""
    base = epymarl / "results" / "sacred"
    launch = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, cwd=epymarl, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        loads, run_dir, why = [], None, "EPyMARL exited by itself"
        while proc.poll() is None:
            time.sleep(5.0)
            loads.append(os.getloadavg()[0])
            run_dir = run_dir or _run_dir(base, launch)
            metrics = run_dir / "metrics.json" if run_dir else None
            if metrics and metrics.is_file():
                try:
                    figs = parse_metrics(json.loads(metrics.read_text()), launch, target)
                except (json.JSONDecodeError, KeyError):
                    continue  # Sacred is rewriting the file
                if figs["reached"]:
                    why = f"stopped at the first test at >= {target:.2f}"
                    break
            if time.time() - launch > budget_s:
                why = f"stopped by the {budget_s / 60:.0f}-minute budget"
                break
        wall = time.time() - launch
        if proc.poll() is None:
            # EPyMARL's loop may not stop on SIGINT; the figures come from Sacred's last heartbeat anyway
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    run_dir = run_dir or _run_dir(base, launch)
    metrics_file = run_dir / "metrics.json" if run_dir else None
    metrics = json.loads(metrics_file.read_text()) if metrics_file and metrics_file.is_file() else {}
    figs = parse_metrics(metrics, launch, target)
    load = (min(loads), max(loads)) if loads else (float("nan"),) * 2
    errors = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if "Error: " in ln]
    facts = {"wall": wall, "why": why, "load": load, "rc": proc.returncode, "run_dir": run_dir}
    return figs, {**facts, "error": errors[-1] if errors else None}


def section(
    args: argparse.Namespace,
    cmd: list[str],
    figs: dict,
    facts: dict,
    versions: str,
    ours: list,
    run: harness.Run,
) -> str:
    """The Markdown section for one run (its header from the harness, since ``run``)."""
    shown = " ".join(cmd[:2] + ["<launcher: patches gymma, runs main.py>"] + cmd[3:] if args.patched else cmd)
    shown = shown.replace(str(args.epymarl.resolve()), "<epymarl checkout>")
    shown = shown.replace(str(args.python), "<epymarl venv python>")  # no path outside the repository
    reached = (
        f"failed: `{facts['error']}`"
        if facts["error"] and not figs["tests"]
        else f"{figs['t_env']:,} env steps (test win rate {figs['win']:.2f}), {figs['launch_s'] / 60:.1f} min"
        if figs["reached"]
        else f"not reached (best {figs['best']:.2f} over {figs['tests']} tests)"
    )
    lines = [
        f"## {args.map}, EPyMARL QMIX, preset `{args.preset}`, seed {args.seed}"
        + ("" if args.patched else " (gymma unpatched)"),
        "",
        *harness.header_lines(run, __file__, sys.argv[1:], python="python"),
        f"- EPyMARL command (in the checkout): `{shown}`",
        f"- 1-min load during the run {facts['load'][0]:.1f}–{facts['load'][1]:.1f}",
        f"- EPyMARL's versions: {versions}",
        "- gymma: "
        + (
            "patched at run time (state = the env's `get_state()`, masks = its `get_avail_actions()`)"
            if args.patched
            else "as EPyMARL ships it (state = concatenated observations, every action marked available)"
        ),
        f"- end: {facts['why']}; exit code {facts['rc']}; {figs['tests']} tests; "
        f"stop decided at {facts['wall'] / 60:.1f} min; last log at {figs['t_end']:,} env steps, "
        f"{figs['end_s'] / 60:.1f} min after launch",
        "",
        "| who | target (greedy test win rate) | reached at | env steps/s (t_env / time since launch) |",
        "|---|---|---|---|",
        f"| EPyMARL QMIX (`{args.preset}`) | ≥ {args.target:.2f} ({args.test_nepisode} episodes) | {reached} "
        f"| {'—' if facts['error'] and not figs['tests'] else format(figs['steps_per_s'], ',.0f')} |",
    ]
    for r in ours:
        at = f"{r['t_env']:,} env steps, {r['launch_min']} since launch" if r["reached"] else "not reached"
        rate = ""
        if r["reached"] and r["launch_min"].endswith(" min"):
            rate = f"{r['t_env'] / (float(r['launch_min'].split()[0]) * 60):,.0f}"
        lines.append(
            f"| our QMIX (seed {r['seed']}, `{args.ours_md}`) | ≥ 0.95 (32 episodes) | {at} | {rate} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--epymarl", required=True, type=Path, help="an EPyMARL checkout (the folder holding src/)"
    )
    p.add_argument("--python", required=True, help="a Python with EPyMARL's requirements and this package")
    p.add_argument("--map", default="3m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preset", default="epymarl", choices=sorted(PRESETS))
    p.add_argument("--t-max", type=int, default=5_000_000)
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--budget-s", type=float, default=2700.0, help="wall-clock budget of the run")
    p.add_argument("--test-interval", type=int, default=10_000, help="env steps between tests (ours: 10000)")
    p.add_argument(
        "--test-nepisode", type=int, default=100, help="greedy test episodes (EPyMARL's gymma: 100)"
    )
    p.add_argument("--unpatched", dest="patched", action="store_false", help="run gymma as EPyMARL ships it")
    p.add_argument(
        "--ours-md", help="a table written by benchmarks/learning/learn_smac.py on the same machine"
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "epymarl_qmix.md")
    p.add_argument("extra", nargs="*", help="more EPyMARL overrides, key=value")
    args = p.parse_args()
    if not (args.epymarl / "src" / "main.py").is_file():
        p.error(f"--epymarl {args.epymarl} has no src/main.py: give the folder of an EPyMARL checkout")
    cmd = build_command(
        args.python,
        args.epymarl.resolve(),
        args.map,
        args.seed,
        args.t_max,
        args.preset,
        test_interval=args.test_interval,
        test_nepisode=args.test_nepisode,
        patched=args.patched,
        extra=args.extra,
    )
    ours = parse_learn_smac(Path(args.ours_md).read_text(), args.map) if args.ours_md else []
    versions = _versions(args.python, args.epymarl)
    log = Path(tempfile.gettempdir()) / f"epymarl_qmix_{args.map}_{args.preset}_seed{args.seed}.log"
    print(f"[epymarl] running (output in {log})", flush=True)
    run = harness.start()
    figs, facts = train(cmd, args.epymarl.resolve(), args.target, args.budget_s, log)
    text = section(args, cmd, figs, facts, versions, ours, run)
    print(text)
    if facts["rc"] not in (0, None, -signal.SIGINT) and not figs["tests"]:
        print(log.read_text()[-3000:], file=sys.stderr)
    new = not args.out.is_file()
    with open(args.out, "a") as f:
        f.write(("# EPyMARL's QMIX on our SMAC engine (gymma)\n\n" if new else "\n") + text)
    print(f"[epymarl] appended to {args.out}")


if __name__ == "__main__":
    main()
