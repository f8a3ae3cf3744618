"""Logger: JSONL records, console lines (TTY and plain), progress/ETA, PNG curves, MindInsight files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from marl.config import load_config
from marl.logging import Logger, plot_curves, read_scalars
from marl.logging.console import Console, format_duration


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]


def test_jsonl_records_and_curves_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = load_config("qmix", overrides=["t_max=1000"])
    lg = Logger(tmp_path, cfg, t_max=1000, mindinsight=False)
    for i, t in enumerate((200, 400, 600)):
        lg.log("return_mean", 1.0 + i, t)
        lg.log("battle_won_mean", 0.25 * i, t)
    lg.log("test_return_mean", 5.0, 600)
    lg.log("loss", float("nan"), 600)
    lg.log_histogram("q_taken", np.array([[1.0, 2.0], [3.0, np.inf]]), 600)
    png = lg.close()
    recs = records(tmp_path)
    assert recs[0]["key"] == "config" and "td_lambda: 0.6" in recs[0]["text"]
    scalars = [(r["t"], r["key"], r["value"]) for r in recs if "value" in r]
    assert scalars[:2] == [(200, "return_mean", 1.0), (200, "battle_won_mean", 0.0)]
    assert (600, "loss", None) in scalars and any(r.get("nonfinite") == "nan" for r in recs)
    hist = next(r for r in recs if r["key"] == "q_taken")
    assert hist["t"] == 600 and hist["hist"]["n"] == 4 and hist["hist"]["n_finite"] == 3
    assert hist["hist"]["mean"] == pytest.approx(2.0) and hist["hist"]["max"] == 3.0
    assert read_scalars(tmp_path / "log.jsonl")["return_mean"] == [(200, 1.0), (400, 2.0), (600, 3.0)]
    assert png == tmp_path / "curves.png"
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 500 and im.size[1] > 200
        pixels = np.asarray(im.convert("RGB")).reshape(-1, 3)
        assert len(np.unique(pixels, axis=0)) > 10  # something was drawn
    assert capsys.readouterr().out == ""  # scalars alone print nothing: one line per interval, tables at test
    with pytest.raises(RuntimeError, match="closed"):
        lg.log("x", 1.0, 1)
    assert lg.close() is None  # idempotent


def test_resumed_logger_appends(tmp_path: Path) -> None:
    with Logger(tmp_path, None, t_max=100, console=False, mindinsight=False) as lg:
        lg.log("return_mean", 1.0, 10)
    with Logger(tmp_path, None, t_max=100, console=False, mindinsight=False) as lg:
        lg.log("return_mean", 2.0, 20)
    assert read_scalars(tmp_path / "log.jsonl")["return_mean"] == [(10, 1.0), (20, 2.0)]


def test_bad_values_are_rejected(tmp_path: Path) -> None:
    lg = Logger(tmp_path, None, t_max=100, console=False, mindinsight=False)
    with pytest.raises(TypeError, match="must be a number"):
        lg.log("return_mean", "high", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty string"):
        lg.log("", 1.0, 1)
    lg.close(plot=False)


def test_progress_plain_lines_when_not_a_tty() -> None:
    buf = io.StringIO()
    con = Console(t_max=10_000, stream=buf, tty=False)
    con.progress(1000, 10, {"return_mean": 3.0, "battle_won_mean": 0.5}, {}, now=100.0)
    line = con.progress(
        3000,
        30,
        {"return_mean": 4.0, "test_battle_won_mean": 0.75},
        {"epsilon": 0.5, "loss": 0.1234},
        now=110.0,
    )
    out = buf.getvalue()
    assert "\r" not in out and out.count("\n") == 2
    # 2000 steps in 10 s = 200 steps/s; 7000 steps left -> 35 s
    assert line == (
        " 30.0% | t 3,000/10,000 | ep 30 | ret 4.00 | test_win 0.75 | eps 0.500 | loss 0.1234"
        " | 200 sps | ETA 35s"
    )
    assert out.splitlines()[0].endswith("- sps | ETA ?")


def test_tty_lines_print_above_a_live_bar() -> None:
    buf = io.StringIO()
    con = Console(t_max=100, stream=buf, tty=True)
    con.advance(5)
    con.progress(10, 1, {}, {}, now=0.0)
    con.progress(20, 2, {}, {}, now=1.0)
    con.advance(35)
    con.table(20, {"loss": 0.5, "test_battle_won_mean": 0.25})
    assert con._bar is not None and con._bar.n == 35  # the bar followed t_env between intervals
    con.close()
    out = buf.getvalue()
    lines = [ln for ln in out.replace("\r", "\n").splitlines() if ln.strip()]
    interval = [ln for ln in lines if ln.startswith(" 20.0% | t 20/100")]
    assert len(interval) == 1 and "ETA 8s" in interval[0]  # 10 steps/s, 80 left
    assert "  loss                  0.5" in lines and "  test_battle_won_mean  0.25" in lines
    assert any("|" in ln and "/100 [" in ln for ln in lines)  # tqdm drew its bar (redraws are throttled)


def test_a_resumed_runs_bar_starts_where_the_run_stands() -> None:
    con = Console(t_max=1000, stream=io.StringIO(), tty=True, start=600)
    assert con._bar is not None and con._bar.n == 600
    con.advance(650)
    assert con._bar.n == 650
    con.close()


def test_no_bar_when_disabled_or_not_a_tty() -> None:
    for tty, bar in ((True, False), (False, True)):
        buf = io.StringIO()
        con = Console(t_max=100, stream=buf, tty=tty, bar=bar)
        con.advance(50)
        assert buf.getvalue() == ""
        con.progress(60, 3, {}, {}, now=0.0)
        con.close()
        assert buf.getvalue().count("\n") == 1 and "\r" not in buf.getvalue()


def test_logger_prints_the_full_table_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lg = Logger(tmp_path, None, t_max=1000, mindinsight=False)
    lg.log("return_mean", 7.5, 100)
    lg.log("test_battle_won_mean", 0.4, 100)
    lg.print_table(100)
    lg.close(plot=False)
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "-- t_env 100 ----------------",
        "  return_mean           7.5",
        "  test_battle_won_mean  0.4",
    ]


def test_logger_progress_uses_latest_logged_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lg = Logger(tmp_path, None, t_max=1000, mindinsight=False)
    lg.log("return_mean", 7.5, 100)
    lg.log("test_battle_won_mean", 0.4, 100)
    line = lg.print_progress(100, 12, {"epsilon": 0.9, "loss": None})
    lg.close(plot=False)
    assert "ret 7.50" in line and "test_win 0.40" in line and "eps 0.900" in line and "loss" not in line
    assert line in capsys.readouterr().out


def test_format_duration() -> None:
    assert [format_duration(s) for s in (7, 95, 3725, 90000, float("nan"))] == [
        "7s",
        "1m35s",
        "1h02m",
        "1d01h",
        "?",
    ]


def test_plot_curves_without_win_rate(tmp_path: Path) -> None:
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"t": 1, "key": "return_mean", "value": 1.0}\n{"t": 2, "key": "return_mean"\n')
    png = plot_curves(jsonl, tmp_path / "out" / "c.png")
    assert png.is_file() and png.stat().st_size > 1000


def test_mindinsight_summary_files_written(tmp_path: Path) -> None:
    lg = Logger(tmp_path, load_config("qmix"), t_max=100, console=False, mindinsight=True)
    assert lg.mindinsight_active
    lg.log("return_mean", 1.0, 10)
    lg.log_histogram("q", np.arange(10.0), 10)
    lg.close(plot=False)
    names = sorted(p.name for p in tmp_path.iterdir())
    summaries = [n for n in names if ".summary." in n]
    assert any(n.endswith("_MS") for n in summaries) and any(n.endswith("_lineage") for n in summaries)
    assert max((tmp_path / n).stat().st_size for n in summaries) > 100


def test_summary_writer_process_does_not_busy_wait(tmp_path):
    """MindSpore 2.10's writer process spins on a non-blocking queue read; marl.logging.ms_writer fixes it."""
    import time

    import psutil

    from marl.logging.mindinsight import SummarySink

    sink = SummarySink(tmp_path / "summary")
    try:
        assert sink.active
        time.sleep(0.5)
        kids = psutil.Process().children(recursive=True)
        assert kids, "SummaryRecord should fork its writer process"
        before = {k.pid: sum(k.cpu_times()[:2]) for k in kids}
        time.sleep(2.0)
        used = max(sum(k.cpu_times()[:2]) - before[k.pid] for k in kids)
        assert used < 0.2, f"an idle summary writer used {used:.2f} s of CPU in 2 s (busy-waiting)"
        sink.scalar("x", 1.0, 1)
    finally:
        sink.close()
