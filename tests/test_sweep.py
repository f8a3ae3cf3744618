"""The multi-map, multi-seed sweep: summary maths on hand-written logs, and a real 2-map x 2-seed sweep
of tiny QMIX runs on the fake env as Ray tasks on a local 2-CPU Ray (loopback), started and stopped here."""

import dataclasses
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from train_runs import fake_run  # tests/ is on sys.path under pytest

from marl.report.records import read_record, record_from_run_dir
from marl.sweep import plot_sweep, summarize_run, summary_markdown, sweep_main

# one local Ray cluster at a time: under `pytest -n` these tests share one worker with test_ray_runner's
pytestmark = pytest.mark.xdist_group("ray")

# tiny QMIX runs on the fake env (seconds each)
TINY = [
    "t_max=120",
    "batch_size_run=2",
    "batch_size=2",
    "buffer_size=8",
    "test_interval=60",
    "log_interval=60",
    "test_nepisode=2",
    "hidden_dim=8",
    "embed_dim=8",
    "hypernet_dim=8",
    "save_interval=0",
    "progress=false",
    "mindinsight=false",
    "use_jit=false",
]
LOCAL_RAY = ["--address", "local", "--num-cpus", "2", "--cpus-per-run", "1"]
ROOT = Path(__file__).resolve().parents[1]


def _fresh_ray():
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a local Ray on the loopback address
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    return ray


