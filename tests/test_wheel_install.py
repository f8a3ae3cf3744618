"""A non-editable install of the built wheel trains from another directory: the configs and the maps ship in
the wheel (``marl/configs`` and ``marl/envs/smac/map_files``, links in a checkout), and the ``marl`` console
script is its entry point."""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from wheels import WHEEL_RUN  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
# slow (integration tier, never unit): a subprocess imports MindSpore and trains (9.6 s, with 5 s more to
# build, install and seed the wheel, at load average 6.7 on the 2-core machine, 2026-11-29). The installed
# copy is new to Numba: conftest's ``installed_wheel`` copies the checkout's compiled engine beside it
# (``wheels.seed_numba_cache``; compiling it again took 60 s of this test's 60-100 s).
# conftest's session-scoped ``built_wheel`` and ``installed_wheel`` build and install the wheel once for
# these tests and test_engine_only's, which share one xdist group so that one worker builds it.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def test_the_wheel_carries_configs_maps_license_and_the_console_script(built_wheel: Path) -> None:
    with zipfile.ZipFile(built_wheel) as zf:
        names = set(zf.namelist())
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = zf.read(entry).decode()
    configs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.yaml"))
    assert configs and [c for c in configs if f"marl/{c}" not in names] == []
    assert "marl/envs/smac/map_files/3m.yaml" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
    assert "marl = marl.cli:main" in scripts


def test_a_non_editable_install_trains_from_another_directory(tmp_path: Path, installed_wheel: Path) -> None:
    site = installed_wheel
    # a fresh venv without this checkout: the wheel's files first, then the dependencies of the test's venv
    # (their site-packages on PYTHONPATH, so no .pth file, the editable checkout's included, is read)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    deps = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARL_")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), deps]), MS_DEV_HOST_BLOCKING_RUN="1")
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import marl, marl.config.layers as l; print(marl.__file__); print(l.CONFIG_DIR)",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr[-3000:]
    module, config_dir = where.stdout.split()
    assert Path(module).is_relative_to(site) and Path(config_dir).is_relative_to(site)
    assert not Path(config_dir).is_symlink() and (Path(config_dir) / "algs" / "qmix.yaml").is_file()
    overrides = ["t_max=1000", *WHEEL_RUN]
    train = subprocess.run(
        [str(python), str(site / "bin" / "marl"), "train", "--alg", "qmix", "--map", "3m", *overrides],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert train.returncode == 0, (train.stdout + train.stderr)[-3000:]
    (run,) = (work / "results").iterdir()
    assert run.name.startswith("qmix_3m_seed0_") and (run / "config.yaml").is_file()
    assert any((run / "models").iterdir()), "no checkpoint written"
    assert "t_max reached" in train.stderr + train.stdout
