"""Which engine made each run, and the report's rule: runs of one environment are pooled (rows, probability
of improvement, aggregates over maps) only when they share one engine, i.e. one engine version and one
resolved backend (``sim``, or ``sc2`` with the game's build). ``scripts/report.py --allow-mixed-engines``
pools them anyway and names each row's engines.

A run's engine is its label (:func:`marl.report.runs.engine_of`): ``sim 0.9.0``; ``unknown`` for a run
recorded before engine versions existed (no engine in its provenance), which may come from any earlier
engine and so is not pooled with versioned runs either.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from marl.report.runs import Run

SHOWN = 4  # runs named per engine in the refusal; the rest are counted


def engines_by_env(runs: Sequence[Run]) -> dict[str, dict[str, list[Run]]]:
    """Per environment (sorted), its runs by engine label (sorted)."""
    out: dict[str, dict[str, list[Run]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        out[r.env][r.engine].append(r)
    return {env: {label: by[label] for label in sorted(by)} for env, by in sorted(out.items())}


def _names(runs: list[Run]) -> str:
    names = sorted(r.run_dir.name for r in runs)
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def mixed_engines(runs: Sequence[Run]) -> str | None:
    """The refusal message when some environment's runs come from more than one engine, or a run changed
    engine on resume; None when every environment's runs share one engine."""
    parts = []
    for env, by in engines_by_env(runs).items():
        if len(by) > 1 or any(" -> " in label for label in by):
            parts.append(
                f"{env}: "
                + "; ".join(f"{len(rs)} run(s) on {label} ({_names(rs)})" for label, rs in by.items())
            )
    if not parts:
        return None
    labels = {label for by in engines_by_env(runs).values() for label in by}
    notes = []
    if "unknown" in labels:
        notes.append(
            '"unknown" runs were recorded before engine versions existed (no engine in their '
            "provenance.jsonl or record) and may come from any earlier engine"
        )
    if any(" -> " in label for label in labels):
        notes.append('a label "A -> B" is a run resumed on another engine')
    return (
        "refusing to pool runs of different engines (a report pools the runs of one environment only when "
        "they share one engine version and backend): "
        + " | ".join(parts)
        + ". "
        + "".join(n[0].upper() + n[1:] + ". " for n in notes)
        + "Report each engine's runs separately, or give --allow-mixed-engines to pool them anyway (each "
        "row then names its engines)."
    )
