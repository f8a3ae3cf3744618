"""The header every benchmark writes above its table: the command, date, code commit, engine version,
package versions, machine and the load at start and end, so that a result file says what made it.

Use::

    run = harness.start()          # before the timed work: the clock and the load at start
    ...
    lines = [f"# Title", "", *harness.header_lines(run, __file__, argv), ...]

and for two versions of something timed side by side (A/B/A/B, medians, their ratio, CPU time a round)::

    alt = harness.alternate(old_step, new_step, reps=5, names=("old", "new"))
    alt.median("new"), alt.ratio(), alt.round_lines("3m")
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import cycle
from pathlib import Path
from typing import Any

from marl.provenance import provenance

# packages a benchmark's numbers may depend on beyond those marl.provenance names; listed when imported
_MORE_PACKAGES = ("torch", "jax", "jaxmarl", "smaclite", "torchrl", "tensordict")


@dataclass(frozen=True)
class Run:
    """When a benchmark started and the 1/5/15-minute load average then (from :func:`start`)."""

    t0: float
    load0: tuple[float, float, float]


def start() -> Run:
    """The clock and the load average now, for :func:`header_lines` to report at the end."""
    return Run(time.time(), os.getloadavg())


ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"  # every suite's result files


def shown(arg: str) -> str:
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


def script_path(script: str | Path) -> str:
    """A benchmark script (its ``__file__``) as a result file names it: its path from the repository root,
    ``benchmarks/<suite>/<name>.py``; a script outside the repository only as ``benchmarks/<name>.py``."""
    path = Path(script)
    try:
        return (
            path.resolve().relative_to(ROOT).as_posix() if path.is_absolute() else f"benchmarks/{path.name}"
        )
    except ValueError:
        return f"benchmarks/{path.name}"


def command(script: str | Path, args: Sequence[str], python: str = ".venv/bin/python") -> str:
    """The command line as a result file shows it: ``python benchmarks/<suite>/<script> args``,
    repo-relative."""
    return shlex.join([python, script_path(script), *map(shown, args)])


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


def header_line(run: Run, script: str | Path, args: Sequence[str], **options: str) -> str:
    """:func:`header` on one line, for a result file that appends one run at a time below its table:
    ``command: date; code; versions; machine``."""
    fields = header(run, script, args, **options)
    return f"{fields.pop('command')}: " + "; ".join(f"{k} {v}" for k, v in fields.items())


# ------------------------------------------------------------------ alternating timing (A/B/A/B)

ROUND_HEAD = ["| cell | round | side | wall s | CPU s | CPU / wall |", "|---|---|---|---|---|---|"]


@dataclass(frozen=True)
class Round:
    """One timed call of one side: the round (from 0), the side's name, its wall-clock and CPU seconds (user +
    system of this process and of the child processes it waited for: CPU / wall near the threads it kept
    busy) and what the call returned."""

    index: int
    side: str
    wall_s: float
    cpu_s: float
    value: Any = None


@dataclass(frozen=True)
class Alternation:
    """The rounds of :func:`alternate`, in the order they ran."""

    sides: tuple[str, ...]
    rounds: tuple[Round, ...]

    def measures(self, side: str, measure: str = "wall_s") -> list[float]:
        """Every round's ``measure`` of ``side``: ``wall_s``, ``cpu_s``, ``value`` (a number the call
        returned) or a key of the dict the call returned."""
        if side not in self.sides:
            raise ValueError(f"no side {side!r}; the sides are {self.sides}")
        out = []
        for r in self.rounds:
            if r.side == side:
                got = getattr(r, measure) if measure in ("wall_s", "cpu_s", "value") else r.value[measure]
                out.append(float(got))
        return out

    def median(self, side: str, measure: str = "wall_s") -> float:
        """The median over the rounds of ``side``'s ``measure`` (see :meth:`measures`)."""
        return statistics.median(self.measures(side, measure))

    def ratio(self, measure: str = "wall_s", b: str | None = None, a: str | None = None) -> float:
        """Side ``b``'s median over side ``a``'s (by default the second side over the first; above 1: ``b``
        took more)."""
        return self.median(b or self.sides[1], measure) / self.median(a or self.sides[0], measure)

    def by_round(self) -> list[dict[str, Any]]:
        """Per round ``{side: value}``, the sides in the order they ran."""
        out: list[dict[str, Any]] = [{} for _ in range(max((r.index for r in self.rounds), default=-1) + 1)]
        for r in self.rounds:
            out[r.index][r.side] = r.value
        return out

    def round_lines(self, cell: str = "") -> list[str]:
        """One Markdown row a round under :data:`ROUND_HEAD`: wall and CPU seconds and their ratio."""
        return [
            f"| {cell} | {r.index + 1} | {r.side} | {r.wall_s:.3f} | {r.cpu_s:.3f} | "
            f"{r.cpu_s / r.wall_s if r.wall_s > 0 else float('nan'):.2f} |"
            for r in self.rounds
        ]