@pytest.fixture(scope="module")
def _module_ray():
    """Stops the Ray that :func:`shared_ray` started, after this file's last test (or before a test of
    another file, test_ray_runner's, starts its own)."""
    ray = pytest.importorskip("ray")
    yield ray
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def shared_ray(_module_ray):
    """A local 2-CPU Ray in this process, started once for the tests that do not test the sweep's own start
    and stop of Ray (each start and stop took 6-7 s at load 6 on 2 cores, 2026-11-29; a sweep joins a Ray
    already running and leaves it running, which these tests then check)."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if not _module_ray.is_initialized():
        _module_ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    return _module_ray


def _write_log(run_dir, points, key="test_win_rate"):
    run_dir.mkdir(parents=True)
    with open(run_dir / "log.jsonl", "w") as fh:
        for t, v in points:
            fh.write(json.dumps({"t": t, "key": key, "value": v}) + "\n")
            fh.write(json.dumps({"t": t, "key": "return_mean", "value": 1.0}) + "\n")


def test_summary_from_logs(tmp_path):
    _write_log(tmp_path / "a0", [(0, 0.0), (100, 0.5), (200, 0.96), (300, 0.9)])
    _write_log(tmp_path / "a1", [(0, 0.1), (150, 1.0), (300, 1.0)])
    _write_log(tmp_path / "b0", [(0, 0.0), (300, 0.5)])
    (tmp_path / "b1").mkdir()  # no log at all: reported, not averaged
    results = [
        summarize_run("a", 0, tmp_path / "a0"),
        summarize_run("a", 1, tmp_path / "a1"),
        summarize_run("b", 0, tmp_path / "b0"),
        summarize_run("b", 1, tmp_path / "b1"),
    ]
    assert (results[0].final, results[0].steps_to) == (0.9, 200)
    assert (results[1].final, results[1].steps_to) == (1.0, 150)
    assert results[2].steps_to is None and results[2].final == 0.5 and not results[2].error
    assert "no 'test_win_rate'" in results[3].error and math.isnan(results[3].final)
    table = summary_markdown(results, title="t")
    # map a: final 0.9 and 1.0 -> 0.95 ± 0.05; steps 200 and 150 -> 175 ± 25; both reached
    assert "| a | 2 | 0.95 ± 0.05 | 175 ± 25 | 2/2 | 0 |" in table, table
    assert "| b | 2 | 0.5 ± 0 | — | 0/1 | 1 |" in table, table
    png = plot_sweep(results, tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@pytest.mark.slow
def test_two_maps_two_seeds_sweep(tmp_path, capsys):
    ray = _fresh_ray()
    out = tmp_path / "sweep"
    argv = [
        "--env",
        "fake",
        "--maps",
        "m1",
        "m2",
        "--seeds",
        "2",
        "--out",
        str(out),
        *LOCAL_RAY,
        "--reps",
        "50",  # bootstrap resamples of the report: its statistics are tested elsewhere
        *TINY,
    ]
    path, results = sweep_main(argv)
    assert not ray.is_initialized()  # the sweep started its Ray, so it stopped it
    assert path == out.resolve()
    seed_major = [("m1", 0), ("m2", 0), ("m1", 1), ("m2", 1)]
    assert [(r.map_name, r.seed) for r in results] == seed_major
    for r in results:
        assert not r.error, r.error
        run_dir = out / f"qmix_{r.map_name}_seed{r.seed}"
        assert (run_dir / "log.jsonl").is_file() and (run_dir / "config.yaml").is_file()
        assert f"seed: {r.seed}" in (run_dir / "config.yaml").read_text()
        assert "ms_threads: 1" in (run_dir / "config.yaml").read_text()  # its share: 1 of the 2 CPUs
        assert r.curve and 0.0 <= r.final <= 1.0 and r.curve[-1][0] >= 60
    # each run reserved 1 of the 2 CPUs: never more than two ran at once
    for r in results:
        running = [o for o in results if o.started <= r.started < o.finished]
        assert len(running) <= 2
    # and each ran in a fresh worker process (a reused one would keep the previous run's memory)
    pids = [
        json.loads((out / f"qmix_{r.map_name}_seed{r.seed}" / "result.json").read_text()) for r in results
    ]
    assert len({p["worker_pid"] for p in pids}) == 4
    table = (out / "summary.md").read_text()
    assert "| m1 | 2 |" in table and "| m2 | 2 |" in table and "qmix_m2_seed1" in table
    assert table in capsys.readouterr().out
    saved = json.loads((out / "summary.json").read_text())
    assert [(s["map_name"], s["seed"]) for s in saved] == [(r.map_name, r.seed) for r in results]
    assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    # each task re-evaluated its best checkpoint over 10x test_nepisode (2) episodes: the absolute metric
    for r in results:
        absolute = json.loads((out / f"qmix_{r.map_name}_seed{r.seed}" / "absolute_metric.json").read_text())
        assert absolute["episodes"] == 20 and len(absolute["won"]) == 20 and absolute["checkpoint"] == "best"
    if importlib.util.find_spec("rliable") is not None:  # the report extra: IQM/CI report and marl-eval JSON
        from marl.report.marl_eval import check_marl_eval

        data = json.loads((out / "marl_eval.json").read_text())
        check_marl_eval(data)
        assert sorted(data["fake"]) == ["m1", "m2"] and sorted(data["fake"]["m1"]["QMIX"]) == [
            "seed_0",
            "seed_1",
        ]
        assert "| fake | m1 | qmix | 2 (0, 1) |" in (out / "report.md").read_text()


def test_bad_override_fails_before_any_run(tmp_path):
    with pytest.raises(ValueError, match="unknown config key"):
        sweep_main(
            [
                "--env",
                "fake",
                "--maps",
                "m1",
                "--seeds",
                "1",
                "--out",
                str(tmp_path / "s"),
                "learner.no_such_key=1",
            ]
        )
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_sweep_resumes_after_an_interruption(tmp_path, shared_ray):
    """A sweep folder left by an interrupted sweep: a finished run is kept as it is, a run cut off after a
    checkpoint resumes from it, a run that never checkpointed starts again (its folder moved aside); then
    ``--resume`` alone re-runs nothing. The three sweeps join the Ray already running and leave it so."""
    from marl.config import load_config
    from marl.trainer import Trainer

    ray = shared_ray
    out = tmp_path / "sweep"
    common = [
        "--env",
        "fake",
        "--seeds",
        "1",
        "--out",
        str(out),
        *LOCAL_RAY,
        "--no-absolute",
        "--reps",
        "50",
        *TINY,
    ]
    recs = tmp_path / "records"  # given once: sweep.json keeps it for the later invocations
    sweep_main(["--maps", "m1", *common, "--records", str(recs)])  # m1 finished before the interruption
    assert [p.name for p in recs.iterdir()] == ["qmix_m1_seed0.json"]
    m1_log = (out / "qmix_m1_seed0" / "log.jsonl").read_bytes()
    assert (out / "qmix_m1_seed0" / "result.json").is_file()
    # m2 was cut off at t_env >= 60 after a checkpoint; m3 had begun but written no checkpoint
    cut = load_config(
        "qmix",
        env="fake",
        map_name="m2",
        overrides=[*TINY, "t_max=60", "seed=0", f"results_dir={out}", "run_name=qmix_m2_seed0"],
    )
    Trainer(cut, run_dir=out / "qmix_m2_seed0").run()
    cut_at = max(t for t, _ in summarize_run("m2", 0, out / "qmix_m2_seed0").curve)
    (out / "qmix_m3_seed0").mkdir()
    (out / "qmix_m3_seed0" / "log.jsonl").write_text("")

    _, results = sweep_main(["--maps", "m1", "m2", "m3", *common])
    assert ray.is_initialized()  # the sweep did not start this Ray, so it did not stop it
    assert [(r.map_name, r.error) for r in results] == [("m1", ""), ("m2", ""), ("m3", "")]
    assert (out / "qmix_m1_seed0" / "log.jsonl").read_bytes() == m1_log  # not run again
    m2 = out / "qmix_m2_seed0"
    assert "[resume]" in (m2 / "stdout.log").read_text()
    ts = [t for t, _ in results[1].curve]
    assert ts == sorted(set(ts)) and ts[-1] > cut_at and cut_at in ts  # one monotonic curve across the cut
    logged = [json.loads(line).get("t", 0) for line in (m2 / "log.jsonl").read_text().splitlines()]
    assert max(logged) >= 120  # trained on to the sweep's t_max
    aside = list((out / "_incomplete").iterdir())
    assert [p.name.startswith("qmix_m3_seed0-") for p in aside] == [True]
    assert (aside[0] / "log.jsonl").read_text() == ""
    assert results[2].curve[-1][0] >= 60
    assert json.loads((out / "sweep.json").read_text())["maps"] == ["m1", "m2", "m3"]
    assert json.loads((out / "sweep.json").read_text())["records"] == str(recs.resolve())
    for m in ("m1", "m2", "m3"):  # each resumed or restarted run's record, as the report reads its folder
        assert read_record(recs / f"qmix_{m}_seed0.json") == record_from_run_dir(out / f"qmix_{m}_seed0")
    saved = {p.name: p.read_bytes() for p in recs.iterdir()}

    stamps = {r.map_name: (out / f"qmix_{r.map_name}_seed0" / "log.jsonl").stat().st_mtime for r in results}
    _, again = sweep_main(["--resume", str(out), *LOCAL_RAY, "--no-absolute", "--reps", "50"])
    assert [(r.map_name, r.final) for r in again] == [(r.map_name, r.final) for r in results]
    assert stamps == {m: (out / f"qmix_{m}_seed0" / "log.jsonl").stat().st_mtime for m in stamps}
    assert {p.name: p.read_bytes() for p in recs.iterdir()} == saved


def test_a_sweep_task_writes_its_record_and_the_records_folder_is_checked_first(tmp_path):
    """One run's task (no Ray) with ``--records``: its record is written as it finishes and reads as its run
    folder; a records "folder" that is a file, or a record there for a run about to be trained, stops the
    sweep before anything runs; a finished run's missing record is written; sweep.json keeps the folder."""
    from marl.report.runs import load_run
    from marl.sweep import _run_one, plan
    from marl.sweep_plan import args_from_plan, build_parser, merge_plan, plan_record, prepare_records

    out, recs = tmp_path / "sweep", tmp_path / "records"
    runs = plan("qmix", ["m1"], [0], out, "fake", TINY)
    m, s, run_dir, cfg = runs[0]
    res = _run_one(cfg, str(run_dir), m, s, "test_win_rate", 0.95, absolute=False, records=str(recs))
    record = read_record(recs / "qmix_m1_seed0.json")
    assert record == record_from_run_dir(run_dir) and record["sweep_task"]["finished"] == res.finished
    assert record["curves"]["test_win_rate"] == [list(p) for p in res.curve] and res.curve
    from_record = load_run(recs / "qmix_m1_seed0.json", "test_win_rate", 0.95)
    assert dataclasses.replace(from_record, run_dir=run_dir) == load_run(run_dir, "test_win_rate", 0.95)
    (recs / "qmix_m1_seed0.json").unlink()  # a finished run's record is written again before runs start
    assert prepare_records(str(recs), runs, "test_win_rate") == recs
    assert read_record(recs / "qmix_m1_seed0.json") == record
    other = plan("qmix", ["m1"], [0], tmp_path / "other", "fake", TINY)  # another sweep, the same run
    with pytest.raises(
        SystemExit, match="already holds a record of qmix on m1 seed 0, and this sweep is about"
    ):
        prepare_records(str(recs), other, "test_win_rate")
    with pytest.raises(SystemExit, match="is a file; records go into a folder"):
        prepare_records(str(recs / "qmix_m1_seed0.json"), runs, "test_win_rate")
    args = build_parser().parse_args(["--env", "fake", "--maps", "m1", "--records", str(recs)])
    (out / "sweep.json").write_text(json.dumps(plan_record(args)))
    again = build_parser().parse_args(["--env", "fake", "--maps", "m1"])  # the same command without it
    assert merge_plan(out, plan_record(again))["records"] == str(recs.resolve())
    assert args_from_plan(build_parser().parse_args(["--resume", str(out)])).records == str(recs.resolve())


