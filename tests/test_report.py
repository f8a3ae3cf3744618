"""The multi-seed report on tiny run folders written in the trainer's format (``config.yaml`` from the
config layer, ``log.jsonl`` from the real Logger): every number checked against a direct computation."""

import itertools
import json

import numpy as np
import pytest
import scipy.stats

pytest.importorskip("rliable", reason="the report extra is not installed: pip install -e '.[report]'")

from train_runs import FINALS, fake_run, make_sweep  # noqa: E402  (tests/ is on sys.path)

from marl.report import stats  # noqa: E402
from marl.report.cli import report_main, write_report  # noqa: E402
from marl.report.marl_eval import check_marl_eval, to_marl_eval  # noqa: E402
from marl.report.plots import curve_grid, interpolated  # noqa: E402
from marl.report.runs import load_run, load_runs  # noqa: E402
from marl.report.summary import analyse, markdown_tables, score_matrices  # noqa: E402


def exact_bootstrap(values, statistic):
    """The 2.5 and 97.5 percentiles of ``statistic`` over every equally likely resample (n^n of them)."""
    draws = [statistic(np.array(c)) for c in itertools.product(values, repeat=len(values))]
    return np.percentile(draws, [2.5, 97.5])


@pytest.fixture
def sweep(tmp_path):
    return make_sweep(tmp_path)


def test_run_folder_is_read_as_the_trainer_wrote_it(sweep):
    run = load_run(sweep / "qmix_m1_seed1", "test_win_rate", 0.95)
    assert (run.env, run.task, run.alg, run.seed, run.test_nepisode) == ("fake", "m1", "qmix", 1, 4)
    assert run.curve == [(0, 0.0), (100, 0.96), (400, 0.5)] and run.final == 0.5
    assert (run.steps_to, run.budget) == (100, 400)
    assert run.extra["test_return_mean"] == [(0, 0.0), (100, 9.6), (400, 5.0)]
    assert run.absolute["win_rate"] == 0.5


def test_iqm_mean_and_cis_match_a_direct_computation(sweep):
    runs, skipped = load_runs([sweep], "test_win_rate", 0.95)
    assert len(runs) == 7 and not skipped
    result = analyse(runs, "test_win_rate", 0.95, reps=500, seed=0)
    qmix = next(r for r in result["rows"] if r["alg"] == "qmix")
    assert qmix["seeds"] == [0, 1, 2, 3]
    assert qmix["final"]["iqm"] == pytest.approx(0.6) and qmix["final"]["mean"] == pytest.approx(0.55)
    many = stats.iqm_and_mean({"x": np.array(FINALS)[:, None]}, reps=8_000, seed=1)["x"]
    noisy = np.random.default_rng(0).random((6, 1))
    again = [stats.iqm_and_mean({"x": noisy}, reps=300, seed=s)["x"] for s in (5, 5, 6)]
    assert again[0] == again[1] and again[0] != again[2]  # seeded: a report is reproducible
    iqm = lambda a: scipy.stats.trim_mean(a, 0.25)  # noqa: E731
    for key, stat in (("iqm", iqm), ("mean", np.mean)):
        lo, hi = exact_bootstrap(FINALS, stat)
        assert many[f"{key}_lo"] == pytest.approx(lo, abs=0.04), key
        assert many[f"{key}_hi"] == pytest.approx(hi, abs=0.04), key
        assert qmix["final"][f"{key}_lo"] <= qmix["final"][key] <= qmix["final"][f"{key}_hi"]
    # steps to 0.95: 100, 200, 300 and seed 0's whole budget (400) as a lower bound
    assert qmix["reached"] == 3
    assert qmix["steps_to"]["iqm"] == pytest.approx(250) and qmix["steps_to"]["mean"] == pytest.approx(250)
    assert qmix["absolute"]["mean"] == pytest.approx(0.55) and qmix["absolute"]["episodes"] == 40
    table = markdown_tables(result)
    assert "| fake | m1 | qmix | 4 (0, 1, 2, 3) | 0.60 [" in table and "| ≥ 250 [" in table
    assert "| 3/4 |" in table and "IQM and mean over 3 or 4 seeds per row" in table


def test_vectorised_iqm_and_mean_equal_rliables_bit_for_bit():
    """``iqm_and_mean`` draws all of rliable's replicates at once: every number equal, not just close,
    with ties (win rates of 32 test episodes) and without, one run or several, one task or several."""
    rng = np.random.default_rng(3)
    for n_runs, n_tasks, reps, seed in ((1, 1, 50, 0), (3, 1, 2000, 0), (5, 2, 300, 4), (8, 3, 200, 1)):
        for s_RK in (rng.integers(0, 33, (n_runs, n_tasks)) / 32, rng.random((n_runs, n_tasks))):
            scores = {"a": s_RK, "b": s_RK[::-1] * 0.5}
            assert stats.iqm_and_mean(scores, reps, seed) == stats.iqm_and_mean_rliable(scores, reps, seed)


