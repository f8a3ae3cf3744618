"""Console sink: grouped scalar lines and a compact one-line progress report with ETA.

On a terminal the progress line is redrawn in place (carriage return); anywhere else (CI logs, files,
pipes) every report is one plain line, so logs never fill with carriage-return spam.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

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
    """Prints grouped scalars and progress reports to ``stream`` (default stdout)."""

    def __init__(self, t_max: int, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.t_max = max(int(t_max), 1)
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self._open_line = False  # a progress line is drawn on a TTY without a newline yet
        self._t0: float | None = None  # wall time and t_env of the first progress report
        self._t_env0 = 0
        self._last: tuple[float, int] | None = None

    def _write(self, line: str) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False
        self.stream.write(line + "\n")
        self.stream.flush()

    def scalars(self, t: int, values: Mapping[str, float]) -> None:
        """One line with every scalar logged at env step ``t``."""
        if values:
            body = "  ".join(f"{k} {format_value(v)}" for k, v in sorted(values.items()))
            self._write(f"t_env {t:>10,}  {body}")

    def progress(
        self,
        t_env: int,
        episode: int,
        latest: Mapping[str, float],
        extra: Mapping[str, Any],
        now: float | None = None,
    ) -> str:
        """Print (and return) the progress line; ``extra`` wins over the latest logged values."""
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
        eta = (self.t_max - t_env) / sps if math.isfinite(sps) and sps > 0 else float("nan")
        pct = 100.0 * min(t_env, self.t_max) / self.t_max
        parts = [f"{pct:5.1f}%", f"t {t_env:,}/{self.t_max:,}", f"ep {episode:,}"]
        merged = {**latest, **extra}
        for label, keys, fmt in PROGRESS_FIELDS:
            key = next((k for k in keys if k in merged), None)
            if key is not None and merged[key] is not None:
                parts.append(f"{label} " + fmt.format(float(merged[key])))
        parts.append(f"{sps:,.0f} sps" if math.isfinite(sps) else "- sps")
        parts.append(f"ETA {format_duration(eta)}")
        line = " | ".join(parts)
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
            self.stream.flush()
            self._open_line = True
        else:
            self._write(line)
        return line

    def close(self) -> None:
        """End an open progress line."""
        if self._open_line:
            self.stream.write("\n")
            self.stream.flush()
            self._open_line = False
