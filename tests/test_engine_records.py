"""The engine goes with every result: provenance, run records, report.json, marl-eval JSON and the tables'
headings; the report refuses to pool runs of different engines (or backends) without --allow-mixed-engines."""

import json

import pytest

pytest.importorskip("rliable", reason="the report extra is not installed: pip install -e '.[report]'")

from train_runs import fake_run  # noqa: E402  (tests/ is on sys.path)

from marl.config import load_config  # noqa: E402
from marl.envs.factory import probe_env  # noqa: E402
from marl.envs.smac.version import ENGINE_VERSION, engine_record  # noqa: E402
from marl.provenance import PROVENANCE_FILE, append_provenance, read_provenance  # noqa: E402
from marl.report.cli import report_main  # noqa: E402
from marl.report.marl_eval import check_marl_eval  # noqa: E402
from marl.report.records import read_record, record_from_run_dir, write_record  # noqa: E402
from marl.report.runs import load_run  # noqa: E402

SIM = {"engine_version": "0.9.0", "backend": "sim"}
SIM_NEXT = {"engine_version": "0.9.1", "backend": "sim"}
GAME = {"engine_version": "0.9.0", "backend": "sc2", "game_version": "4.10.0 (Base75689)"}


def run_on(root, alg, seed, *engines, final=0.5, task="m1"):
    """A fake run folder launched (and resumed) on ``engines``; none: recorded before engine versions."""
    run = fake_run(root, alg, task, seed, [(0, 0.0), (400, final)], absolute=final)
    for i, engine in enumerate(engines):
        append_provenance(run, "resume" if i else "start", engine)
    return run


def test_probe_reads_the_engine_of_smac_and_none_elsewhere() -> None:
    info, engine = probe_env(load_config("qmix", env="sc2", map_name="3m", overrides=["env.backend=sim"]))
    assert info.n_agents == 3 and engine == {"engine_version": ENGINE_VERSION, "backend": "sim"}
    assert probe_env(load_config("qmix", env="fake", map_name="m1"))[1] == {}


def test_provenance_records_the_engine_and_warns_when_a_resume_changes_it(tmp_path, capsys) -> None:
    run = run_on(tmp_path, "qmix", 0)
    first = append_provenance(run, "start", SIM)
    assert first["engine"] == SIM and "warning" not in capsys.readouterr().out
    append_provenance(run, "resume", SIM)
    assert "warning" not in capsys.readouterr().out
    append_provenance(run, "resume", SIM_NEXT)
    out = capsys.readouterr().out
    assert "launched on engine sim 0.9.0 and now continues on sim 0.9.1" in out
    assert [e["engine"] for e in read_provenance(run)] == [SIM, SIM, SIM_NEXT]
    assert "engine" not in append_provenance(run_on(tmp_path / "b", "qmix", 0), "start")  # MPE and co.


def test_a_record_and_its_run_carry_the_engine(tmp_path) -> None:
    run = run_on(tmp_path, "qmix", 0, engine_record("sim", "3m"), engine_record("sim", "3m"))
    rec = record_from_run_dir(run)
    assert rec["engine"] == [{"engine_version": ENGINE_VERSION, "backend": "sim"}]
    again = read_record(write_record(rec, tmp_path / "recs"))
    assert load_run(run, "test_win_rate", 0.95).engine == f"sim {ENGINE_VERSION}"
    assert (
        load_run(tmp_path / "recs" / "qmix_m1_seed0.json", "test_win_rate", 0.95).engine
        == f"sim {ENGINE_VERSION}"
    )
    assert again["engine"] == rec["engine"]
    old = {k: v for k, v in rec.items() if k not in ("engine", "provenance")}  # a record from before
    write_record(old, tmp_path / "old")
    assert load_run(tmp_path / "old" / "qmix_m1_seed0.json", "test_win_rate", 0.95).engine == "unknown"
    resumed = run_on(tmp_path / "c", "qmix", 1, SIM, GAME)
    assert load_run(resumed, "test_win_rate", 0.95).engine == (
        "sim 0.9.0 -> sc2 4.10.0 (Base75689), smac layer 0.9.0"
    )


def test_an_absolute_metric_evaluated_on_another_engine_is_named(tmp_path) -> None:
    run = run_on(tmp_path, "qmix", 0, SIM)
    absolute = json.loads((run / "absolute_metric.json").read_text())
    (run / "absolute_metric.json").write_text(json.dumps({**absolute, "engine": SIM}))
    assert load_run(run, "test_win_rate", 0.95).engine == "sim 0.9.0"
    (run / "absolute_metric.json").write_text(json.dumps({**absolute, "engine": SIM_NEXT}))
    assert load_run(run, "test_win_rate", 0.95).engine == "sim 0.9.0 -> sim 0.9.1 (absolute metric)"


