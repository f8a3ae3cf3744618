"""The SMAC paper's published runs (benchmarks/data/smac_paper_runs.json) and the statistics laid over
them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marl.report.paper_runs import (
    DEFAULT_DATA,
    Band,
    band,
    convert,
    load_paper_runs,
    verdict,
    widened,
    wilson,
)

PAPER_MAPS = {
    "2s_vs_1sc", "2s3z", "3s5z", "1c3s5z", "10m_vs_11m", "2c_vs_64zg", "bane_vs_bane", "5m_vs_6m", "3s_vs_5z",
    "3s5z_vs_3s6z", "6h_vs_8z", "27m_vs_30m", "MMM2", "corridor",
}  # fmt: skip


def published(won: list, ret: list) -> dict:
    return {
        "m": {
            "QMIX": {
                "test_battle_won_mean": {"Run_2": won, "Run_1": won},
                "test_return_mean": {"Run_2": ret, "Run_1": ret},
            }
        }
    }


def test_convert_round_trips_and_keeps_wins_as_games_of_32(tmp_path: Path) -> None:
    src = published([[40, 0.0], [10050, 0.03125], [20100, 1.0]], [[40, 1.5], [10050, 2.25], [20100, 20.0]])
    path = tmp_path / "d.json"
    path.write_text(json.dumps(convert(src)))
    runs = load_paper_runs(path)[("m", "QMIX")]
    assert [r.run for r in runs] == ["Run_1", "Run_2"]  # numeric run order
    np.testing.assert_array_equal(runs[0].won, [0, 1, 32])
    assert runs[0].at(15_000, "win_rate") == 0.03125 and runs[0].at(20_100, "return") == 20.0
    assert runs[0].at(39, "win_rate") is None  # before the first test
    assert runs[0].at(40_000, "win_rate") is None  # the last test lies more than 15k steps back


def test_convert_refuses_data_it_cannot_store_exactly() -> None:
    with pytest.raises(ValueError, match="not a multiple of 1/32"):
        convert(published([[40, 0.1]], [[40, 1.0]]))
    with pytest.raises(ValueError, match="different t_env"):
        convert(published([[40, 0.0]], [[41, 1.0]]))


def test_load_refuses_another_format(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"3m": {}}))
    with pytest.raises(ValueError, match="not a smac-paper-runs file"):
        load_paper_runs(tmp_path / "x.json")


def test_committed_data_holds_the_paper_maps_and_algorithms() -> None:
    meta = json.loads(DEFAULT_DATA.read_text())
    assert meta["game_version"] == "4.6.2" and "oxwhirl/smac" in meta["source"]
    data = load_paper_runs()
    assert {m for m, _ in data} == PAPER_MAPS
    for m in PAPER_MAPS:
        assert {"IQL", "VDN", "QMIX", "COMA"} <= {a for mm, a in data if mm == m}
    assert {m for m, a in data if a == "QTRAN"} == {"2s_vs_1sc", "2s3z", "3s5z"}
    assert len(data["2c_vs_64zg", "QMIX"]) == 10 and sum(len(v) for v in data.values()) == 331
    # the figures the calibration issue quotes: no QMIX run wins on 2c_vs_64zg by 300k, VDN's median on
    # 2s_vs_1sc is 100 % there
    assert band(data["2c_vs_64zg", "QMIX"], 300_000, "win_rate") == Band(9, 0.0, 0.0, 0.0)
    assert band(data["2s_vs_1sc", "VDN"], 300_000, "win_rate").median == 1.0


def test_wilson_interval_and_verdicts() -> None:
    lo, hi = wilson(0.0)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / (32 + 3.8415), rel=1e-4)  # z^2 / (n + z^2)
    assert wilson(1.0)[1] == 1.0 and wilson(0.5)[0] == pytest.approx(1 - wilson(0.5)[1])
    b = Band(5, 0.0, 0.0, 0.0)
    assert verdict(0.09375, b, "win_rate") == "inside"  # 3 of 32 is within the sampling error of 0
    assert verdict(0.3, b, "win_rate") == "above"
    assert verdict(None, b, "win_rate") == verdict(0.5, None, "win_rate") == "-"
    r = Band(5, 10.0, 12.0, 14.0)
    assert widened(r, "return", 4.0) == pytest.approx(
        (10 - 1.959964 * 4 / 32**0.5, 14 + 1.959964 * 4 / 32**0.5)
    )
    assert verdict(8.0, r, "return", 4.0) == "below" and verdict(9.0, r, "return", 4.0) == "inside"


def _real_game_curves():
    from benchmarks.learning import real_game_curves

    return real_game_curves


def _records(folder: Path, engines: dict[int, list | None]) -> None:
    """Two-point records of qmix_smac_paper on 2c_vs_64zg, one per seed, with the given engines."""
    from marl.report.records import RECORD_FORMAT, RECORD_VERSION, write_record

    curve = {
        "test_win_rate": [[50, 0.0], [300_000, 0.0]],
        "test_return_mean": [[50, 2.0], [300_000, 5.0]],
        "test_return_std": [[50, 1.0], [300_000, 1.0]],
    }
    for seed, engine in engines.items():
        rec = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "env": "smac", "task": "2c_vs_64zg",
               "alg": "qmix_smac_paper", "seed": seed, "test_nepisode": 32, "budget": 300_000,
               "curves": curve, "absolute": None, "source": f"run{seed}", "config": {}}  # fmt: skip
        if engine is not None:
            rec["engine"] = engine
        write_record(rec, folder)


SIM = [{"engine_version": "0.9.1", "backend": "sim"}]


def test_report_lays_records_over_the_game(tmp_path: Path) -> None:
    rgc = _real_game_curves()
    _records(tmp_path / "records", {0: SIM, 1: SIM})
    text = rgc.report(tmp_path / "records", tmp_path / "out", DEFAULT_DATA)
    assert "Engine: sim 0.9.1." in text and "- QMIX 2c_vs_64zg: 2 run(s) on engine sim 0.9.1" in text
    row = next(line for line in text.splitlines() if line.startswith("| 2c_vs_64zg | QMIX | 300k"))
    # the game: no QMIX run wins by 300k; ours neither (inside); our return of 5 lies below the game's range
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[3:5] == ["0.00 [0.00, 0.00] (9)", "0.00 (2)"] and cells[-2:] == ["inside", "below"]
    assert "QMIX at 300k: inside on 1 of 1 maps" in text
    assert (tmp_path / "out" / "qmix_2c_vs_64zg.png").stat().st_size > 10_000


def test_report_refuses_to_pool_engines_and_record_assigns_one(tmp_path: Path) -> None:
    rgc = _real_game_curves()
    _records(tmp_path / "records", {0: SIM, 1: None})
    with pytest.raises(SystemExit, match=r"QMIX 2c_vs_64zg: sim 0.9.1, unknown \(--allow-mixed-engines"):
        rgc.report(tmp_path / "records", tmp_path / "out", DEFAULT_DATA)
    text = rgc.report(tmp_path / "records", tmp_path / "out", DEFAULT_DATA, allow_mixed=True)
    assert "Engine: sim 0.9.1, unknown." in text
    # a run made before engine records gets its version by hand, with the reason; a recorded one cannot
    rec = {"task": "2c_vs_64zg", "provenance": [{"commit": "abc"}]}
    out = rgc.assign_engine(rec, "0.9.1", "same dynamics (fingerprint)")
    assert out["engine"] == [{**SIM[0], "assigned": "same dynamics (fingerprint)"}]
    with pytest.raises(SystemExit, match="records its engine"):
        rgc.assign_engine(out, "0.9.0", "")
