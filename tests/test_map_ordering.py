"""benchmarks/learning/map_ordering.py: a sweep's maps beside the published difficulty classes."""

import json

import pytest
from train_runs import fake_run  # tests/ is on sys.path under pytest

from benchmarks.learning import map_ordering as mo

CLASSES = {"8m": "easy", "2s3z": "easy", "5m_vs_6m": "hard", "corridor": "super_hard", "MMM2": "super_hard"}


def test_verdict_in_the_published_order():
    v = mo.class_verdict({"8m": 0.9, "2s3z": 0.7, "5m_vs_6m": 0.3, "corridor": 0.0, "MMM2": 0.1}, CLASSES)
    assert v["complete"] and v["ordered"] and v["inversions"] == []
    assert v["means"]["easy"] == pytest.approx(0.8) and v["means"]["super_hard"] == pytest.approx(0.05)
    assert v["rho"] < -0.8  # harder class, lower win rate


def test_verdict_names_inversions_and_missing_classes():
    v = mo.class_verdict({"8m": 0.2, "2s3z": 0.7, "5m_vs_6m": 0.6, "corridor": 0.5, "3m": 1.0}, CLASSES)
    assert v["complete"] and not v["ordered"]  # hard 0.6 > easy 0.45
    assert v["inversions"] == [("8m", "corridor")]
    assert v["maps"]["easy"] == ["2s3z", "8m"]  # 3m has no published class: not counted
    partial = mo.class_verdict({"8m": 1.0, "corridor": 0.0}, CLASSES)
    assert not partial["complete"] and not partial["ordered"]


def test_table_reads_a_sweep(tmp_path):
    pytest.importorskip("rliable")
    for seed in (0, 1):
        fake_run(tmp_path, "qmix", "8m", seed, [(200_000, 0.5), (260_000, 0.8), (300_000, 1.0)], env="sc2")
        fake_run(tmp_path, "qmix", "corridor", seed, [(260_000, 0.0), (300_000, 0.1 * seed)], env="sc2")
    fake_run(tmp_path, "qmix", "5m_vs_6m", 0, [(100_000, 0.9)], env="sc2")  # still running: left out
    out = mo.table([tmp_path], 300_000)
    row = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert "**0.90** (0.90 / 0.90)" in row["8m"]  # (250k, 300k]: mean(0.8, 1.0)
    assert "**0.03** (0.00 / 0.05)" in row["corridor"]
    assert "5m_vs_6m" not in row
    assert "100 %" in row["corridor"]  # pymarl2's fine-tuned QMIX on the game
    assert "**incomplete**: no finished map in hard" in out


def test_side_by_side_puts_each_algorithm_beside_the_others(tmp_path):
    pytest.importorskip("rliable")
    for seed in (0, 1):
        fake_run(tmp_path, "qmix", "8m", seed, [(260_000, 0.6), (300_000, 0.8)], env="sc2")
    fake_run(tmp_path, "mappo", "8m", 0, [(260_000, 0.2), (300_000, 0.4)], env="sc2")
    fake_run(tmp_path, "mappo", "corridor", 0, [(260_000, 0.0), (300_000, 0.0)], env="sc2")
    out = mo.side_by_side([tmp_path], 300_000, ["qmix", "mappo"])
    head = next(line for line in out.splitlines() if line.startswith("| map"))
    assert "QMIX at 300k" in head and "MAPPO at 300k" in head
    row = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines() if line.startswith("| ")}
    assert row["8m"][3].strip() == "0, 1" and "**0.70**" in row["8m"][4]  # QMIX: mean(0.6, 0.8)
    assert row["8m"][5].strip() == "0" and "**0.30**" in row["8m"][6]  # MAPPO, one seed
    assert row["corridor"][3].strip() == "—"  # no QMIX run finished there
    assert "- QMIX: ordered as published" in out and "- MAPPO: class means: easy 0.30" in out
    with pytest.raises(SystemExit, match="no vdn run"):
        mo.side_by_side([tmp_path], 300_000, ["qmix", "vdn"])


def test_tables_from_run_records_are_those_from_the_run_folders(tmp_path):
    """The committed records of a sweep (``report.py --save-records``) give the same tables, wall-clock
    included, as its run folders."""
    pytest.importorskip("rliable")
    from benchmarks.learning import smacv2_baselines as sb
    from marl.report.cli import report_main

    sweep = tmp_path / "sweep"
    for seed in (0, 1):
        for alg, m in (("qmix", "8m"), ("qmix", "corridor"), ("mappo", "8m")):
            run = fake_run(
                sweep, alg, m, seed, [(260_000, 0.1 * seed), (300_000, 0.8 - 0.2 * seed)], env="sc2"
            )
            (run / "result.json").write_text(json.dumps({"started": 0.0, "finished": 60.0 * (seed + 1)}))
    fake_run(sweep, "qmix", "5m_vs_6m", 0, [(100_000, 0.9)], env="sc2")  # still running: left out of both
    recs = tmp_path / "runs" / "suite"
    argv = [str(sweep), "--no-absolute", "--reps", "100", "--out", str(tmp_path / "out")]
    assert report_main([*argv, "--save-records", str(recs)]) == 0
    assert len(list(recs.glob("*.json"))) == 7
    assert mo.table([recs], 300_000) == mo.table([sweep], 300_000)
    both = mo.side_by_side([recs], 300_000, ["qmix", "mappo"])
    assert both == mo.side_by_side([sweep], 300_000, ["qmix", "mappo"]) and "**0.38** (0.40 / 0.35)" in both
    ours = sb.ours_at_budget([recs], 300_000, mo.WINDOW)
    assert ours == sb.ours_at_budget([sweep], 300_000, mo.WINDOW)
    assert ours[("8m", "mappo")] == [(0, pytest.approx(0.4), 1.0), (1, pytest.approx(0.35), 2.0)]  # minutes