def test_a_sweep_folder_of_other_settings_is_refused(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    (out / "sweep.json").write_text(
        json.dumps(
            {"alg": "vdn", "env": "fake", "overrides": [], "metric": "test_win_rate", "threshold": 0.95}
            | {"maps": ["m1"], "seeds": [0]}
        )
    )
    with pytest.raises(SystemExit, match="other settings .*alg: 'vdn' there, 'qmix' now"):
        sweep_main(["--env", "fake", "--maps", "m1", "--seeds", "1", "--out", str(out)])
    with pytest.raises(SystemExit, match="no sweep.json there"):
        sweep_main(["--resume", str(tmp_path)])


def _training(run_dir: Path) -> bool:
    """The run has logged a loss (its learner has stepped)."""
    log = run_dir / "log.jsonl"
    return log.is_file() and '"key": "loss"' in log.read_text()


@pytest.mark.slow
def test_a_signal_stops_every_run_with_a_checkpoint_and_resume_finishes(tmp_path, shared_ray):
    """SIGTERM to the sweep's driver (as a scheduler or ``kill`` sends it, to that process only): each running
    run saves a checkpoint where it stopped and is not marked finished; the driver exits 143; ``--resume``
    continues both runs from those checkpoints to ``t_max``."""
    from marl.checkpoint import latest, load

    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    # long enough to be stopped part-way, short enough to resume quickly: the signal stopped the runs at
    # t_env 110-196 (2026-11-28, load 7-9 on 2 cores; 3000 before: the resume's steps were most of the test)
    t_max = 1500
    tiny = [a for a in TINY if not a.startswith("t_max=")] + [f"t_max={t_max}"]
    # the driver joins this process's Ray (no second Ray started and stopped for it: 6-7 s at load 6)
    joined = ["--address", shared_ray.get_runtime_context().gcs_address, "--cpus-per-run", "1"]
    cmd = [sys.executable, "scripts/sweep.py", "--env", "fake", "--maps", "m1", "--seeds", "2"]
    cmd += ["--out", str(out), *joined, "--no-absolute", "--reps", "50", *tiny]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the signal reaches the driver only, not the Ray workers
    )
    runs = [out / "qmix_m1_seed0", out / "qmix_m1_seed1"]
    deadline = time.time() + 240
    while not all(_training(r) for r in runs):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline, "the runs did not start training in time"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    text, _ = proc.communicate(timeout=180)
    assert proc.returncode == 143, text[-3000:]
    assert "[sweep] stopping" in text and "--resume" in text
    for r in runs:
        assert not (r / "result.json").exists()  # not finished
        t_saved = load(latest(r))["meta"]["t_env"]
        logged = [
            json.loads(line)["t"] for line in (r / "log.jsonl").read_text().splitlines() if '"t"' in line
        ]
        assert 0 < t_saved < t_max and t_saved == max(logged)  # saved where it stopped: nothing to redo
    _, results = sweep_main(["--resume", str(out), *LOCAL_RAY, "--no-absolute", "--reps", "50"])
    assert [r.error for r in results] == ["", ""]
    for r in runs:
        assert "[resume]" in (r / "stdout.log").read_text() and (r / "result.json").is_file()
        assert load(latest(r))["meta"]["t_env"] >= t_max


