"""``marl.utils.ms.setup``: MindSpore's thread count (0 = every usable core); NumPy's BLAS on one thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = (
    "import json; from threadpoolctl import threadpool_info; from marl.utils import ms as msu; "
    "before = [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']; "
    "msu.setup(threads=1); "
    "after = [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']; "
    "print(json.dumps([before, after]))"
)
VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def _run(code: str, drop: tuple[str, ...] = VARS, **env_vars: str) -> str:
    """``code`` in a fresh Python without the variables ``drop``; its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_vars, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _blas_threads(**env_vars: str) -> tuple[list[int], list[int]]:
    before, after = json.loads(_run(PROBE, **env_vars).strip().splitlines()[-1])
    return before, after


def test_setup_puts_blas_on_one_thread():
    before, after = _blas_threads()
    if not before:
        pytest.skip("this NumPy reports no BLAS thread pool")
    assert after == [1] * len(before)


def test_setup_keeps_a_thread_count_the_user_set():
    before, after = _blas_threads(OPENBLAS_NUM_THREADS="2")
    if not before:
        pytest.skip("this NumPy reports no BLAS thread pool")
    assert after == before  # left as the user's variable made it


def test_zero_threads_means_every_usable_core():
    code = (
        "import os; from marl.utils import ms as msu; msu.setup(threads=0); "
        "print(msu._THREADS_SET, os.environ['MARL_KERNEL_THREADS'], msu.usable_cores(), "
        "len(os.sched_getaffinity(0)))"
    )
    set_, kernel, usable, affinity = map(int, _run(code, drop=("MARL_KERNEL_THREADS",)).split()[-4:])
    assert set_ == kernel == usable == affinity


def test_a_negative_thread_count_is_refused():
    from marl.utils import ms as msu

    with pytest.raises(ValueError, match="threads must be an int >= 0"):
        msu.setup(threads=-1)


def test_without_threadpoolctl_setup_says_so_and_runs_on():
    code = (
        "import sys; sys.modules['threadpoolctl'] = None; from marl.utils import ms as msu; "
        "msu.setup(threads=1); print('set', msu._THREADS_SET)"
    )
    out = _run(code)
    assert "threadpoolctl is not installed" in out and "set 1" in out


def test_the_compile_cache_is_refused_with_the_reason():
    code = (
        "from marl.utils.ms import jit\n"
        "try:\n    jit(lambda x: x)\nexcept RuntimeError as e:\n    print('refused:', e)\n"
    )
    out = _run(code, MS_COMPILER_CACHE_ENABLE="1")
    assert "refused:" in out and "compile order" in out and "unset MS_COMPILER_CACHE_ENABLE" in out
    assert "refused" not in _run(code, MS_COMPILER_CACHE_ENABLE="0")
