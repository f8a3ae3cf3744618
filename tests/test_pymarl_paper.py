"""benchmarks/interop/pymarl_paper.py: pymarl's own runs on the engine, as run records the calibration report
keeps apart from our presets'."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.interop import pymarl_paper as pp
from benchmarks.learning import real_game_curves as rgc
from marl.report.paper_runs import DEFAULT_DATA
from marl.report.records import check_record, write_record

ROOT = Path(__file__).resolve().parents[1]

# What pymarl's main.py does that the launcher must support, in the same calls: the Python 3.9 name
# collections.Mapping, yaml.load without a Loader, and smac.env's two classes built from env_args.
FAKE_MAIN = """
import collections, sys, yaml
assert collections.Mapping is collections.abc.Mapping
cfg = yaml.load("env_args: {map_name: 3m, move_amount: 2, game_version: null, debug: false, seed: 3}")
from smac.env import MultiAgentEnv, StarCraft2Env
env = StarCraft2Env(**cfg["env_args"])
assert isinstance(env, MultiAgentEnv)
env.reset()
print("ARGS", sys.argv[1:], env.get_env_info()["n_agents"], env.step([1, 1, 1])[1])
"""


def test_the_launcher_runs_pymarl_main_on_the_engine(tmp_path: Path) -> None:
    main = tmp_path / "src" / "main.py"
    main.parent.mkdir()
    main.write_text(FAKE_MAIN)
    cmd = pp.build_command(sys.executable, tmp_path, "qmix", "3m", 5, 1000)
    assert cmd[4:] == ["--config=qmix", "--env-config=sc2", "with", "env_args.map_name=3m", "seed=5",
                       "t_max=1000", "use_cuda=False"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ARGS ['--config=qmix', '--env-config=sc2', 'with', 'env_args.map_name=3m'" in out.stdout
    assert out.stdout.strip().endswith("3 False")
    with pytest.raises(ValueError, match="alg must be one of qmix, vdn, iql, coma"):
        pp.build_command(sys.executable, tmp_path, "mappo", "3m", 0, 10)


def _sacred_run(folder: Path, seed: int, won: list[float], versions: bool = True) -> Path:
    """A pymarl Sacred run folder as pymarl 2019 writes it (tests every 10k steps)."""
    folder.mkdir(parents=True)
    steps = [57 + 10_000 * i for i in range(len(won))]
    info = {"test_battle_won_mean": won, "test_battle_won_mean_T": steps,
            "test_return_mean": [{"py/object": "numpy.float64", "dtype": "float64", "value": 5.0 + 10 * w}
                                 for w in won], "test_return_mean_T": steps,
            "test_return_std": [1.0] * len(won), "test_return_std_T": steps,
            "return_mean": [1.0], "return_mean_T": [0]}  # fmt: skip
    cfg = {"name": "qmix", "seed": seed, "test_nepisode": 32, "t_max": 2050000, "lr": 0.0005,
           "env_args": {"map_name": "3s5z", "move_amount": 2}}  # fmt: skip
    run = {"start_time": "2026-11-29T07:46:14.1", "heartbeat": "2026-11-29T08:46:14.1"}
    for name, data in (("info", info), ("config", cfg), ("run", run)):
        (folder / f"{name}.json").write_text(json.dumps(data))
    if versions:
        versions = {
            "engine_version": "0.9.2",
            "commit": "abc",
            "dirty": False,
            "packages": {"torch": "2.13.0"},
        }
        (folder / pp.VERSIONS_FILE).write_text(json.dumps(versions))
    return folder


def test_a_sacred_run_becomes_a_record_and_never_pools_with_our_preset(tmp_path: Path) -> None:
    rec = pp.record_from_sacred(_sacred_run(tmp_path / "sacred" / "3", 0, [0.0, 0.25, 0.5]), "a8f171b")
    check_record(rec, "test")
    assert (rec["alg"], rec["task"], rec["seed"], rec["budget"]) == ("pymarl_qmix", "3s5z", 0, 20_057)
    assert rec["curves"]["test_win_rate"] == [[57, 0.0], [10_057, 0.25], [20_057, 0.5]]
    assert rec["curves"]["test_return_mean"][1] == [10_057, 7.5]  # NumPy scalars as Sacred writes them
    assert rec["engine"] == [{"engine_version": "0.9.2", "backend": "sim"}]
    assert rec["wall_clock"]["seconds"] == pytest.approx(3600.0)
    start = rec["provenance"][0]
    assert "oxwhirl/pymarl a8f171b" in start["learner"]
    assert (start["commit"], start["dirty"], start["versions"]) == ("abc", False, {"torch": "2.13.0"})
    # our preset on the same map and engine: the report gives each learner its own rows and picture
    ours = {**rec, "alg": "qmix_smac_paper", "source": "ours"}
    for r in (rec, ours):
        write_record(r, tmp_path / "records")
    text = rgc.report(tmp_path / "records", tmp_path / "out", DEFAULT_DATA)
    assert "- QMIX 3s5z: 1 run(s)" in text and "- pymarl QMIX 3s5z: 1 run(s)" in text
    assert (tmp_path / "out" / "pymarl_qmix_3s5z.png").is_file() and (
        tmp_path / "out" / "qmix_3s5z.png"
    ).is_file()


def test_a_run_without_its_versions_needs_the_checkout(tmp_path: Path) -> None:
    run = _sacred_run(tmp_path / "7", 1, [0.0], versions=False)
    with pytest.raises(SystemExit, match="name the marl checkout"):
        pp.record_from_sacred(run)
    rec = pp.record_from_sacred(run, versions=pp.checkout_versions(ROOT))
    assert len(rec["provenance"][0]["commit"]) == 40
    from marl.envs.smac.version import ENGINE_VERSION

    assert rec["engine"][0]["engine_version"] == ENGINE_VERSION
