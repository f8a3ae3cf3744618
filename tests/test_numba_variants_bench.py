"""``benchmarks/research/numba_variants.py`` reads a Numba cache's index files: one entry per compiled type
tuple of each function."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.research import numba_variants as bench


def test_the_index_reader_counts_each_functions_compiled_type_tuples(tmp_path):
    (tmp_path / "twice.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef add(x):\n    return x + 1\n\n"
        "@njit(cache=True)\ndef same(x):\n    return x\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path)}
    code = "import twice; twice.add(1); twice.add(1.5); twice.add(2); twice.same(1); twice.same(3)"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)
    assert bench.variants(tmp_path / "cache") == {"twice.add": 2, "twice.same": 1}
    assert bench.checkout(tmp_path) == f"<outside>/{tmp_path.name}"  # not a git checkout: no commit