def test_report_json_marl_eval_and_tables_name_the_engine(tmp_path, capsys) -> None:
    for seed in range(3):
        run_on(tmp_path, "qmix", seed, SIM, final=0.2 * seed)
        run_on(tmp_path, "vdn", seed, SIM, final=0.3 * seed)
    assert report_main([str(tmp_path), "--no-absolute", "--reps", "100"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["engines"] == {"fake": ["sim 0.9.0"]}
    assert {r["engine"] for r in report["runs"]} == {"sim 0.9.0"}
    assert all(r["engine"] == ["sim 0.9.0"] for r in report["rows"])
    data = json.loads((tmp_path / "marl_eval.json").read_text())
    assert list(data) == ["fake (sim 0.9.0)"] and check_marl_eval(data) == []
    md = (tmp_path / "report.md").read_text()
    assert "and env steps to 0.95 — fake on engine sim 0.9.0\n" in md
    assert "### Probability of improvement (final test_win_rate) — fake on engine sim 0.9.0" in md
    header = next(line for line in md.splitlines() if line.startswith("| env | map |"))
    assert header.endswith("| code |")  # one engine: no engine column


def test_the_report_refuses_to_pool_engines_and_names_what_differs(tmp_path, capsys) -> None:
    run_on(tmp_path, "qmix", 0, SIM)
    run_on(tmp_path, "qmix", 1, SIM)
    run_on(tmp_path, "qmix", 2, SIM_NEXT)
    run_on(tmp_path, "qmix", 3)  # before engine versions
    with pytest.raises(SystemExit) as exc:
        report_main([str(tmp_path), "--no-absolute", "--reps", "100"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "refusing to pool runs of different engines" in err
    assert "fake: 2 run(s) on sim 0.9.0 (qmix_m1_seed0, qmix_m1_seed1)" in err
    assert "1 run(s) on sim 0.9.1 (qmix_m1_seed2)" in err and "1 run(s) on unknown (qmix_m1_seed3)" in err
    assert '"unknown" runs were recorded before engine versions' in err and "--allow-mixed-engines" in err
    assert not (tmp_path / "report.json").exists()  # nothing written
    assert report_main([str(tmp_path), "--no-absolute", "--reps", "100", "--allow-mixed-engines"]) == 0
    md = (tmp_path / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| env | map |"))
    assert header.endswith("| code | engine |")
    assert "| sim 0.9.0 + sim 0.9.1 + unknown |" in md
    assert "fake: runs of different engines pooled (--allow-mixed-engines): 2 on sim 0.9.0" in md
    data = json.loads((tmp_path / "marl_eval.json").read_text())
    assert sorted(data) == ["fake", "fake (sim 0.9.0)", "fake (sim 0.9.1)"]  # marl-eval keeps them apart


def test_the_game_and_the_embedded_engine_are_not_pooled(tmp_path, capsys) -> None:
    run_on(tmp_path, "qmix", 0, SIM)
    run_on(tmp_path, "qmix", 1, GAME)
    with pytest.raises(SystemExit):
        report_main([str(tmp_path), "--no-absolute", "--reps", "100"])
    assert "1 run(s) on sc2 4.10.0 (Base75689), smac layer 0.9.0 (qmix_m1_seed1)" in capsys.readouterr().err


def test_a_run_resumed_on_another_engine_is_refused_alone(tmp_path, capsys) -> None:
    run_on(tmp_path, "qmix", 0, SIM, SIM_NEXT)
    with pytest.raises(SystemExit):
        report_main([str(tmp_path), "--no-absolute", "--reps", "100"])
    err = capsys.readouterr().err
    assert "1 run(s) on sim 0.9.0 -> sim 0.9.1 (qmix_m1_seed0)" in err
    assert "a run resumed on another engine" in err


def test_runs_without_any_engine_still_pool(tmp_path) -> None:
    """Environments without a versioned engine (and reports of old runs alone) are reported as before."""
    for seed in range(2):
        run_on(tmp_path, "qmix", seed)
    assert not any((tmp_path / f"qmix_m1_seed{s}" / PROVENANCE_FILE).exists() for s in range(2))
    assert report_main([str(tmp_path), "--no-absolute", "--reps", "100"]) == 0
    assert list(json.loads((tmp_path / "marl_eval.json").read_text())) == ["fake"]


def test_runs_of_a_pre_release_a_release_kept_pool_with_the_release_s(tmp_path, capsys) -> None:
    """1.0.0 froze 0.9.2's dynamics (RELEASED_AS): a run launched on 0.9.2 and resumed on 1.0.0 is one
    engine, pooled with 1.0.0's runs, and its resume does not warn."""
    pre = {"engine_version": "0.9.2", "backend": "sim"}
    release = {"engine_version": "1.0.0", "backend": "sim"}
    run = run_on(tmp_path, "qmix", 0, pre)
    append_provenance(run, "resume", release)
    assert "warning" not in capsys.readouterr().out
    run_on(tmp_path, "qmix", 1, release)
    assert report_main([str(tmp_path), "--no-absolute", "--reps", "100"]) == 0
    assert load_run(run, "test_win_rate", 0.95).engine == "sim 1.0.0"
