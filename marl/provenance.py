"""Where a run's numbers came from: the code's git commit, the package versions, the machine and the
environment's engine (its version and resolved backend, e.g. the embedded SMAC engine 0.9.0), appended to
``<run>/provenance.jsonl`` at every launch and resume (one JSON object a line), and carried into the run's
record (:mod:`marl.report.records`), so that a committed result names the code, machine and engine that
made it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROVENANCE_FILE = "provenance.jsonl"
_ROOT = Path(__file__).resolve().parents[1]  # the checkout that holds the package, when it is one


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def code_version(root: Path = _ROOT) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the git checkout at ``root`` (``dirty``: tracked files changed since the
    commit); ``{"commit": None}`` when the package is not run from a git checkout."""
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None}
        porcelain = [*git, "status", "--porcelain", "--untracked-files=no"]
        status = subprocess.run(porcelain, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None}
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def _versions() -> dict[str, str]:
    """Versions of Python and of the packages a run's numbers depend on (those already imported)."""
    out = {"python": platform.python_version()}
    for name in ("mindspore", "numpy", "numba", "ray"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "__version__"):
            out[name] = str(mod.__version__)
    return out


def provenance(event: str, engine: dict[str, Any] | None = None) -> dict[str, Any]:
    """One provenance entry: ``event`` (``start`` or ``resume``), UTC time, code, versions, machine and,
    when the env has a versioned engine, ``engine`` (the env's ``engine_info()``)."""
    entry = {
        "event": event,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **code_version(),
        "versions": _versions(),
        "machine": {"cpu": cpu_model(), "nproc": os.cpu_count()},
    }
    if engine:
        entry["engine"] = dict(engine)
    return entry


def append_provenance(run_dir: Path, event: str, engine: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append :func:`provenance` of ``event`` to ``run_dir``'s :data:`PROVENANCE_FILE`; returns the entry.
    A resume on another engine than the run's last launch prints a warning (the run then mixes engines,
    and the report keeps it apart from runs on one engine)."""
    entry = provenance(event, engine)
    before = engines_of(read_provenance(run_dir))
    if before and engine_label(before[-1]) != engine_label(entry.get("engine")):
        print(
            f"[run] warning: this run was launched on engine {engine_label(before[-1])} and now continues on "
            f"{engine_label(entry.get('engine'))}; its results mix two engines"
        )
    with open(Path(run_dir) / PROVENANCE_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
    return entry


# Pre-release engine versions whose dynamics a release kept unchanged: the release's name stands for them
# wherever runs are labelled and pooled. tests/test_engine_version.py holds both to one fingerprint.
RELEASED_AS: dict[str, str] = {"0.9.2": "1.0.0"}


def engine_label(record: dict[str, Any] | None) -> str:
    """One short text per engine record, the key the report pools runs by: ``sim 1.0.0``, ``sim 1.0.0,
    smacv2 generator 0.9.0``, ``sc2 4.10.0 (Base75689), smac layer 1.0.0``; ``unknown`` without a record
    (runs recorded before engine versions, and envs without a versioned engine). A pre-release version in
    :data:`RELEASED_AS` is named by its release (same dynamics)."""
    if not record:
        return "unknown"
    version = record.get("engine_version", "?")
    version = RELEASED_AS.get(version, version)
    if record.get("backend") == "sc2":
        text = f"sc2 {record.get('game_version', 'unknown')}, smac layer {version}"
    else:
        text = f"{record.get('backend', '?')} {version}"
    if record.get("generator_version"):
        text += f", smacv2 generator {record['generator_version']}"
    if record.get("candidate_rules"):
        text += f", candidate rules {record['candidate_rules']}"
    return text


def engines_of(entries: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The distinct engine records of a run's provenance entries, in launch order (launches that recorded
    none are skipped: a run either records its engine at every launch or, before engine versions, never)."""
    out: list[dict[str, Any]] = []
    for entry in entries or ():
        engine = entry.get("engine")
        if isinstance(engine, dict) and engine and engine not in out:
            out.append(engine)
    return out


def read_provenance(run_dir: Path) -> list[dict[str, Any]]:
    """Every entry of ``run_dir``'s :data:`PROVENANCE_FILE` (none when the run predates it); lines that do
    not parse (a crash mid-write) are skipped."""
    path = Path(run_dir) / PROVENANCE_FILE
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