def test_probability_of_improvement_is_the_direct_pair_count(sweep):
    runs, _ = load_runs([sweep], "test_win_rate", 0.95)
    result = analyse(runs, "test_win_rate", 0.95, reps=500, seed=0)
    x, y = [0.0, 0.5, 0.7, 1.0], [0.2, 0.6, 0.9]
    direct = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y])  # 5/12
    p = {(q["x"], q["y"]): q for q in result["poi"]}
    assert p[("qmix", "vdn")]["p"] == pytest.approx(direct)
    assert p[("vdn", "qmix")]["p"] == pytest.approx(1 - direct)
    assert p[("qmix", "vdn")]["lo"] <= direct <= p[("qmix", "vdn")]["hi"]
    assert (p[("qmix", "vdn")]["n_x"], p[("qmix", "vdn")]["n_y"]) == (4, 3)


def test_profiles_and_curves_match_a_direct_computation(sweep):
    runs, _ = load_runs([sweep], "test_win_rate", 0.95)
    mats = score_matrices(runs)["fake"]  # cut to the fewest seeds (3) so that it is a matrix
    assert mats["qmix"].shape == (3, 1) and mats["qmix"][:, 0].tolist() == FINALS[:3]
    taus = [0.0, 0.4, 0.8]
    prof, ci = stats.performance_profiles(mats, taus, reps=500)
    assert prof["vdn"].tolist() == pytest.approx([1.0, 2 / 3, 1 / 3])  # fraction of finals above tau
    assert ci["vdn"].shape == (2, 3) and np.all(ci["vdn"][0] <= prof["vdn"] + 1e-12)
    qmix = [r for r in runs if r.alg == "qmix"]
    grid = curve_grid(qmix, points=5)
    curves = interpolated(qmix, grid)
    assert grid.tolist() == [0, 100, 200, 300, 400]
    assert curves[1, 0].tolist() == pytest.approx(
        [0.0, 0.96, 0.96 - 0.46 / 3, 0.96 - 0.92 / 3, 0.5]
    )  # seed 1, linear in t
    point, _ = stats.iqm_curves({"qmix": curves}, reps=500)
    assert point["qmix"] == pytest.approx(scipy.stats.trim_mean(curves[:, 0, :], 0.25, axis=0))


def test_marl_eval_json_has_its_structure(sweep):
    runs, _ = load_runs([sweep], "test_win_rate", 0.95)
    data, notes = to_marl_eval(runs)
    assert not notes and list(data) == ["fake"] and list(data["fake"]) == ["m1"]
    assert sorted(data["fake"]["m1"]) == ["QMIX", "VDN"]
    run = json.loads(json.dumps(data))["fake"]["m1"]["QMIX"]["seed_1"]  # key order survives JSON
    assert list(run) == ["step_0", "step_1", "step_2", "absolute_metrics"]
    assert run["step_1"] == {"step_count": 100, "win_rate": [0.96], "return": [9.6]}
    assert run["absolute_metrics"] == {"win_rate": [0.5], "return": [5.0]}
    assert check_marl_eval(data) == []
    bad = json.loads(json.dumps(data))
    run = bad["fake"]["m1"]["QMIX"]["seed_1"]
    run["absolute_metrics"] = run.pop("step_0")  # absolute no longer last-and-only-once, steps renumbered
    del run["step_1"]["step_count"]
    bad["fake"]["m1"]["qmix"] = bad["fake"]["m1"].pop("VDN")
    with pytest.raises(ValueError) as err:
        check_marl_eval(bad)
    text = str(err.value)
    assert "expected step key 'step_0', got 'step_1'" in text
    assert "upper case" in text and "absolute_metrics: must hold the steps' metrics" in text


def test_unequal_step_counts_warn_and_runs_without_checkpoint_are_left_out(sweep, tmp_path):
    fake_run(sweep, "vdn", "m1", 7, [(0, 0.0), (200, 0.1), (400, 0.3)])  # no absolute metric
    fake_run(sweep, "vdn", "m2", 0, [(0, 0.0), (400, 0.3)], absolute=0.3)  # two test phases, not three
    runs, _ = load_runs([sweep], "test_win_rate", 0.95)
    data, notes = to_marl_eval(runs)
    assert "seed_7" not in data["fake"]["m1"]["VDN"] and "vdn_m1_seed7" in notes[0]
    warnings = check_marl_eval(data)
    assert len(warnings) == 1 and "2 (fake/m2/VDN/seed_0), 3 (fake/m1/QMIX/seed_0)" in warnings[0]
    written = write_report(runs, tmp_path / "out", reps=200)
    text = written["report.md"].read_text()
    assert "left out of marl-eval JSON (no absolute metric" in text and "marl-eval keeps the fewest" in text
    vdn = next(
        r
        for r in json.loads(written["report.json"].read_text())["rows"]
        if r["task"] == "m1" and r["alg"] == "vdn"
    )
    assert vdn["absolute"] is None and vdn["seeds"] == [0, 1, 2, 7]  # no absolute IQM over a subset


