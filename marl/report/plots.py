"""The report's figures, drawn with rliable's plotting helpers: performance profiles (fraction of runs
whose final score exceeds tau, per algorithm over the maps they share) and sample-efficiency curves (IQM
of the test score over env steps, one panel per map, 95 % CI bands)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from marl.report import stats
from marl.report.runs import Run
from marl.report.summary import groups, score_matrices

GRID_POINTS = 25


def _figure(n_panels: int, size: tuple[float, float] = (4.8, 3.8)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * max(1, n_panels), size[1]))
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, max(1, n_panels), squeeze=False)[0]


def plot_profiles(runs: Sequence[Run], png: Path, metric: str, reps: int, seed: int) -> Path | None:
    """Performance profiles with 95 % CI bands, one panel per environment; ``None`` when nothing to draw."""
    from rliable import plot_utils

    mats = score_matrices(runs)
    if not mats:
        return None
    fig, axes = _figure(len(mats))
    for ax, (env, scores) in zip(axes, sorted(mats.items()), strict=True):
        lo = min(float(v.min()) for v in scores.values())
        hi = max(float(v.max()) for v in scores.values())
        taus = np.linspace(0.0, 1.0, 41) if metric == "test_win_rate" else np.linspace(lo, hi, 41)
        prof, cis = stats.performance_profiles(scores, taus, reps, seed)
        plot_utils.plot_performance_profiles(
            prof,
            taus,
            performance_profile_cis=cis,
            ax=ax,
            xlabel=f"final {metric} (τ)",
            ylabel="fraction of runs with score > τ",
            labelsize="medium",
            ticklabelsize="small",
        )
        n, k = next(iter(scores.values())).shape
        ax.set_title(f"{env}: {k} map(s), {n} seed(s) each", fontsize="medium")
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return Path(png)


def curve_grid(runs: Sequence[Run], points: int = GRID_POINTS) -> np.ndarray:
    """Env steps from 0 to the shortest run's last test phase, where every curve is interpolated."""
    return np.linspace(0.0, float(min(r.budget for r in runs)), points)


def interpolated(runs: Sequence[Run], grid: np.ndarray) -> np.ndarray:
    """(runs, 1, points): each run's test curve at ``grid`` (linear between test phases)."""
    rows = [np.interp(grid, [t for t, _ in r.curve], [v for _, v in r.curve]) for r in runs]
    return np.asarray(rows)[:, None, :]


def plot_sample_efficiency(runs: Sequence[Run], png: Path, metric: str, reps: int, seed: int) -> Path:
    """IQM of the test curve over env steps with 95 % CI bands: one panel per (env, map), one line per alg."""
    from rliable import plot_utils

    by_task: dict[tuple[str, str], dict[str, list[Run]]] = defaultdict(dict)
    for (env, task, alg), rs in groups(runs).items():
        by_task[(env, task)][alg] = rs
    fig, axes = _figure(len(by_task))
    for ax, ((env, task), algs) in zip(axes, sorted(by_task.items()), strict=True):
        grid = curve_grid([r for rs in algs.values() for r in rs])
        point, ci = stats.iqm_curves({a: interpolated(rs, grid) for a, rs in algs.items()}, reps, seed)
        plot_utils.plot_sample_efficiency_curve(
            grid,
            point,
            ci,
            algorithms=sorted(algs),
            ax=ax,
            xlabel="env steps",
            ylabel=f"IQM {metric}",
            labelsize="medium",
            ticklabelsize="small",
            marker="",
        )
        seeds = ", ".join(f"{a} {len(rs)}" for a, rs in sorted(algs.items()))
        ax.set_title(f"{env} {task} (seeds: {seeds})", fontsize="medium")
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return Path(png)
