"""benchmarks/learning/suite_page.py: a suite's page regenerated from committed run records."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import pytest

from benchmarks.learning import suite_page

ROOT = Path(__file__).resolve().parents[1]

RECORDS = ROOT / "benchmarks" / "results" / "runs" / "smac_300k"
PAGE = f"# A suite\n\nProse before.\n\n{suite_page.BEGIN}\nstale numbers\n{suite_page.END}\n\nProse after.\n"


@pytest.fixture
def suite(tmp_path):
    """Four committed records (QMIX 3m seeds 0-2, MAPPO 3m seed 0) and a page with the markers."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("qmix_3m_seed0", "qmix_3m_seed1", "qmix_3m_seed2", "mappo_3m_seed0"):
        shutil.copy(RECORDS / f"{name}.json", folder)
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    return folder, page


def test_the_block_is_rewritten_from_the_records_and_the_prose_kept(suite, tmp_path, monkeypatch):
    from marl.report import cli

    # 50 bootstrap resamples, not the report's 2,000: those took 30 of the test's 36 s (2026-11-29), and the
    # report's statistics are tested in test_report.py; this test checks which runs the report.json holds
    monkeypatch.setattr(cli, "write_report", functools.partial(cli.write_report, reps=50))
    folder, page = suite
    report = tmp_path / "r.report.json"
    argv = [str(folder), "--budget", "300000", "--page", str(page), "--report-json", str(report)]
    assert suite_page.main(argv) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# A suite\n\nProse before.\n") and text.endswith("Prose after.\n")
    assert "stale numbers" not in text
    assert "- coverage: 1 of the suite's 17 maps, 4 runs (MAPPO 1 maps, 1 runs; QMIX 1 maps, 3 runs)" in text
    assert "- seeds per map: MAPPO 3m 1; QMIX 3m 3 (the protocol asks for 10)" in text
    assert "- code (the runs' provenance): e6cb68a" in text and "corridor" in text  # still to run
    seeds = [
        json.loads((folder / f"qmix_3m_seed{k}.json").read_text())["wall_clock"]["seconds"] for k in range(3)
    ]
    assert f"QMIX 3m {min(seeds) / 60:.1f}–{max(seeds) / 60:.1f}" in text
    assert "| 3m | — | 0, 1, 2 | **0.97** (0.97 / 0.95 / 0.98) | 0 |" in text  # map_ordering's table
    rows = json.loads(report.read_text())["rows"]
    assert sorted((r["alg"], len(r["seeds"])) for r in rows) == [("mappo", 1), ("qmix", 3)]
    assert suite_page.main(argv) == 0 and page.read_text(encoding="utf-8") == text  # idempotent


def test_bad_input_is_refused_with_what_is_expected(suite, tmp_path, capsys):
    folder, page = suite
    bare = tmp_path / "bare.md"
    bare.write_text("# no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        suite_page.main([str(folder), "--budget", "300000", "--page", str(bare)])
    assert "lacks the markers <!-- BEGIN suite" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit):
        suite_page.main([str(empty), "--budget", "300000", "--page", str(page)])
    assert "no run records" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        suite_page.main([str(folder), "--budget", "300000", "--page", str(tmp_path / "nope.md")])
    assert "no such file" in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == PAGE  # nothing written on a refusal
