"""One ``Logger.log(key, value, t)`` fanning out to JSONL, MindInsight and the console.

Files in the run folder:

* ``log.jsonl``  – one JSON object per line: ``{"t", "key", "value", "time"}`` for scalars,
  ``{"t", "key", "hist": {...}}`` for histogram summaries, ``{"key", "text"}`` for text (the config);
  appended to, so a resumed run continues the same file (first cut back to the checkpoint's ``t_env``,
  ``rewind_to``, so that every series stays monotonic);
* ``events.out.events.summary.*`` – MindInsight summary (written in the run folder itself, because
  MindInsight only looks one folder deep below ``--summary-base-dir``: with ``results/`` as the base,
  every run folder is one train job);
* ``curves.png`` – written by :meth:`Logger.close`.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from marl.config import Config, config_to_dict
from marl.logging.console import Console
from marl.logging.mindinsight import SummarySink
from marl.logging.plots import plot_curves
from marl.run_folder import LOG_FILE, rewind_logs

CURVES_FILE = "curves.png"


class Logger:
    """Scalar/histogram/text logging for one run; the resolved config is logged as text at construction."""

    def __init__(
        self,
        run_dir: str | Path,
        cfg: Config | None,
        t_max: int,
        console: bool = True,
        mindinsight: bool = True,
        progress_bar: bool = True,
        summary_dir: str | Path | None = None,
        rewind_to: int | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        kept = rewind_logs(self.run_dir, rewind_to) if rewind_to is not None else []
        self.t_max = int(t_max)
        self.latest: dict[str, float] = {}
        self._jsonl = open(self.run_dir / LOG_FILE, "a", encoding="utf-8")  # closed in close()
        start = rewind_to or 0  # a resumed run's bar starts where the run stands
        self._console = Console(self.t_max, bar=progress_bar, start=start) if console else None
        self._summary = SummarySink(summary_dir or self.run_dir) if mindinsight else None
        if self._summary is not None:  # a resumed run's fresh event file holds the kept history too
            for rec in kept:
                self._summary.scalar(rec["key"], float(rec["value"]), int(rec["t"]))
        self._closed = False
        if cfg is not None:
            self.log_text("config", yaml.safe_dump(config_to_dict(cfg), sort_keys=False))

    # ------------------------------------------------------------------------------------- sinks
    def _write_json(self, record: dict[str, Any]) -> None:
        self._jsonl.write(json.dumps(record, allow_nan=False) + "\n")
        self._jsonl.flush()

    def log(self, key: str, value: float, t: int) -> None:
        """Log scalar ``value`` under ``key`` at env step ``t`` to every sink."""
        self._check_open()
        if not isinstance(key, str) or not key:
            raise ValueError(f"log key must be a non-empty string, got {key!r}")
        try:
            value = float(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"log value for {key!r} must be a number, got {value!r}") from exc
        t = int(t)
        self.latest[key] = value
        record: dict[str, Any] = {"t": t, "key": key, "value": value, "time": round(time.time(), 3)}
        if not math.isfinite(value):  # strict JSON has no NaN/inf: null plus the original spelled out
            record.update(value=None, nonfinite=str(value))
        self._write_json(record)
        if self._summary is not None:
            self._summary.scalar(key, value, t)

    def log_histogram(self, key: str, values: np.ndarray, t: int) -> None:
        """Log the distribution of ``values`` (MindInsight histogram; summary statistics in JSONL)."""
        self._check_open()
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        finite = flat[np.isfinite(flat)]
        stats = {"n": int(flat.size), "n_finite": int(finite.size)}
        if finite.size:
            stats.update(
                mean=float(finite.mean()),
                std=float(finite.std()),
                min=float(finite.min()),
                max=float(finite.max()),
            )
        self._write_json({"t": int(t), "key": key, "hist": stats, "time": round(time.time(), 3)})
        if self._summary is not None:
            self._summary.histogram(key, flat, int(t))

    def log_text(self, key: str, text: str) -> None:
        """Log a text block (for example the resolved config) to JSONL and MindInsight."""
        self._check_open()
        self._write_json({"key": key, "text": str(text), "time": round(time.time(), 3)})
        if self._summary is not None:
            self._summary.text(key, str(text))

    def advance(self, t_env: int) -> None:
        """Move the console's live progress bar to ``t_env`` (between interval lines)."""
        if self._console is not None:
            self._console.advance(int(t_env))

    def log_lineage(
        self, network: str, hparams: dict[str, Any], metrics: dict[str, float], train_size: int
    ) -> None:
        """The run's hyper-parameters and final metrics for MindInsight's lineage comparison (and JSONL)."""
        self._check_open()
        clean = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
        hp = {k: v if not isinstance(v, float) or math.isfinite(v) else str(v) for k, v in hparams.items()}
        record = {"t": int(train_size), "key": "lineage", "network": network, "hparams": hp, "metrics": clean}
        self._write_json(record)
        if self._summary is not None:
            self._summary.lineage(network, hp, clean, int(train_size))

    def print_progress(self, t_env: int, episode: int, extra: dict[str, Any] | None = None) -> str:
        """Print the interval line (t_env/t_max, episodes, return, win rates, ε, loss, sps, ETA).

        Values missing from ``extra`` are taken from the latest logged scalars. Returns the line.
        """
        self._check_open()
        if self._console is None:
            return ""
        clean = {k: v for k, v in (extra or {}).items() if v is not None and not _nan(v)}
        return self._console.progress(int(t_env), int(episode), self.latest, clean)

    def print_table(self, t_env: int) -> None:
        """Print every scalar's latest value as one table (the trainer calls it at test time)."""
        self._check_open()
        if self._console is not None:
            self._console.table(int(t_env), self.latest)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"Logger for {self.run_dir} is closed")

    # ----------------------------------------------------------------------------------- closing
    @property
    def mindinsight_active(self) -> bool:
        """True while MindInsight summaries are being written."""
        return self._summary is not None and self._summary.active

    def close(self, plot: bool = True) -> Path | None:
        """Flush and close every sink, then write ``curves.png``; returns the PNG path (idempotent)."""
        if self._closed:
            return None
        if self._console is not None:
            self._console.close()
        if self._summary is not None:
            self._summary.close()
        self._jsonl.close()
        self._closed = True
        return self.plot() if plot else None

    def plot(self) -> Path:
        """Write ``curves.png`` from what is logged so far (also called during a run)."""
        return plot_curves(self.run_dir / LOG_FILE, self.run_dir / CURVES_FILE, title=self.run_dir.name)

    def __enter__(self) -> Logger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
