"""The one place that touches MindSpore runtime settings.

Import MindSpore through this module (``from marl.utils.ms import ms, nn, ops``) so that
``MS_DEV_HOST_BLOCKING_RUN=1`` is in the environment before ``mindspore`` is first imported: on CPU it
makes dispatch single-threaded, which was measured 2-10x faster for small-op RL workloads and removes
most of the run-to-run variance (see the project notes on MindSpore CPU). Users can override it by
setting the variable themselves before importing ``marl``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("MS_DEV_HOST_BLOCKING_RUN", "1")

try:
    import mindspore as ms  # noqa: E402  (the env var above must be set first)
except ImportError as exc:  # the engine-only install: `pip install .` without the "train" extra
    raise ImportError(
        f"training needs MindSpore ({exc}); this install has the SMAC engine and its views only: "
        "pip install 'marl[train]' (or `make train` in a clone)"
    ) from exc
import numpy as np  # noqa: E402
from mindspore import Parameter, Tensor, mint, nn, ops  # noqa: E402
from mindspore.ops.operations._grad_ops import AbsGrad  # noqa: E402  (the QMIX mixer's |x| gradient)

try:
    from threadpoolctl import threadpool_limits  # noqa: E402  (the "train" extra)
except ImportError:  # a venv made before the dependency: keep running, BLAS keeps its own thread count
    threadpool_limits = None

__all__ = [
    "AbsGrad",
    "Parameter",
    "Tensor",
    "assign_numpy",
    "available_devices",
    "check_no_compile_cache",
    "jit",
    "load_numpy_into",
    "mint",
    "ms",
    "select_device",
    "nn",
    "ops",
    "params_to_numpy",
    "save_ms_checkpoint",
    "setup",
    "to_tensor",
    "usable_cores",
]

_THREADS_SET: int | None = None
_BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


DEVICES = {"cpu": "CPU", "gpu": "GPU", "ascend": "Ascend"}  # ms_device -> MindSpore's device target


def _support(target: str) -> bool:
    """MindSpore's own check of whether its build loaded ``target``'s plugin here (what
    ``ms.device_context.<device>.is_available()`` reads, without the two warning lines it logs)."""
    try:
        from mindspore._c_expression import MSContext

        return bool(MSContext.get_instance().is_pkg_support_device(target))
    except (ImportError, AttributeError):  # another MindSpore layout: its public check
        return bool(getattr(ms.device_context, target.lower()).is_available())


def available_devices() -> list[str]:
    """The ``ms_device`` values this MindSpore build can use on this machine (``cpu`` always)."""
    return [name for name, target in DEVICES.items() if _support(target)]


def select_device(device: str) -> None:
    """``ms.set_device`` for ``device`` (``cpu``, ``gpu`` or ``ascend``); a device this build or machine lacks
    is a ``ValueError`` naming the devices available. The compiled kernels (:mod:`marl.kernels`) are CPU code:
    on another device the networks use MindSpore's path."""
    from marl import kernels

    if device not in DEVICES:
        raise ValueError(f"ms_device must be one of {', '.join(DEVICES)}, got {device!r}")
    if not _support(DEVICES[device]):
        raise ValueError(
            f"ms_device={device}: MindSpore {ms.__version__} cannot use a {DEVICES[device]} device here (its "
            f"{DEVICES[device]} plugin did not load: no such device, driver or matching CUDA / CANN on this "
            f"machine); available: {', '.join(available_devices())}"
        )
    ms.set_device(DEVICES[device])
    kernels.use_device(device)


