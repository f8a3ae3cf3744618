"""The stale-cache guard (marl/envs/smac/sim/_cache.py): a change to any module of the tree drops every
compiled cache of the tree, since a kernel may inline another module's code."""

from __future__ import annotations

from pathlib import Path

from marl.envs.smac.sim._cache import refresh_numba_cache


def _caches(root: Path) -> list[Path]:
    return sorted(root.rglob("__pycache__/*.nb[ic]"))


def _write_caches(root: Path) -> None:
    for d in (root / "__pycache__", root / "sim" / "__pycache__"):
        d.mkdir(parents=True, exist_ok=True)
        (d / "k.step-1.py311.nbi").write_text("index")
        (d / "k.step-1.py311.1.nbc").write_text("code")


def test_a_change_anywhere_in_the_tree_drops_every_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "weapons.py").write_text("A = 1\n")
    (tmp_path / "fused.py").write_text("B = 1\n")
    _write_caches(tmp_path)
    refresh_numba_cache(tmp_path)  # no stamp yet: caches of unknown sources go
    assert _caches(tmp_path) == []
    _write_caches(tmp_path)
    refresh_numba_cache(tmp_path)  # nothing changed: kept
    assert len(_caches(tmp_path)) == 4
    (tmp_path / "sim" / "weapons.py").write_text("A = 2\n")  # the engine changed: the fused step's cache too
    refresh_numba_cache(tmp_path)
    assert _caches(tmp_path) == []
    _write_caches(tmp_path)
    (tmp_path / "new_kernels.py").write_text("C = 1\n")  # a new module counts as a change
    refresh_numba_cache(tmp_path)
    assert _caches(tmp_path) == []


def test_with_numba_cache_dir_set_it_leaves_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    (tmp_path / "fused.py").write_text("B = 1\n")
    _write_caches(tmp_path)
    refresh_numba_cache(tmp_path)
    assert len(_caches(tmp_path)) == 4
