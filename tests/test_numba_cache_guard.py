"""The stale-cache guard (marl/envs/smac/sim/_cache.py): a change to a module drops the compiled caches of
that module and of every module of the tree that imports it, directly or not, and keeps the others."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from marl.envs.smac.sim import _cache
from marl.envs.smac.sim._cache import module_imports, refresh_numba_cache, stale_modules

# A package tree like marl/envs/smac: each import form the guard reads, once.
TREE = {
    "__init__.py": "",
    "sim/__init__.py": "from pkg.sim.engine import Engine\n",
    "sim/weapons.py": "import math\nA = 1\n",  # a leaf
    "sim/engine.py": "from . import weapons\n\n\nclass Engine:\n    pass\n",  # relative, a module
    "fused.py": "from .sim import engine\n",  # relative from a package, a module: through engine to weapons
    "features.py": "F = 1\n",
    "smacv2/__init__.py": "",
    "smacv2/kernels.py": "from ..features import F\n",  # two levels up, a name
    "tool.py": "def f():\n    import pkg.features\n",  # absolute, inside a function; imported by nothing
}
# The modules whose (fake) Numba caches the tests write: ``<stem>.<function>-<line>.py311[.n].nb[ic]``.
KERNELS = ("sim/weapons.py", "sim/engine.py", "fused.py", "features.py", "smacv2/kernels.py", "tool.py")


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    root = tmp_path / "pkg"
    for rel, text in TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _write_caches(root: Path) -> None:
    for rel in KERNELS:
        d = (root / rel).parent / "__pycache__"
        d.mkdir(exist_ok=True)
        stem = Path(rel).stem
        (d / f"{stem}.step-1.py311.nbi").write_text("index")
        (d / f"{stem}.step-1.py311.1.nbc").write_text("code")


def _cached(root: Path) -> set[str]:
    """The modules of :data:`KERNELS` whose two cache files are still there."""
    kept = set()
    for rel in KERNELS:
        d, stem = (root / rel).parent / "__pycache__", Path(rel).stem
        if len(list(d.glob(f"{stem}.*.nb[ic]"))) == 2:
            kept.add(rel)
    return kept


def _refreshed(root: Path) -> set[str]:
    """The caches one import keeps, starting from a full set."""
    _write_caches(root)
    refresh_numba_cache(root)
    return _cached(root)


def test_unknown_sources_drop_everything_and_an_unchanged_tree_nothing(pkg):
    assert _refreshed(pkg) == set()  # no record of the sources yet
    assert _refreshed(pkg) == set(KERNELS)
    assert _refreshed(pkg) == set(KERNELS)


def test_a_change_to_a_leaf_drops_its_importers_and_not_the_rest(pkg):
    _refreshed(pkg)
    (pkg / "sim/weapons.py").write_text("import math\nA = 2\n")
    assert _refreshed(pkg) == {"features.py", "smacv2/kernels.py", "tool.py"}
    (pkg / "features.py").write_text("F = 2\n")
    assert _refreshed(pkg) == {"sim/weapons.py", "sim/engine.py", "fused.py"}


def test_a_change_to_a_module_nothing_imports_drops_only_its_own(pkg):
    _refreshed(pkg)
    (pkg / "tool.py").write_text("def f():\n    import pkg.features  # edited\n")
    assert _refreshed(pkg) == set(KERNELS) - {"tool.py"}
    (pkg / "new.py").write_text("from pkg.sim import weapons\n")  # a new module nobody imports yet
    assert _refreshed(pkg) == set(KERNELS)


def test_a_deleted_module_drops_its_caches_and_its_importers(pkg):
    _refreshed(pkg)
    _write_caches(pkg)
    (pkg / "tool.py").unlink()
    (pkg / "features.py").unlink()
    refresh_numba_cache(pkg)
    assert _cached(pkg) == {"sim/weapons.py", "sim/engine.py", "fused.py"}


def test_the_imports_read_from_the_sources(pkg):
    sources = {p.relative_to(pkg).as_posix(): p.read_bytes() for p in pkg.rglob("*.py")}
    imports = module_imports(pkg, sources)
    assert imports["sim/__init__.py"] == {"sim/engine.py"}
    assert imports["sim/engine.py"] == {"sim/weapons.py"}
    assert imports["fused.py"] == {"sim/engine.py"}
    assert imports["smacv2/kernels.py"] == {"features.py"}
    assert imports["tool.py"] == {"features.py"}
    assert imports["sim/weapons.py"] == set()  # ``math`` is outside the tree
    assert stale_modules(imports, {"sim/weapons.py"}) == {
        "sim/weapons.py",
        "sim/engine.py",
        "sim/__init__.py",
        "fused.py",
    }
    # in doubt, a module imports everything: imports by computed name, a file that does not parse
    sources["tool.py"] = b"import importlib\nm = importlib.import_module('pkg.' + 'x')\n"
    sources["features.py"] = b"def (:\n"
    imports = module_imports(pkg, sources)
    assert imports["tool.py"] == imports["features.py"] == set(sources)


def test_a_stamp_of_the_earlier_guard_drops_everything_once(pkg):
    cache_dir = pkg / "__pycache__"
    cache_dir.mkdir()
    (cache_dir / "smac_sources.sha256").write_text("0" * 64)
    assert _refreshed(pkg) == set()
    assert not (cache_dir / "smac_sources.sha256").exists()
    assert set(json.loads((cache_dir / _cache.STAMP).read_text())["modules"]) == set(TREE)
    assert _refreshed(pkg) == set(KERNELS)


def test_a_read_only_install_raises_nothing(pkg, monkeypatch):
    def refuse(*args: object) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    assert _refreshed(pkg) == set()  # no error: Numba compiles in memory there
    assert not (pkg / "__pycache__" / _cache.STAMP).exists()


def test_with_numba_cache_dir_set_it_leaves_everything(pkg, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(pkg.parent / "elsewhere"))
    assert _refreshed(pkg) == set(KERNELS)


def test_a_change_to_the_engine_drops_the_fused_step_of_the_real_tree():
    """The point of the guard: the fused env step compiles ``sim/``'s per-loop code into itself."""
    root = Path(_cache.__file__).resolve().parents[1]
    sources = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.py")}
    imports = module_imports(root, sources)
    engine = ("contact", "jit", "kernel", "physics", "stepper", "targeting", "units", "weapons")
    for stem in engine:
        stale = stale_modules(imports, {f"sim/{stem}.py"})
        assert {"fused.py", "fused_kernels.py", "rollout.py", "sim/stepper.py"} <= stale, stem
    assert "smacv2/fast_kernels.py" in stale_modules(imports, {"sim/physics.py"})
    assert "smacv2/fast_kernels.py" in stale_modules(imports, {"fast_features.py"})
    kernels = {"fused.py", "fused_kernels.py", "rollout.py", "fast_features.py", "smacv2/fast_kernels.py"}
    assert not kernels & stale_modules(imports, {"render.py"})  # the renderer is no kernel's import
