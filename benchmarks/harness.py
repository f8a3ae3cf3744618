"""The header every benchmark writes above its table: the command, date, code commit, engine version,
package versions, machine and the load at start and end, so that a result file says what made it.

Use::

    run = harness.start()          # before the timed work: the clock and the load at start
    ...
    lines = [f"# Title", "", *harness.header_lines(run, __file__, argv), ...]
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from marl.provenance import provenance

# packages a benchmark's numbers may depend on beyond those marl.provenance names; listed when imported
_MORE_PACKAGES = ("torch", "jax", "jaxmarl", "smaclite", "torchrl")


@dataclass(frozen=True)
class Run:
    """When a benchmark started and the 1/5/15-minute load average then (from :func:`start`)."""

    t0: float
    load0: tuple[float, float, float]


def start() -> Run:
    """The clock and the load average now, for :func:`header_lines` to report at the end."""
    return Run(time.time(), os.getloadavg())


ROOT = Path(__file__).resolve().parents[1]


def _shown(arg: str) -> str:
    """An argument as a result file may show it: an absolute path (or ``key=`` one) inside the repository
    made relative to it, one outside reduced to ``<outside>/<name>`` (no outside path enters a result)."""
    key, sep, value = arg.rpartition("=")
    if not value.startswith("/"):
        return arg
    path = Path(value)
    try:
        shown = str(path.resolve().relative_to(ROOT))
    except ValueError:
        shown = f"<outside>/{path.name}"
    return key + sep + shown


def command(script: str | Path, args: Sequence[str], python: str = ".venv/bin/python") -> str:
    """The command line as a result file shows it: ``python benchmarks/<script> args``, repo-relative."""
    return shlex.join([python, f"benchmarks/{Path(script).name}", *map(_shown, args)])


def header(
    run: Run,
    script: str | Path,
    args: Sequence[str],
    *,
    python: str = ".venv/bin/python",
    date_note: str = "",
) -> dict[str, str]:
    """The header as ``{field: text}``: command, date (``date_note`` appended, e.g. the seed), code commit
    and engine version, versions, machine with nproc, load at start and end and the wall-clock since
    ``run`` started."""
    from marl.envs.smac import ENGINE_VERSION  # the embedded engine's version, which the numbers depend on

    entry = provenance("benchmark")
    versions = dict(entry["versions"])
    for name in _MORE_PACKAGES:
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "__version__"):
            versions[name] = str(mod.__version__)
    commit = entry.get("commit")
    code = "not a git checkout"
    if commit:
        code = f"commit {commit[:7]}" + (" with uncommitted changes" if entry.get("dirty") else "")
    load1 = os.getloadavg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return {
        "command": f"`{command(script, args, python)}`",
        "date": date + (f"; {date_note}" if date_note else ""),
        "code": f"{code}; SMAC engine {ENGINE_VERSION}",
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "machine": f"{entry['machine']['cpu']}, nproc {entry['machine']['nproc']}, load at start "
        f"{run.load0[0]:.2f}, at end {load1[0]:.2f}; wall-clock {time.time() - run.t0:.0f} s",
    }


def header_lines(run: Run, script: str | Path, args: Sequence[str], **options: str) -> list[str]:
    """:func:`header` (``options``: its ``python`` and ``date_note``) as the Markdown list lines a result
    file starts with (``- field: text``)."""
    return [f"- {k}: {v}" for k, v in header(run, script, args, **options).items()]