def cpu_seconds() -> float:
    """CPU seconds so far of this process (all its threads) and of its waited-for children: ``getrusage``
    (microseconds) where the ``resource`` module exists, else ``os.times`` (clock ticks)."""
    try:
        import resource
    except ImportError:  # not a Unix
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_command(argv: Sequence[str], **options: Any) -> str:
    """Run ``argv`` to its end (``options``: ``subprocess.run``'s ``cwd``, ``env``, ``timeout``) and return
    its standard output; a failure raises ``RuntimeError`` with the end of its standard error."""
    out = subprocess.run(list(argv), capture_output=True, text=True, **options)
    if out.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return out.stdout


Side = Callable[[], Any] | Sequence[str]


def in_turn(call: Callable[[Any], Any], items: Sequence[Any]) -> Callable[[], Any]:
    """A side for :func:`alternate`: each call is ``call(item)`` on the next of ``items``, round and round
    (two sides given the same items see them in the same order)."""
    turn = cycle(items)
    return lambda: call(next(turn))


def alternate(
    a: Side, b: Side, reps: int, names: tuple[str, str] = ("a", "b"), warmup: int = 0, **options: Any
) -> Alternation:
    """Time ``a`` and ``b`` alternately, ``a b a b ...`` for ``reps`` rounds each, so a change in the
    machine's load falls on both; ``warmup`` untimed calls of each first. A side is a callable (its return
    value is kept: a rate it measured itself, say) or a command (an argument list, run by
    :func:`run_command` with ``options``; the value is its standard output)."""
    if len(names) != 2 or names[0] == names[1]:
        raise ValueError(f"two different side names needed, got {names}")
    return alternate_all({names[0]: a, names[1]: b}, reps, warmup, **options)


def alternate_all(
    sides: dict[str, Side], reps: int, warmup: int = 0, mirror: bool = False, **options: Any
) -> Alternation:
    """:func:`alternate` over any number of named sides, in the dict's order every round; ``mirror``: every
    second round in the reverse order (``a b b a a b ...``, so a steady drift in the machine's speed falls
    on the sides alike)."""
    if reps < 1 or warmup < 0:
        raise ValueError(f"reps must be >= 1 and warmup >= 0, got {reps} and {warmup}")
    if len(sides) < 2:
        raise ValueError(f"at least two sides needed, got {list(sides)}")
    calls = {
        name: s if callable(s) else (lambda argv=tuple(s): run_command(argv, **options))
        for name, s in sides.items()
    }
    for _ in range(warmup):
        for call in calls.values():
            call()
    rounds = []
    for i in range(reps):
        order = list(calls.items())
        for name, call in order[::-1] if mirror and i % 2 else order:
            c0, t0 = cpu_seconds(), time.perf_counter()
            value = call()
            rounds.append(Round(i, name, time.perf_counter() - t0, cpu_seconds() - c0, value))
    return Alternation(tuple(calls), tuple(rounds))
