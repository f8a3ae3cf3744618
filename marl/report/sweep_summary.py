"""The sweep's own summary of its runs: a per-map table (mean ± std over seeds) and one plot of the curves.

The multi-seed statistics (IQM, bootstrap CIs, profiles) are :mod:`marl.report`'s; this is the quick table a
sweep prints when it ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from marl.report.runs import RunResult

METRIC = "test_win_rate"


def _mean_std(values: Sequence[float]) -> str:
    if not values:
        return "—"
    return f"{np.mean(values):.3g} ± {np.std(values):.2g}"


def summary_markdown(
    results: Sequence[RunResult], metric: str = METRIC, threshold: float = 0.95, title: str = ""
) -> str:
    """Per-map table (mean ± std over seeds) followed by a per-run table, as Markdown."""
    pct = f"{threshold:.0%}"
    lines = [f"# {title}" if title else "# Sweep", ""]
    lines += [
        f"| map | runs | final {metric} | env steps to {pct} | reached {pct} | failed |",
        "|---|---|---|---|---|---|",
    ]
    for m in dict.fromkeys(r.map_name for r in results):
        rs = [r for r in results if r.map_name == m]
        ok = [r for r in rs if not r.error]
        reached = [float(r.steps_to) for r in ok if r.steps_to is not None]
        lines.append(
            f"| {m} | {len(rs)} | {_mean_std([r.final for r in ok])} | {_mean_std(reached)} | "
            f"{len(reached)}/{len(ok)} | {len(rs) - len(ok)} |"
        )
    lines += [
        "",
        "Mean ± std over the seeds that finished; steps are over the runs that reached the "
        f"threshold. {metric} comes from each run's greedy test phases (log.jsonl).",
        "",
    ]
    lines += [f"| map | seed | final {metric} | steps to {pct} | run folder |", "|---|---|---|---|---|"]
    for r in results:
        final = f"failed: {_cut(r.error.splitlines()[-1], 80)}" if r.error else f"{r.final:.3f}"
        steps = "—" if r.steps_to is None else str(r.steps_to)
        lines.append(f"| {r.map_name} | {r.seed} | {final} | {steps} | {Path(r.run_dir).name} |")
    if any(r.error for r in results):
        lines += [
            "",
            "A failed run's whole error: the end of its folder's `stdout.log` (also `summary.json`).",
        ]
    return "\n".join(lines) + "\n"


def _cut(text: str, n: int) -> str:
    """``text``, or its first ``n`` characters and an ellipsis."""
    return text if len(text) <= n else text[:n] + "…"


def plot_sweep(results: Sequence[RunResult], png_path: str | Path, metric: str = METRIC) -> Path:
    """One panel per map: every seed's curve (thin) and their mean on a common step grid (thick)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    maps = list(dict.fromkeys(r.map_name for r in results))
    fig = Figure(figsize=(4.5 * max(1, len(maps)), 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(maps)), squeeze=False)[0]
    for ax, m in zip(axes, maps, strict=False):
        curves = [r.curve for r in results if r.map_name == m and r.curve]
        for r in (r for r in results if r.map_name == m and r.curve):
            ts, vs = zip(*r.curve, strict=True)
            ax.plot(ts, vs, lw=0.8, alpha=0.5, label=f"seed {r.seed}")
        if curves:
            grid = np.linspace(0, min(c[-1][0] for c in curves), 50)
            ys = [np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves]
            ax.plot(grid, np.mean(ys, axis=0), lw=2.2, color="black", label="mean")
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(m)
        ax.set_xlabel("env steps")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    png_path = Path(png_path)
    fig.savefig(png_path, dpi=100)
    return png_path
