#!/usr/bin/env python
"""The SMAC paper's own code, pymarl, on our engine: is a gap to the game the engine's or our learner's?

The calibration benchmark (``benchmarks/learning/real_game_curves.py``) lays our ``*_smac_paper`` presets on
the engine over the SMAC paper's runs on the game. Where they disagree, two causes are possible: the engine
plays a different game, or our learner is not the paper's. This script removes the second: it runs pymarl
(oxwhirl/pymarl, the code the paper's runs were made with; the user clones it, ideally at commit a8f171b,
"Updating config files to SMAC v1 settings", whose configs the presets copy) with its own configs
(``--config=<alg> --env-config=sc2``) on our engine, and writes each run as a run record
(``pymarl_<alg>_<map>_seed<k>.json``) that ``real_game_curves.py report`` lays over the game's runs.

pymarl runs unmodified. A launcher, in memory, (1) makes ``smac.env.StarCraft2Env`` our env (pymarl imports
it from SMAC; ours takes every argument of pymarl's ``envs/sc2.yaml``), (2) restores two names Python 3.10+
and PyYAML 6 removed that pymarl's ``main.py`` uses (``collections.Mapping``; ``yaml.load`` without a
``Loader``, given ``FullLoader``), and (3) quiets Numba's logger (pymarl's root logger is at DEBUG).

The Python that runs pymarl needs torch, sacred, PyYAML, NumPy < 2 and this package's engine (no MindSpore):

    python -m venv ~/venvs/pymarl && ~/venvs/pymarl/bin/pip install torch sacred pyyaml "numpy<2" \\
        numba gymnasium pettingzoo pillow pygame-ce "setuptools<81"
    python benchmarks/interop/pymarl_paper.py run --pymarl ~/pymarl --python ~/venvs/pymarl/bin/python \\
        --alg qmix --map 3s5z --seed 0 --t-max 310000 --records benchmarks/results/runs/pymarl_paper
    python benchmarks/interop/pymarl_paper.py record ~/pymarl/results/sacred/7 --records DIR  # a finished run
    python benchmarks/learning/real_game_curves.py report --records benchmarks/results/runs/pymarl_paper \\
        --out benchmarks/results/real_game_curves_pymarl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks.interop.epymarl_qmix import _epoch, _run_dir  # noqa: E402
from marl.provenance import code_version, cpu_model  # noqa: E402
from marl.report.records import RECORD_FORMAT, RECORD_VERSION, record_name, write_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VERSIONS_FILE = "marl_versions.json"  # left in the Sacred run folder by `run`: what the run imported
ALGS = (
    "qmix",
    "vdn",
    "iql",
    "coma",
)  # pymarl's src/config/algs/*.yaml with a paper preset of the game's data
# pymarl's logged test curves -> the record's curves (marl.report.records.CURVE_KEYS and the return std)
CURVES = {
    "test_battle_won_mean": "test_win_rate",
    "test_return_mean": "test_return_mean",
    "test_return_std": "test_return_std",
}

LAUNCHER = """
import collections, collections.abc, logging, os, runpy, sys, types
import yaml
collections.Mapping = collections.abc.Mapping  # removed in Python 3.10; pymarl's main.py uses it
_load = yaml.load
yaml.load = lambda stream, Loader=yaml.FullLoader: _load(stream, Loader=Loader)  # PyYAML 6 needs a Loader
logging.getLogger("numba").setLevel(logging.WARNING)  # pymarl's root logger is at DEBUG
from marl.envs.base import MultiAgentEnv
from marl.envs.smac.env import StarCraft2Env
smac, env = types.ModuleType("smac"), types.ModuleType("smac.env")
env.StarCraft2Env, env.MultiAgentEnv, smac.env = StarCraft2Env, MultiAgentEnv, env
sys.modules["smac"], sys.modules["smac.env"] = smac, env
main = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.dirname(main))
sys.argv = sys.argv[1:]
runpy.run_path(main, run_name="__main__")
"""


def build_command(python: str, pymarl: Path, alg: str, map_name: str, seed: int, t_max: int) -> list[str]:
    """pymarl's command line: its own config for ``alg`` and ``sc2``, with the map, seed, budget, CPU."""
    if alg not in ALGS:
        raise ValueError(f"alg must be one of {', '.join(ALGS)} (pymarl's configs), got {alg!r}")
    main = str(Path(pymarl) / "src" / "main.py")
    overrides = [f"env_args.map_name={map_name}", f"seed={seed}", f"t_max={t_max}", "use_cuda=False"]
    return [python, "-c", LAUNCHER, main, f"--config={alg}", "--env-config=sc2", "with", *overrides]


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def _number(v: float | dict) -> float:
    """A value of Sacred's ``info.json``: a number, or a NumPy scalar as jsonpickle writes it
    (``{"py/object": "numpy.float64", "value": 2.99, ...}``)."""
    return float(v["value"] if isinstance(v, dict) else v)


def checkout_versions(checkout: Path, python: str | None = None) -> dict:
    """The engine version, commit and state of a marl checkout, and with ``python`` the package versions
    of the Python that ran pymarl against it (for a run started by hand, or by :func:`run`)."""
    text = (checkout / "marl" / "envs" / "smac" / "version.py").read_text(encoding="utf-8")
    version = next(
        ln.split("=")[1].strip().strip('"') for ln in text.splitlines() if ln.startswith("ENGINE_VERSION")
    )
    out = {"engine_version": version, **code_version(checkout)}
    if python is not None:
        code = (
            "import importlib.metadata as m, json, sys\n"
            "out = {p: m.version(p) for p in ('torch', 'sacred', 'numpy', 'numba')}\n"
            "print(json.dumps({**out, 'python': sys.version.split()[0]}))\n"
        )
        got = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=300, env=_env(checkout)
        )
        if got.returncode != 0:
            raise SystemExit(f"{python} lacks torch, sacred, NumPy or Numba:\n{got.stderr[-2000:]}")
        out["packages"] = json.loads(got.stdout.strip().splitlines()[-1])
    return out


