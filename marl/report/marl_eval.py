"""Runs in marl-eval's JSON layout (InstaDeep's marl-eval, the tool of Gorsane et al. 2022), so that its
tools and other libraries' results can be read beside ours.

Layout (facts from marl-eval's README and its JSON logger)::

    {env: {task: {ALGORITHM: {"seed_<k>": {"step_0": {"step_count": int, "<metric>": [float, ...]},
                                           ...,
                                           "step_<n>": {...},
                                           "absolute_metrics": {"<metric>": [float, ...]}}}}}}

Task names are lower case and algorithm names upper case (marl-eval's own normal form); every metric is a
list (one element here: each test phase logs its mean); ``absolute_metrics`` must be the last key of a run
(marl-eval reads the last step as the absolute metric) and holds the best checkpoint re-evaluated over ten
times the test episodes. marl-eval needs every run of an environment to hold the same number of steps and
trims to the shortest otherwise: :func:`check_marl_eval` reports that as a warning. marl-eval's JSON
logger also writes ``elapsed_time`` into each step, but its data check (``DiagnoseData.check_data``, 0.0.4)
then finds the steps' metrics differ from the absolute metrics', so it is not written here.

The layout has no room for metadata (marl-eval reads every top-level key as an environment and every key of
a step as a metric), so the engine goes into the environment's name, the one key marl-eval keeps results
apart by, as Gymnasium's ids carry their version: runs on an engine are under ``smac (sim 0.9.0)``; runs
recorded before engine versions keep the bare name (``smac``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from marl.report.runs import RETURN_KEY, Run

ABSOLUTE = "absolute_metrics"
STEP_RE = re.compile(r"step_(\d+)$")


def _metrics_at(run: Run, with_wins: bool) -> list[dict[str, Any]]:
    returns = dict(run.extra.get(RETURN_KEY, []))
    steps = []
    for t, value in run.curve:
        step: dict[str, Any] = {"step_count": int(t)}
        if with_wins:
            step["win_rate"] = [float(value)]
        step["return"] = [float(returns.get(t, math.nan))]
        steps.append(step)
    return steps


def to_marl_eval(runs: Sequence[Run], metric: str = "test_win_rate") -> tuple[dict[str, Any], list[str]]:
    """The runs as marl-eval JSON (see the module docstring) and notes on the runs left out: a run
    without an absolute metric (no checkpoint evaluated) cannot be read by marl-eval."""
    with_wins = metric == "test_win_rate"
    data: dict[str, Any] = {}
    notes = []
    for run in sorted(runs, key=lambda r: (r.env, r.task, r.alg, r.seed)):
        if run.absolute is None:
            notes.append(
                f"{run.run_dir}: left out of marl-eval JSON (no absolute metric: no checkpoint, or it failed)"
            )
            continue
        steps = _metrics_at(run, with_wins)
        if any(not math.isfinite(s["return"][0]) for s in steps):
            notes.append(f"{run.run_dir}: left out of marl-eval JSON (a test phase lacks its return)")
            continue
        body: dict[str, Any] = {f"step_{i}": s for i, s in enumerate(steps)}
        absolute: dict[str, Any] = {"return": [float(run.absolute["return_mean"])]}
        if with_wins:
            absolute = {"win_rate": [float(run.absolute["win_rate"])], **absolute}
        body[ABSOLUTE] = absolute  # last key: marl-eval reads the last entry as the absolute metric
        env = run.env if run.engine == "unknown" else f"{run.env} ({run.engine.lower()})"
        alg = data.setdefault(env, {}).setdefault(run.task.lower(), {}).setdefault(run.alg.upper(), {})
        key = f"seed_{run.seed}"
        if key in alg:
            notes.append(f"{run.run_dir}: left out of marl-eval JSON (a second run of seed {run.seed})")
            continue
        alg[key] = body
    return data, notes


def _numbers(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    )


def _check_run(where: str, run: Any, errors: list[str]) -> tuple[int, set[str]]:
    """Check one run's steps and absolute metrics; returns (number of steps, metric names)."""
    if not isinstance(run, dict) or not run:
        errors.append(f"{where}: a run must be a non-empty object")
        return 0, set()
    keys = list(run)
    if keys[-1] != ABSOLUTE:
        errors.append(f"{where}: the last key must be {ABSOLUTE!r}, got {keys[-1]!r}")
    steps = [k for k in keys if k != ABSOLUTE]
    names: set[str] = set()
    last_count = -1
    for i, key in enumerate(steps):
        m = STEP_RE.match(key)
        if not m or int(m.group(1)) != i:
            errors.append(f"{where}: expected step key 'step_{i}', got {key!r}")
            continue
        step = run[key]
        count = step.get("step_count") if isinstance(step, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < last_count:
            errors.append(f"{where}/{key}: step_count must be a non-decreasing int, got {count!r}")
            continue
        last_count = count
        these = {k for k in step if k != "step_count"}
        if i == 0:
            names = these
        elif these != names:
            errors.append(f"{where}/{key}: metrics {sorted(these)} differ from step_0's {sorted(names)}")
        errors.extend(
            f"{where}/{key}/{n}: must be a non-empty list of finite numbers"
            for n in these
            if not _numbers(step[n])
        )
    absolute = run.get(ABSOLUTE)
    if not isinstance(absolute, dict) or set(absolute) != names:
        got = sorted(absolute) if isinstance(absolute, dict) else absolute
        errors.append(f"{where}/{ABSOLUTE}: must hold the steps' metrics {sorted(names)}, got {got}")
    else:
        errors.extend(
            f"{where}/{ABSOLUTE}/{n}: must be a non-empty list of finite numbers"
            for n in names
            if not _numbers(absolute[n])
        )
    return len(steps), names


def check_marl_eval(data: Any) -> list[str]:
    """Raise ``ValueError`` listing every way ``data`` breaks marl-eval's layout; return warnings (runs of
    one environment with unequal step counts, which marl-eval trims to the shortest)."""
    errors: list[str] = []
    warnings: list[str] = []
    if not isinstance(data, dict) or not data:
        raise ValueError("marl-eval JSON must be a non-empty object {environment: {task: {algorithm: ...}}}")
    for env, tasks in data.items():
        counts: dict[int, str] = {}
        metric_sets: set[frozenset[str]] = set()
        if not isinstance(tasks, dict) or not tasks:
            errors.append(f"{env}: must map task names to algorithms")
            continue
        for task, algs in tasks.items():
            if task != task.lower():
                errors.append(f"{env}/{task}: task names are lower case in marl-eval")
            for alg, runs in (algs or {}).items():
                if alg != alg.upper():
                    errors.append(f"{env}/{task}/{alg}: algorithm names are upper case in marl-eval")
                if not isinstance(runs, dict) or not runs:
                    errors.append(f"{env}/{task}/{alg}: must map run names to steps")
                    continue
                for name, run in runs.items():
                    n, names = _check_run(f"{env}/{task}/{alg}/{name}", run, errors)
                    counts.setdefault(n, f"{env}/{task}/{alg}/{name}")
                    metric_sets.add(frozenset(names))
        if len(metric_sets) > 1:
            errors.append(f"{env}: runs log different metrics: {sorted(sorted(s) for s in metric_sets)}")
        if len(counts) > 1:
            shown = ", ".join(f"{n} ({w})" for n, w in sorted(counts.items()))
            warnings.append(
                f"{env}: runs hold different numbers of steps: {shown}; marl-eval keeps the fewest"
            )
    if errors:
        raise ValueError("not marl-eval JSON:\n  " + "\n  ".join(errors))
    return warnings
