"""The wheel of this checkout, built and installed once per test session (the ``built_wheel`` and
``installed_wheel`` fixtures of ``conftest.py``): building it takes most of a wheel test's time."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]


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
