"""benchmarks/throughput/smacv2_throughput.py (sim_throughput.py --smacv2): the peer scenario and the
report."""

from __future__ import annotations

import pytest

from benchmarks.throughput import sim_throughput, smacv2_throughput


def test_smax_peer_is_the_smacv2_style_scenario_of_the_same_size():
    assert sim_throughput.smax_scenario("protoss_10_vs_10") == "smacv2_10_units"
    assert sim_throughput.smax_scenario("zerg_20_vs_20") == "smacv2_20_units"
    assert sim_throughput.smax_scenario("3m") == "3m"
    with pytest.raises(ValueError, match="10 vs 11"):
        sim_throughput.smax_scenario("terran_10_vs_11")


def test_report_times_batched_and_per_row_and_records_the_conditions(tmp_path, monkeypatch):
    monkeypatch.setattr(smacv2_throughput, "bench_smax", lambda name, n, s: None)  # no .venv-bench here
    out = tmp_path / "r.md"
    smacv2_throughput.smacv2_main(["protoss_5_vs_5"], [1, 2], 0.2, 1, out)
    text = out.read_text()
    assert (
        "- command: `.venv/bin/python benchmarks/throughput/sim_throughput.py --smacv2 --maps protoss_5_vs_5"
        in text
    )
    for key in (  # the shared header (benchmarks/harness.py), then what this benchmark adds
        "- date:",
        "- code:",
        "- versions:",
        "- machine:",
        "- peer versions",
        "BatchedSMACv2Env.step",
        "smacv2_5_units",
    ):
        assert key in text
    rows = [line for line in text.splitlines() if line.startswith("| protoss_5_vs_5")]
    assert len(rows) == 2
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[3]) > 0 and float(cells[4]) > 0 and float(cells[5]) > 0  # batched, 1t, per-row
        assert cells[6] == "n/a"