def record_from_sacred(run_dir: Path, pymarl_commit: str = "", versions: dict | None = None) -> dict:
    """The run record of a pymarl Sacred run folder (``config.json``, ``info.json``, ``run.json``).

    pymarl logs each test phase's means into ``info.json`` as ``<key>`` and ``<key>_T`` (the env steps).
    The engine comes from the marl the run imported (``config.json`` cannot say): ``versions`` (the
    ``VERSIONS_FILE`` that :func:`run` leaves in the folder, or :func:`checkout_versions`)."""
    cfg = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    info = json.loads((run_dir / "info.json").read_text(encoding="utf-8"))
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    curves = {}
    for key, name in CURVES.items():
        if key in info:
            curves[name] = [[int(t), _number(v)] for t, v in zip(info[f"{key}_T"], info[key], strict=True)]
    if "test_win_rate" not in curves:
        raise SystemExit(f"{run_dir}: no test phase logged yet (info.json has no test_battle_won_mean)")
    if versions is None and (run_dir / VERSIONS_FILE).is_file():
        versions = json.loads((run_dir / VERSIONS_FILE).read_text(encoding="utf-8"))
    if versions is None:
        raise SystemExit(f"{run_dir}: no {VERSIONS_FILE}; name the marl checkout the run used (--marl)")
    engine = {"engine_version": versions["engine_version"], "backend": "sim"}
    start, beat = meta.get("start_time"), meta.get("heartbeat") or meta.get("stop_time")
    first, last = _epoch(start), _epoch(beat) if beat else _epoch(start)
    keep = ("env_args", "mixer", "lr", "batch_size", "buffer_size", "target_update_interval", "t_max")
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "env": "smac",
        "task": str(cfg["env_args"]["map_name"]),
        "alg": f"pymarl_{cfg['name']}",
        "seed": int(cfg["seed"]),
        "test_nepisode": int(cfg["test_nepisode"]),
        "budget": curves["test_win_rate"][-1][0],
        "curves": curves,
        "absolute": None,
        "source": f"pymarl sacred run {run_dir.name}",
        "wall_clock": {"first": first, "last": last, "seconds": last - first},
        "provenance": [
            {
                "event": "start",
                "time": start[:19] + "Z",
                "commit": versions.get("commit"),
                "dirty": versions.get("dirty"),
                "versions": versions.get("packages", {}),
                "machine": {"cpu": cpu_model(), "nproc": os.cpu_count()},
                "engine": engine,
                "learner": f"oxwhirl/pymarl {pymarl_commit or 'commit unknown'}, run unmodified",
            }
        ],
        "engine": [engine],
        "config": {k: cfg[k] for k in keep if k in cfg},
    }


def _env(checkout: Path = ROOT) -> dict:
    """One thread for torch and NumPy; the marl of ``checkout`` first on the path."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH", "")) if p)
    return env


def run(args: argparse.Namespace) -> Path:
    """Train with pymarl to ``--t-max``, then write the run's record; returns its path."""
    versions = checkout_versions(ROOT, args.python)
    commit = _git(args.pymarl, "log", "-1", "--format=%h")
    cmd = build_command(args.python, args.pymarl, args.alg, args.map, args.seed, args.t_max)
    launch = time.time()
    log = args.log or Path(f"pymarl_{args.alg}_{args.map}_seed{args.seed}.log")
    with open(log, "w") as out:
        rc = subprocess.run(cmd, cwd=args.pymarl, stdout=out, stderr=subprocess.STDOUT, env=_env()).returncode
    run_dir = _run_dir(args.pymarl / "results" / "sacred", launch)
    if rc != 0 or run_dir is None:
        raise SystemExit(f"pymarl exited with {rc}; its output: {log}")
    (run_dir / VERSIONS_FILE).write_text(json.dumps(versions), encoding="utf-8")
    path = write_record(record_from_sacred(run_dir, commit, versions), args.records, force=args.force)
    print(f"{record_name(f'pymarl_{args.alg}', args.map, args.seed)}: {path}")
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train with pymarl on the engine, then record the run")
    r.add_argument("--pymarl", type=Path, required=True, help="a clone of oxwhirl/pymarl")
    r.add_argument("--python", required=True, help="a Python with torch, sacred and this package's engine")
    r.add_argument("--alg", choices=ALGS, default="qmix")
    r.add_argument("--map", required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--t-max", type=int, default=310_000)
    r.add_argument("--log", type=Path, default=None, help="pymarl's output (default: ./pymarl_<run>.log)")
    c = sub.add_parser("record", help="the record of a finished pymarl Sacred run folder")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--pymarl-commit", default="", help="the pymarl commit the run used")
    c.add_argument(
        "--marl", type=Path, default=ROOT, help="the marl checkout the run imported (default: this)"
    )
    c.add_argument("--python", default=None, help="the Python that ran pymarl (for its package versions)")
    for q in (r, c):
        q.add_argument("--records", type=Path, required=True, help="the folder of run records")
        q.add_argument("--force", action="store_true", help="replace a record that differs")
    args = p.parse_args(argv)
    if args.cmd == "run":
        run(args)
    else:
        versions = (
            None if (args.run_dir / VERSIONS_FILE).is_file() else checkout_versions(args.marl, args.python)
        )
        record = record_from_sacred(args.run_dir, args.pymarl_commit, versions)
        path = write_record(record, args.records, force=args.force)
        print(path)


if __name__ == "__main__":
    main()
