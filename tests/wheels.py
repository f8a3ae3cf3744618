"""The wheel of this checkout, built and installed once per test session (the ``built_wheel`` and
``installed_wheel`` fixtures of ``conftest.py``): building it takes most of a wheel test's time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
# the installed copy's training run (test_wheel_install.py), without its t_max: tiny, eager
WHEEL_RUN = [
    "runner.batch_size_run=2",
    "log.test_nepisode=2",
    "log.test_interval=500",
    "log.log_interval=500",
    "log.mindinsight=false",
    "log.progress=false",
    "learner.batch_size=4",
    # the graph compiles are not under test here (they took 22 s of a warm 32 s run); the eager learner
    # still builds the GRU kernel (marl/kernels) from the installed copy
    "learner.use_jit=false",
]


def build_wheel(tmp: Path) -> Path:
    """``pip wheel`` of a copy of the checkout's packaged files (no caches, no built kernels) into ``tmp``."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "_build")
    for name in ("marl", "maps", "configs"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
    cmd = [*PIP, "wheel", "--no-deps", "--no-build-isolation", str(src), "-w", str(tmp / "whl")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp / "whl").glob("marl-*.whl")
    return wheel


def install_wheel(wheel: Path, site: Path) -> Path:
    """``pip install --target site`` of ``wheel`` without its dependencies (they are the test venv's)."""
    cmd = [*PIP, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return site


def seed_numba_cache(site: Path, tmp: Path) -> int:
    """Give the installed copy in ``site`` the checkout's compiled engine; the number of cache files copied.

    The installed copy is new to Numba, so its first run compiled the whole engine: about 60 s of the wheel
    test's 70-100 s, compiling the very sources the checkout has compiled (the wheel is built from them). A
    short run of the test's training in this process compiles the checkout's engine (nothing when its cache
    is warm; otherwise the tests after it load what it compiled), then its cache files are copied beside the
    installed sources, whose modification times are set to the checkout's: Numba takes a cache entry when its
    source file's time and size match. A source that differs from the checkout's keeps its own time, so its
    functions compile in the install as before.
    """
    from marl.config import load_config  # MindSpore: imported only by the test that trains
    from marl.envs.smac.sim._cache import STAMP  # the guard's record of the sources compiled
    from marl.trainer import Trainer

    cfg = load_config("qmix", map_name="3m", overrides=[*WHEEL_RUN, "t_max=100", f"results_dir={tmp}"])
    Trainer(cfg).run()
    copied = 0
    for src in (ROOT / "marl").rglob("*.py"):
        dst = site / src.relative_to(ROOT)
        if dst.is_file() and dst.read_bytes() == src.read_bytes():
            st = src.stat()
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    for cache in (ROOT / "marl").rglob("__pycache__/*"):
        if cache.suffix in (".nbi", ".nbc") or cache.name == STAMP:
            dst = site / cache.relative_to(ROOT)
            dst.parent.mkdir(exist_ok=True)
            shutil.copy2(cache, dst)
            copied += 1
    return copied
