"""Ahead-of-time compiled CPU kernels (MindSpore ``ops.Custom`` of type ``"aot"``), built from this package.

The sources live beside this file (``gru_seq.cc``). :func:`library` compiles one with the machine's C++
compiler the first time it is needed (or at install time through ``make kernels``), caches the shared
library under ``_build/`` (or ``~/.cache/marl/kernels`` where the package directory is read-only), keyed by a
hash of the source, the compiler, the flags and the CPU (its architecture and instruction-set flags: the code
is built with ``-march=native``, so a cache shared by different machines never hands one CPU's build to
another), and returns its path. Where it cannot build (no compiler, an error), it
prints one line saying so and returns ``None``: callers then use the readable MindSpore reference path.

``MARL_KERNELS=0`` in the environment turns the kernels off (the reference path everywhere);
``MARL_KERNELS=1`` makes a failed build an error instead of a fallback. The kernels are CPU code: where
MindSpore runs on another device (``ms_device=gpu | ascend``, :func:`use_device`), the reference path is
used.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

SOURCES = {"gru_seq": Path(__file__).with_name("gru_seq.cc")}
FLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-pthread")
ENV_SWITCH = "MARL_KERNELS"


_DEVICE = {"name": "cpu"}  # the MindSpore device of this process (marl.utils.ms.setup sets it)


class KernelBuildError(RuntimeError):
    """A kernel could not be compiled (and ``MARL_KERNELS=1`` asked for it)."""


def enabled() -> bool:
    """False when ``MARL_KERNELS=0`` (the reference path is forced)."""
    return os.environ.get(ENV_SWITCH, "auto").strip().lower() not in {"0", "off", "false", "no"}


def use_device(name: str) -> None:
    """Record the MindSpore device (``cpu``, ``gpu``, ``ascend``); on any but ``cpu`` :func:`library` gives
    ``None`` (the kernels are CPU code) and the callers use MindSpore's reference path."""
    if name != _DEVICE["name"]:
        _DEVICE["name"] = name
        library.cache_clear()


@cache
def cpu_signature() -> str:
    """The CPU's architecture and instruction-set flags (``/proc/cpuinfo``'s ``flags``), hashed: part of
    every kernel's cache key, since ``-march=native`` builds for exactly this instruction set."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features", "isa"):
                flags = " ".join(sorted(value.split()))
                break
    except OSError:  # not Linux: the processor string is the best available
        flags = platform.processor()
    return hashlib.sha256(f"{platform.machine()}|{flags}".encode()).hexdigest()[:16]


def _required() -> bool:
    return os.environ.get(ENV_SWITCH, "auto").strip().lower() in {"1", "on", "true", "yes"}


def _cache_dirs() -> list[Path]:
    return [Path(__file__).with_name("_build"), Path.home() / ".cache" / "marl" / "kernels"]


def _compiler() -> str | None:
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def build(name: str, quiet: bool = False) -> Path:
    """Compile kernel ``name`` (if not already cached) and return the shared library's path.

    Raises :class:`KernelBuildError` with the compiler's message on failure."""
    src = SOURCES[name]
    cxx = _compiler()
    if cxx is None:
        raise KernelBuildError("no C++ compiler found (set CXX, or install g++)")
    key = hashlib.sha256(src.read_bytes() + " ".join((cxx, *FLAGS, cpu_signature())).encode()).hexdigest()[
        :16
    ]
    for folder in _cache_dirs():
        lib = folder / f"{name}-{key}.so"
        if lib.exists():
            return lib
    errors = []
    for folder in _cache_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
            os.close(fd)
        except OSError as err:
            errors.append(f"{folder}: {err}")
            continue
        proc = subprocess.run([cxx, *FLAGS, "-o", tmp, str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(tmp)
            raise KernelBuildError(f"{cxx} failed on {src.name}:\n{proc.stderr.strip()}")
        lib = folder / f"{name}-{key}.so"
        os.replace(tmp, lib)  # atomic: a concurrent build of the same key writes the same file
        if not quiet:
            print(f"marl: built the {name} kernel ({lib})", file=sys.stderr)
        return lib
    raise KernelBuildError("no writable cache folder: " + "; ".join(errors))


@cache
def library(name: str) -> str | None:
    """Path of kernel ``name``'s shared library, or ``None`` (after one line on stderr) where the kernels
    are off or cannot be built."""
    if not enabled():
        return None
    if _DEVICE["name"] != "cpu":
        print(
            f"marl: the {name} kernel is CPU code; on {_DEVICE['name']} MindSpore's path is used",
            file=sys.stderr,
        )
        return None
    try:
        return str(build(name, quiet=True))
    except KernelBuildError as err:
        if _required():
            raise
        first = str(err).splitlines()[0]
        print(f"marl: the {name} kernel is unavailable ({first}); using the reference path", file=sys.stderr)
        return None


def main() -> int:
    """``python -m marl.kernels``: build every kernel now (``make kernels``)."""
    for name in SOURCES:
        try:
            print(f"{name}: {build(name, quiet=True)}")
        except KernelBuildError as err:
            print(f"{name}: not built ({err}); the library will use the MindSpore reference path")
    return 0