def setup(threads: int = 1, seed: int | None = None, device: str = "cpu") -> None:
    """Select the MindSpore device (``cpu`` by default, :func:`select_device`), set the CPU kernel thread
    count (once per process) and optionally the seed.

    ``threads=0`` means :func:`usable_cores` (the config's default, ``ms_threads: 0``): a lone run has the
    machine to itself, and acting and learning alternate, so the learner may use every core (QMIX 3m on a
    2-core machine: 2.45 instead of 2.72 min to solve, median of 3 seeds, ``learn_smac.md``). A sweep
    passes each run its share (``--cpus-per-run``).

    The compiled kernels of :mod:`marl.kernels` use the same count unless ``MARL_KERNEL_THREADS`` is set.
    NumPy's BLAS is limited to one thread unless the user set ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``
    or ``OMP_NUM_THREADS``: acting multiplies matrices of a few dozen rows, where a second BLAS thread gains
    nothing on an idle machine and costs 1.4-2.1x beside a second run doing the same
    (``benchmarks/results/acting_threads.md``).

    ``threads_num`` can be set only once per process in MindSpore; calling ``setup`` again with the same
    value (or 0) is a no-op, and with a different value keeps the first one and warns.
    """
    global _THREADS_SET
    if not isinstance(threads, (int, np.integer)) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0 = every usable core), got {threads!r}")
    asked, threads = int(threads), int(threads) or usable_cores()
    select_device(device)
    if _THREADS_SET is None:
        ms.device_context.cpu.op_tuning.threads_num(threads)
        os.environ.setdefault("MARL_KERNEL_THREADS", str(threads))  # marl.kernels: same thread count
        if threadpool_limits is None:
            print(
                "marl: threadpoolctl is not installed, so NumPy's BLAS keeps its own thread count "
                "(pip install threadpoolctl, or `make` in a clone)"
            )
        elif not any(os.environ.get(v) for v in _BLAS_THREAD_VARS):
            threadpool_limits(limits=1, user_api="blas")  # for the rest of the process
        _THREADS_SET = threads
    elif _THREADS_SET != threads and asked:  # "every usable core" accepts the count already set
        warnings.warn(
            f"MindSpore threads_num is already {_THREADS_SET} and cannot be changed in this process "
            f"(asked for {threads}); keeping {_THREADS_SET}.",
            stacklevel=2,
        )
    if seed is not None:
        ms.set_seed(int(seed))


def check_no_compile_cache() -> None:
    """Refuse MindSpore's compile cache (``MS_COMPILER_CACHE_ENABLE=1`` or ``enable_compile_cache``).

    MindSpore 2.10 files a compiled graph under the order in which the process compiled it (graph 0, 1, ...)
    and a hash of the entry script's imports outside site-packages; neither the graph's input shapes nor
    its Python constants are part of the key. A learner compiles one graph per bucketed episode length, in
    the order that episode lengths happen to come, so a second run would execute another shape's or another
    config's graph: measured, a graph compiled for a (2, 3) input returned the (4, 3) input's answer from the
    cache wrongly (156.7 instead of 1322.4), and a changed constant was ignored
    (``benchmarks/results/learner_step_levers.md``, session 9).
    """
    env_on = os.environ.get("MS_COMPILER_CACHE_ENABLE", "").strip() not in ("", "0")
    if env_on or ms.get_context("enable_compile_cache"):
        raise RuntimeError(
            "MindSpore's compile cache is on (MS_COMPILER_CACHE_ENABLE / enable_compile_cache): it keys "
            "graphs by compile order, not by shape or constants, and would run the wrong graph for marl's "
            "per-length learner steps; unset MS_COMPILER_CACHE_ENABLE (compiling costs a few seconds per "
            "graph instead)"
        )


def jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``fn`` as one graph with ``jit_level="O1"`` (measured 5-15% faster than O0 on CPU).

    Refuses to when MindSpore's compile cache is on (:func:`check_no_compile_cache`).
    """
    check_no_compile_cache()
    return ms.jit(fn, jit_level="O1")


def to_tensor(x: Any, dtype: Any = None) -> Tensor:
    """A MindSpore Tensor from array-like ``x`` (copies; keeps the NumPy dtype unless ``dtype`` is given)."""
    arr = np.ascontiguousarray(x)
    t = Tensor(arr)
    return t if dtype is None else t.astype(dtype)


def params_to_numpy(cell: nn.Cell) -> dict[str, np.ndarray]:
    """All parameters of ``cell`` as ``{name relative to cell: array copy}``."""
    return {name: p.asnumpy().copy() for name, p in cell.parameters_and_names()}


def load_numpy_into(cell: nn.Cell, weights: dict[str, np.ndarray], strict: bool = True) -> None:
    """Copy arrays (keyed as :func:`params_to_numpy` names them) into the parameters of ``cell``.

    With ``strict`` every parameter must be present and no extra key is allowed; shapes must match.
    """
    params = dict(cell.parameters_and_names())
    if strict:
        missing = sorted(set(params) - set(weights))
        extra = sorted(set(weights) - set(params))
        if missing or extra:
            raise KeyError(f"weights do not match the cell: missing {missing}, unexpected {extra}")
    for name, p in params.items():
        if name not in weights:
            continue
        arr = np.asarray(weights[name])
        if tuple(arr.shape) != tuple(p.shape):
            raise ValueError(f"shape of {name!r}: got {arr.shape}, the parameter has {tuple(p.shape)}")
        assign_numpy(p, arr)


def save_ms_checkpoint(weights: dict[str, np.ndarray], path: str | os.PathLike[str]) -> None:
    """Write ``weights`` (named as :func:`params_to_numpy` names them) as a MindSpore ``.ckpt`` file, which
    ``mindspore.load_checkpoint(path, net=cell)`` loads into a freshly built cell of the same class."""
    ms.save_checkpoint(
        [{"name": k, "data": Tensor(np.ascontiguousarray(v))} for k, v in weights.items()], str(path)
    )


def assign_numpy(param: Parameter, arr: np.ndarray) -> None:
    """Write ``arr`` into ``param`` in place with ``ops.assign``.

    ``Parameter.set_data`` after a graph using the parameter was compiled was NOT seen by that graph
    (MindSpore 2.10 CPU, checked: a loaded checkpoint left the jitted loss unchanged); ``assign`` is.
    """
    ops.assign(param, Tensor(np.ascontiguousarray(arr), dtype=param.dtype))


def optimizer_state(nets: nn.Cell, optimizers: dict[str, nn.Cell]) -> dict[str, Parameter]:
    """The optimizers' own state (moments, step counts), not the weights in ``nets`` they update.

    ``optimizers`` maps a key prefix (``""`` for a learner with one optimizer) to each optimizer.
    """
    own = {id(p) for p in nets.get_parameters()}
    return {
        f"{prefix}{name}": p
        for prefix, opt in optimizers.items()
        for name, p in opt.parameters_and_names()
        if id(p) not in own
    }


def save_training_state(nets: nn.Cell, optimizers: dict[str, nn.Cell]) -> dict[str, np.ndarray]:
    """``nets/<param>`` and ``optim/<state>`` arrays of a learner, for checkpoints."""
    sd = {f"nets/{k}": v for k, v in params_to_numpy(nets).items()}
    sd.update({f"optim/{k}": p.asnumpy().copy() for k, p in optimizer_state(nets, optimizers).items()})
    return sd


def load_training_state(nets: nn.Cell, optimizers: dict[str, nn.Cell], sd: dict[str, np.ndarray]) -> None:
    """Inverse of :func:`save_training_state` (in place, seen by compiled graphs)."""
    load_numpy_into(nets, {k[len("nets/") :]: v for k, v in sd.items() if k.startswith("nets/")})
    state = optimizer_state(nets, optimizers)
    saved = {k[len("optim/") :]: v for k, v in sd.items() if k.startswith("optim/")}
    if set(saved) != set(state):
        raise KeyError(
            f"optimizer state mismatch (was it saved with another optimizer?): saved {sorted(saved)[:4]}..., "
            f"expected {sorted(state)[:4]}..."
        )
    for k, p in state.items():
        assign_numpy(p, saved[k])
