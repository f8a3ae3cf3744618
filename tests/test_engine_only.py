"""The engine-only install: the SMAC engine and its PettingZoo view work without MindSpore or any training
dependency (``pip install .``); training says which extra it needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
TRAINING_ONLY = ("mindspore", "mpe2", "matplotlib", "tqdm")

BLOCK = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {{name!r}} (blocked by the test)")
        return None
sys.meta_path.insert(0, Block())
"""

ENGINE = """
import numpy as np
from pettingzoo.test import parallel_api_test
from marl.envs.smac import StarCraft2Env, pettingzoo_env
env = StarCraft2Env("3m", seed=0, backend="sim")
env.reset()
reward, terminated, info = env.step([1, 1, 1])
assert env.render().shape[2] == 3
parallel_api_test(pettingzoo_env("2s3z", seed=0, backend="sim"), num_cycles=20)
from marl.envs.smac import BatchedStarCraft2Env
BatchedStarCraft2Env("8m", 4, seed=0).reset()
assert not any(m.split(".")[0] in BLOCKED for m in sys.modules)
print("ENGINE-ONLY OK")
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK.format(blocked=TRAINING_ONLY) + code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_core_dependencies_leave_out_training() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    assert not any(name in core for name in TRAINING_ONLY)
    train = " ".join(project["optional-dependencies"]["train"])
    assert all(name in train for name in TRAINING_ONLY)


def test_engine_and_views_run_without_training_dependencies() -> None:
    out = _run(ENGINE)
    assert out.returncode == 0 and "ENGINE-ONLY OK" in out.stdout, out.stderr[-3000:]


def test_training_without_mindspore_names_the_extra() -> None:
    out = _run("import marl.utils.ms")
    assert out.returncode != 0 and "pip install 'marl[train]'" in out.stderr, out.stderr[-2000:]


@pytest.mark.xdist_group("wheel")  # the worker that builds the wheel once (conftest's built_wheel)
def test_a_built_wheel_carries_the_maps(installed_wheel: Path, tmp_path: Path) -> None:
    """`pip install .` builds a wheel: the maps (`maps/`, linked as `marl/envs/smac/map_files`) are in it."""
    code = "from marl.envs.smac.maps import list_maps, load_map; print(len(list_maps()), load_map('3m').name)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed_wheel)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [str(len(list(ROOT.glob("maps/*.yaml")))), "3m"]
