"""Console sink: one readable line per log interval, a live progress bar between intervals (tqdm), and
the full table of scalars at test time.

On a terminal a tqdm bar at the bottom advances with every rollout (percentage, steps, steps/s, ETA) and the
interval lines and tables are printed above it; anywhere else (CI logs, files, pipes) there is no bar and
every report is one plain line, so logs never fill with carriage-return spam.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from tqdm import tqdm

# Progress fields: label -> the logged keys it is read from, first found wins.
PROGRESS_FIELDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("ret", ("return_mean", "return", "episode_return"), "{:.2f}"),
    ("win", ("battle_won_mean", "win_rate"), "{:.2f}"),
    ("test_ret", ("test_return_mean", "test_return"), "{:.2f}"),
    ("test_win", ("test_battle_won_mean", "test_win_rate"), "{:.2f}"),
    ("eps", ("epsilon",), "{:.3f}"),
    ("loss", ("loss", "loss_td"), "{:.4g}"),
)


def format_duration(seconds: float) -> str:
    """``3725`` -> ``'1h02m'``, ``95`` -> ``'1m35s'``, ``7`` -> ``'7s'``; unknown -> ``'?'``."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s >= 86400:
        return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def format_value(value: float) -> str:
    """Short, readable number for console lines."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e12:
        return str(int(value))
    return f"{value:.4g}"


class Console:
    """Interval lines, test-time tables and (on a terminal, unless ``bar=False``) a live progress bar that
    starts at ``start`` (a resumed run's env step, so its rate and ETA count only this process's steps)."""

    def __init__(
        self,
        t_max: int,
        stream: TextIO | None = None,
        tty: bool | None = None,
        bar: bool = True,
        start: int = 0,
    ) -> None:
        self.t_max = max(int(t_max), 1)
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self._bar: tqdm | None = None
        if self.tty and bar:
            fmt = "{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"
            self._bar = tqdm(
                total=self.t_max,
                initial=min(int(start), self.t_max),
                file=self.stream,
                unit="step",
                unit_scale=True,
                dynamic_ncols=True,
                leave=False,
                bar_format=fmt,
            )
        self._t0: float | None = None  # wall time and t_env of the first progress report
        self._t_env0 = 0
        self._last: tuple[float, int] | None = None

    def _write(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line, file=self.stream)  # printed above the bar, which is redrawn below
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def advance(self, t_env: int) -> None:
        """Move the live bar to ``t_env`` (called after every rollout; nothing without a bar)."""
        if self._bar is not None and t_env > self._bar.n:
            self._bar.update(min(t_env, self.t_max) - self._bar.n)

    def table(self, t: int, values: Mapping[str, float]) -> None:
        """Every scalar (latest value) as an aligned two-column table headed by the env step."""
        if not values:
            return
        width = max(len(k) for k in values)
        rows = [f"  {k:<{width}}  {format_value(v)}" for k, v in sorted(values.items())]
        self._write("\n".join([f"-- t_env {t:,} " + "-" * max(0, width - 4)] + rows))

    def progress(
        self,
        t_env: int,
        episode: int,
        latest: Mapping[str, float],
        extra: Mapping[str, Any],
        now: float | None = None,
    ) -> str:
        """Print (and return) the interval line; ``extra`` wins over the latest logged values."""
        now = time.monotonic() if now is None else now
        if self._t0 is None:
            self._t0, self._t_env0 = now, t_env
        elapsed = now - self._t0
        done = t_env - self._t_env0
        sps = done / elapsed if elapsed > 0 and done > 0 else float("nan")
        if self._last is not None and now > self._last[0] and t_env > self._last[1]:
            recent = (t_env - self._last[1]) / (now - self._last[0])
            sps = recent if not math.isfinite(sps) else 0.5 * (sps + recent)
        self._last = (now, t_env)
        merged = {**latest, **extra}
        if not math.isfinite(sps) and merged.get("steps_per_sec"):  # the first line: the trainer's own rate
            sps = float(merged["steps_per_sec"])
        eta = (self.t_max - t_env) / sps if math.isfinite(sps) and sps > 0 else float("nan")
        pct = 100.0 * min(t_env, self.t_max) / self.t_max
        parts = [f"{pct:5.1f}%", f"t {t_env:,}/{self.t_max:,}", f"ep {episode:,}"]
        for label, keys, fmt in PROGRESS_FIELDS:
            key = next((k for k in keys if k in merged), None)
            if key is not None and merged[key] is not None:
                parts.append(f"{label} " + fmt.format(float(merged[key])))
        parts.append(f"{sps:,.0f} sps" if math.isfinite(sps) else "- sps")
        parts.append(f"ETA {format_duration(eta)}")
        line = " | ".join(parts)
        self.advance(t_env)
        self._write(line)
        return line

    def close(self) -> None:
        """Remove the live bar (the printed lines stay)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
