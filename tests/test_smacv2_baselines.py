"""benchmarks/learning/smacv2_baselines.py: the published SMACv2 curves read as data only, and the budget
window."""

import math
import os
import pickle

import numpy as np
import pytest
import yaml
from train_runs import fake_run  # tests/ is on sys.path under pytest

from benchmarks.learning import smacv2_baselines as sb

pd = pytest.importorskip("pandas")


def test_at_budget_averages_the_window_before_the_budget():
    curve = [(700_000, 1.0), (850_000, 0.2), (950_000, 0.4), (1_000_000, 0.6), (1_050_000, 1.0)]
    assert sb.at_budget(curve, 1_000_000) == pytest.approx(0.4)  # (800k, 1M]: 0.2, 0.4, 0.6
    assert math.isnan(sb.at_budget(curve, 300_000))


def test_extract_reads_smacv2_layout(tmp_path, monkeypatch):
    def run(values):
        steps = [200_000 * (i + 1) for i in range(len(values))]
        return pd.DataFrame({"step": steps, "mean_test_win_rate": values, "mean_test_return": values})

    raw = {"protoss_5_vs_5": {"QMIX": [run([0.1, 0.2, 0.3]), run([0.0, 0.4, 0.5])], "MAPPO": [run([0.0])]}}
    pkl = tmp_path / "results.pkl"
    pkl.write_bytes(pickle.dumps(raw))
    out = tmp_path / "published.yaml"
    sb.extract(pkl, out)
    doc = yaml.safe_load(out.read_text())
    qmix = doc["scenarios"]["protoss_5_vs_5"]["QMIX"]
    assert qmix["seeds"] == 2 and qmix["last_step"] == 600_000
    assert qmix["win_rate_at"][500_000] == [0.2, 0.4]  # the test at 400k, each seed
    assert math.isnan(doc["scenarios"]["protoss_5_vs_5"]["MAPPO"]["win_rate_at"][500_000][0])  # no test there


def test_a_pickle_that_names_code_is_refused(tmp_path):
    pkl = tmp_path / "evil.pkl"
    pkl.write_bytes(pickle.dumps({"protoss_5_vs_5": {"QMIX": [os.system]}}))
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        sb.load_published_pickle(pkl)


def test_shipped_published_table_matches_smacv2_readme_scale():
    """The shipped extraction: 15 scenarios, QMIX 3 seeds each, the 5 vs 5 QMIX figures near 10M steps."""
    doc = yaml.safe_load(sb.PUBLISHED.read_text())
    assert len(doc["scenarios"]) == 15
    qmix = {s: doc["scenarios"][s]["QMIX"] for s in doc["scenarios"]}
    assert all(q["seeds"] >= 3 and len(q["win_rate_at"][10_000_000]) == q["seeds"] for q in qmix.values())
    at_10m = {s: sum(q["win_rate_at"][10_000_000]) / q["seeds"] for s, q in qmix.items()}
    assert at_10m["protoss_5_vs_5"] > at_10m["zerg_5_vs_5"]  # SMACv2's ordering on the game


def test_table_puts_finished_runs_beside_the_published_figures(tmp_path, monkeypatch):
    pytest.importorskip("rliable")
    curve = [(100_000, 0.0), (350_000, 0.2), (450_000, 0.4), (500_000, 0.6)]
    fake_run(tmp_path, "qmix", "protoss_5_vs_5", 0, curve, env="sc2")
    fake_run(tmp_path, "qmix", "protoss_5_vs_5", 1, [(t, v / 2) for t, v in curve], env="sc2")
    fake_run(tmp_path, "qmix", "protoss_5_vs_5", 2, curve[:2], env="sc2")  # still running: left out
    out = sb.table([tmp_path], 500_000)
    row = next(line for line in out.splitlines() if line.startswith("| protoss_5_vs_5 | QMIX"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "0, 1"  # the finished seeds
    assert cells[3] == "**0.30** (0.40 / 0.20)"  # (300k, 500k]: mean(0.2, 0.4, 0.6) and half of it
    published = yaml.safe_load(sb.PUBLISHED.read_text())["scenarios"]["protoss_5_vs_5"]["QMIX"]
    assert cells[4].startswith(f"**{np.mean(published['win_rate_at'][500_000]):.2f}**")