def test_run_memory_entries_are_parsed_or_refused_with_what_is_allowed():
    from marl.sweep_plan import parse_run_memory

    assert parse_run_memory(None, ["3m"]) == {}
    assert parse_run_memory("3, 8m=4.5", ["3m", "8m"]) == {None: 3.0, "8m": 4.5}
    for bad, why in [("x", "not GIB > 0"), ("0", "not GIB > 0"), ("2s3z=2", "not a map of this sweep")]:
        with pytest.raises(SystemExit, match=why) as err:
            parse_run_memory(bad, ["3m", "8m"])
        assert "write GIB or MAP=GIB" in str(err.value)


def test_memory_reservations_keep_two_runs_apart_and_too_large_ones_are_refused(tmp_path, shared_ray):
    """Two CPUs, but each run reserves 60 % of the memory Ray offers: the runs go one after the other.
    A reservation larger than any node offers stops the sweep before any run starts."""
    ray = shared_ray
    base = ["--env", "fake", "--maps", "m1", "m2", "--seeds", "1", "--no-absolute", "--reps", "50", *TINY]
    offered = ray.cluster_resources()["memory"] / 2**30
    with pytest.raises(SystemExit, match="more than any Ray node offers") as err:
        sweep_main([*base, "--out", str(tmp_path / "big"), "--run-memory", f"m2={2 * offered:.1f}"])
    assert "m2:" in str(err.value) and not list((tmp_path / "big").glob("qmix_*"))
    out = tmp_path / "apart"
    # before the key=value overrides: one comma-separated value, none of them taken for a reservation
    _, results = sweep_main(["--run-memory", f"{0.6 * offered:.2f}", *base, "--out", str(out)])
    assert ray.is_initialized()
    assert all(not r.error for r in results) and len(results) == 2
    a, b = sorted(results, key=lambda r: r.started)
    assert b.started >= a.finished  # never side by side, though a CPU was free
    assert json.loads((out / "sweep.json").read_text())["run_memory"] == f"{0.6 * offered:.2f}"


