"""Learning curves from a run's ``log.jsonl``: return and win rate (train and greedy test) vs env steps."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

# (panel title, [(curve label, logged keys tried in order)])
PANELS: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    ("Return", (("train", ("return_mean", "return")), ("test", ("test_return_mean", "test_return")))),
    (
        "Win rate",
        (("train", ("battle_won_mean", "win_rate")), ("test", ("test_battle_won_mean", "test_win_rate"))),
    ),
)


def read_scalars(jsonl_path: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``key -> [(t, value), ...]`` sorted by t, from a JSONL log (lines without a value are skipped; a log
    not written yet has no scalars)."""
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    if not Path(jsonl_path).is_file():
        return {}
    with open(jsonl_path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            value = rec.get("value")
            if isinstance(value, (int, float)) and "t" in rec and "key" in rec:
                series[rec["key"]].append((int(rec["t"]), float(value)))
    return {k: sorted(v) for k, v in series.items()}


def plot_curves(jsonl_path: str | Path, png_path: str | Path, title: str | None = None) -> Path:
    """Write the learning-curve PNG (Agg backend) and return its path; panels without data say so."""
    # An explicit Agg canvas: no pyplot global state, no display needed, whatever backend is configured.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = read_scalars(jsonl_path)
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(PANELS), squeeze=False)
    for ax, (panel, curves) in zip(axes[0], PANELS, strict=True):
        drawn = 0
        for label, keys in curves:
            key = next((k for k in keys if series.get(k)), None)
            if key is None:
                continue
            points = [(t, v) for t, v in series[key] if math.isfinite(v)]
            if not points:
                continue
            ts = [p[0] for p in points]
            vs = [p[1] for p in points]
            ax.plot(ts, vs, marker="o" if len(ts) < 20 else None, markersize=3, label=f"{label} ({key})")
            drawn += 1
        ax.set_title(panel)
        ax.set_xlabel("env steps (t_env)")
        ax.grid(True, alpha=0.3)
        if drawn:
            ax.legend(loc="best", fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data logged", ha="center", va="center", transform=ax.transAxes)
        if panel == "Win rate":
            ax.set_ylim(-0.02, 1.02)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    return png_path