def test_report_command_writes_every_file(sweep, capsys):
    assert report_main([str(sweep), "--no-absolute", "--reps", "300", "--title", "tiny"]) == 0
    for name in ("report.md", "report.json", "marl_eval.json", "profiles.png", "sample_efficiency.png"):
        assert (sweep / name).stat().st_size > 0, name
    assert (sweep / "profiles.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "# tiny" in capsys.readouterr().out
    check_marl_eval(json.loads((sweep / "marl_eval.json").read_text()))
    shown = json.loads((sweep / "report.json").read_text())["runs"]
    assert {
        "env": "fake",
        "task": "m1",
        "alg": "vdn",
        "seed": 2,
        "budget": 400,
        "engine": "unknown",  # the fake runs record no engine
        "run_dir": "vdn_m1_seed2",
    } in shown
    with pytest.raises(SystemExit) as exc:
        report_main([str(sweep / "missing")])
    assert exc.value.code == 2 and "no such folder" in capsys.readouterr().err


def test_min_steps_leaves_out_runs_still_going_and_smacv2_is_named(tmp_path):
    fake_run(tmp_path, "qmix", "protoss_5_vs_5", 0, [(100, 0.1), (1000, 0.5)], env="sc2")
    fake_run(tmp_path, "qmix", "protoss_5_vs_5", 1, [(100, 0.2), (400, 0.3)], env="sc2")
    fake_run(tmp_path, "qmix", "3m", 0, [(100, 0.2), (1000, 0.9)], env="sc2")
    runs, notes = load_runs([tmp_path], "test_win_rate", 0.95, min_steps=900)
    assert sorted((r.env, r.task, r.seed) for r in runs) == [
        ("smac", "3m", 0),
        ("smacv2", "protoss_5_vs_5", 0),
    ]
    assert len(notes) == 1 and "qmix_protoss_5_vs_5_seed1" in notes[0] and "400 steps (< 900)" in notes[0]


def test_aggregate_over_maps_matches_a_direct_computation(tmp_path):
    finals = {
        ("qmix", "m1"): [0.1, 0.5, 0.9],
        ("qmix", "m2"): [1.0, 0.8],
        ("vdn", "m1"): [0.0, 0.2],
        ("vdn", "m2"): [0.6, 0.4, 0.3],
        ("vdn", "m3"): [0.7],  # a map QMIX never ran: left out of the aggregate
        ("qmix", "m4"): [0.3],  # one seed each: 3 maps x 1 seed keep fewer runs than 2 maps x 2 seeds
        ("vdn", "m4"): [0.9],
    }
    for (alg, task), values in finals.items():
        for seed, f in enumerate(values):
            fake_run(tmp_path, alg, task, seed, [(0, 0.0), (400, f)])
    runs, _ = load_runs([tmp_path], "test_win_rate", 0.95)
    result = analyse(runs, "test_win_rate", 0.95, reps=500, seed=0)
    (agg,) = result["aggregate"]
    assert agg["tasks"] == ["m1", "m2"] and agg["seeds_per_task"] == 2  # the first 2 seeds of every map
    q = np.array([[0.1, 1.0], [0.5, 0.8]])  # (runs, maps)
    v = np.array([[0.0, 0.6], [0.2, 0.4]])
    for alg, s in (("qmix", q), ("vdn", v)):
        m = agg["algs"][alg]
        assert m["iqm"] == pytest.approx(scipy.stats.trim_mean(s, 0.25, axis=None))
        assert m["median"] == pytest.approx(np.median(s.mean(axis=0)))
        assert m["mean"] == pytest.approx(s.mean())
        assert m["optimality_gap"] == pytest.approx(np.mean(1.0 - s))
        for k in stats.AGGREGATES:
            assert m[f"{k}_lo"] <= m[k] + 1e-12 and m[k] <= m[f"{k}_hi"] + 1e-12
    # P(qmix > vdn) per map: m1 pairs (0.1>0.0, 0.1<0.2, 0.5>0.0, 0.5>0.2) = 3/4; m2 all four = 1
    p = {(x["x"], x["y"]): x for x in agg["poi"]}
    assert p[("qmix", "vdn")]["p"] == pytest.approx((0.75 + 1.0) / 2)
    assert p[("vdn", "qmix")]["p"] == pytest.approx(1 - (0.75 + 1.0) / 2)
    table = markdown_tables(result)
    assert "Aggregate over maps (final test_win_rate)" in table
    assert "| fake | qmix | 2 | " in table and "- fake: 2 maps, 2 seeds each: m1, m2" in table
    assert "| fake | qmix | vdn | 0.88 [" in table
    older = {k: v for k, v in result.items() if k != "aggregate"}  # a report.json written before it
    assert "Aggregate over maps" not in markdown_tables(older)


def test_no_aggregate_when_the_algorithms_share_one_map(sweep):
    runs, _ = load_runs([sweep], "test_win_rate", 0.95)
    assert analyse(runs, "test_win_rate", 0.95, reps=200, seed=0)["aggregate"] == []