def test_the_sweep_report_leaves_out_a_failed_run(tmp_path, capsys):
    """A run stopped part-way (here by the memory check) logged test phases, but its last one is not a
    result of the budget: the sweep's report leaves it out and names it."""
    pytest.importorskip("rliable")
    from marl.sweep import _report

    for seed in (0, 1):
        fake_run(tmp_path, "qmix", "m1", seed, [(0, 0.0), (200, 0.5), (400, 0.8)])
    stopped = fake_run(tmp_path, "qmix", "m1", 2, [(0, 0.9)])
    error = "Traceback ...\nmarl.signals.RunStopped: stopped at t_env=30: the replay buffer would outgrow"
    _report(tmp_path, "t", "test_win_rate", 0.95, 50, {str(stopped): error})
    report = (tmp_path / "report.md").read_text()
    assert "| fake | m1 | qmix | 2 (0, 1) |" in report, report
    assert f"{stopped}: left out, the run failed (marl.signals.RunStopped: stopped at t_env=30" in report
    capsys.readouterr()
    _report(tmp_path, "t", "test_win_rate", 0.95, 50, {})  # without the failure it is a seed like the others
    assert "| fake | m1 | qmix | 3 (0, 1, 2) |" in (tmp_path / "report.md").read_text()


def test_a_failed_run_keeps_its_whole_error_in_its_folder_and_the_sweep_says_where(tmp_path):
    """A run refused at start (here: a replay buffer larger than the memory) leaves its traceback in its
    folder's stdout.log; the driver's line gives the whole message, whose end says what to change, and the
    summary table, which cuts it, says where the rest is."""
    from marl.report.runs import RunResult
    from marl.report.sweep_summary import summary_markdown
    from marl.sweep import _run_one, _state, plan

    m, s, run_dir, cfg = plan("qmix", ["m1"], [0], tmp_path, "fake", [*TINY, "buffer_size=2000000000"])[0]
    with pytest.raises(ValueError, match="Use learner.buffer_size=") as err:
        _run_one(cfg, str(run_dir), m, s, "test_win_rate", 0.95, absolute=False)
    log = (run_dir / "stdout.log").read_text()
    assert "Traceback" in log and log.rstrip().endswith(str(err.value))
    failed = RunResult(m, s, str(run_dir), error=f"Traceback ...\nValueError: {err.value}")
    assert _state(failed, "test_win_rate") == f"FAILED (ValueError: {err.value})"
    table = summary_markdown([failed])
    assert "| m1 | 0 | failed: ValueError: learner.buffer_size=2000000000 episodes" in table
    assert "…" in table and "whole error: the end of its folder's `stdout.log`" in table
