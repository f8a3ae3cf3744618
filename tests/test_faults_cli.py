"""Faults seen from the command line: real signals sent to a real training process whose learner step is
compiled, and every kind of bad input (one usage line, exit code 2, no folder left behind)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from train_runs import CLI_TINY as SMALL  # tests/ is on sys.path under pytest

from marl.checkpoint import latest, load, periodic
from marl.cli import train_main
from marl.config import ConfigError, load_config
from marl.run_folder import RunLock

ROOT = Path(__file__).resolve().parents[1]


def _trained_steps(run_dir: Path) -> int:
    log = run_dir / "log.jsonl"
    if not log.is_file():
        return 0
    return sum('"key": "loss"' in line for line in log.read_text().splitlines())


def _start(run_dir: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "scripts/train_qmix.py",
        *SMALL,
        f"results_dir={run_dir.parent}",
        f"run_name={run_dir.name}",
        "t_max=100000000",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _wait_until_training(proc: subprocess.Popen, run_dir: Path, timeout: float = 300.0) -> None:
    """Until the jitted learner step has run (a loss is logged) and a checkpoint exists."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"training exited early ({proc.returncode}): {proc.stdout.read()[-3000:]}")
        if _trained_steps(run_dir) >= 2 and periodic(run_dir):
            return
        time.sleep(0.2)
    proc.kill()
    pytest.fail("training did not start in time")


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_a_jitted_run_with_a_checkpoint_then_resume_continues(tmp_path, sig, code):
    run_dir = tmp_path / "sig"
    proc = _start(run_dir)
    _wait_until_training(proc, run_dir)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=180)
    # a Ctrl-C that lands while MindSpore runs arrives as SIGTERM (marl/signals.py): 130 or 143 then
    allowed = {130, 143} if sig == signal.SIGINT else {code}
    assert proc.returncode in allowed, out[-3000:]
    assert f"{signal.Signals(proc.returncode - 128).name} received" in out
    payload = load(latest(run_dir))
    t_stop = payload["meta"]["t_env"]
    assert t_stop > 0 and payload["_checkpoint"]["nonfinite"] == []
    assert (run_dir / "curves.png").stat().st_size > 1000
    RunLock(run_dir).acquire().release()  # the stopped run released its lock
    if sig == signal.SIGINT:  # the interrupted run resumes and finishes normally
        again = subprocess.run(
            [sys.executable, "scripts/train_qmix.py", "--resume", str(run_dir), f"t_max={t_stop + 150}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert load(latest(run_dir))["meta"]["t_env"] >= t_stop + 150
        ts = [
            json.loads(line)["t"]
            for line in (run_dir / "log.jsonl").read_text().splitlines()
            if '"key": "loss"' in line
        ]
        assert ts == sorted(ts) and len(ts) == len(set(ts))


@pytest.mark.slow
def test_second_ctrl_c_aborts_but_keeps_the_last_checkpoint(tmp_path):
    run_dir = tmp_path / "twice"
    proc = _start(run_dir)
    _wait_until_training(proc, run_dir)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode in (130, 143), out[-3000:]  # 143: it arrived while MindSpore ran (signals.py)
    for folder in periodic(run_dir):  # whatever the second signal cut short, every checkpoint is whole
        assert load(folder)["meta"]["t_env"] == int(folder.name)
    assert not list((run_dir / "models").glob(".tmp-*"))


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        train_main("train_qmix.py", "qmix", "", argv=argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("train_qmix.py: error: "), err
    return err[-1]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["log.test_interval=0"], "log.test_interval must be >= 1"),
        (["log.log_interval=-5"], "log.log_interval must be >= 1"),
        (["checkpoint.save_interval=-1"], "checkpoint.save_interval must be >= 0"),
        (["log.plot_interval_s=-1"], "log.plot_interval_s must be >= 0 seconds"),
        (["ms_threads=-2"], "ms_threads must be >= 0 (0 = every core this process may use)"),
        (["learner.lr=inf"], "learner.lr must be > 0 and finite"),
        (["learner.lr=nan"], "learner.lr must be > 0 and finite"),
        (["learner.on_nonfinite=maybe"], "'stop' or 'skip'"),
        (["agent.name=foo"], "unknown agent 'foo'"),
        (["runner.name=foo"], "unknown runner 'foo'"),
        (["--map", "3m", "env.map_name=8m"], "--map 3m conflicts with env.map_name=8m"),
        (["--seed", "1", "seed=2"], "--seed 1 conflicts with seed=2"),
        (["--alg", "vdn", "alg=qmix"], "--alg vdn conflicts with alg=qmix"),
        (["learner.buffer_size=1000000000"], "of memory is available"),  # would be OOM-killed part-way
    ],
)
def test_bad_input_is_one_usage_line_and_leaves_no_folder(tmp_path, capsys, argv, says):
    line = _usage_error(capsys, [*SMALL, f"results_dir={tmp_path / 'res'}", *argv])
    assert says in line
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").iterdir())


def test_unknown_gym_id_and_bad_results_dir(tmp_path, capsys):
    line = _usage_error(
        capsys, ["--alg", "dqn", "--env", "gym", "--map", "NoSuchEnv-v9", f"results_dir={tmp_path}"]
    )
    assert "unknown Gymnasium id 'NoSuchEnv-v9'" in line
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert "is a file" in _usage_error(capsys, [*SMALL, f"results_dir={blocker}"])
    assert "cannot create results_dir" in _usage_error(capsys, [*SMALL, f"results_dir={blocker / 'sub'}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.slow
def test_resume_refuses_bad_overrides_before_writing_anything(tmp_path, capsys):
    train_main(
        "train_qmix.py", "qmix", "", argv=[*SMALL, f"results_dir={tmp_path}", "run_name=r", "t_max=200"]
    )
    run_dir = tmp_path / "r"
    config_before = (run_dir / "config.yaml").read_bytes()
    log_before = (run_dir / "log.jsonl").read_bytes()
    assert "does not fit" in _usage_error(capsys, ["--resume", str(run_dir), "agent.hidden_dim=32"])
    assert "--alg vdn differs from the resumed run" in _usage_error(
        capsys, ["--resume", str(run_dir), "--alg", "vdn"]
    )
    assert "--seed 7 differs" in _usage_error(capsys, ["--resume", str(run_dir), "--seed", "7"])
    assert "cannot move a run" in _usage_error(
        capsys, ["--resume", str(run_dir), f"results_dir={tmp_path}/x"]
    )
    assert "no saved config" in _usage_error(capsys, ["--resume", str(tmp_path / "nowhere")])
    assert (run_dir / "config.yaml").read_bytes() == config_before
    assert (run_dir / "log.jsonl").read_bytes() == log_before
    train_main("train_qmix.py", "qmix", "", argv=["--resume", str(run_dir), "t_max=300"])  # still resumable
    assert load(latest(run_dir))["meta"]["t_env"] >= 300


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    for sub in ("algs", "envs"):
        (tmp_path / sub).mkdir()
    (tmp_path / "envs" / "fake.yaml").write_text("env:\n  name: fake\n")
    (tmp_path / "algs" / "qmix.yaml").write_text("learner:\n  lr: [0.1\n  gamma: 0.9\n")
    with pytest.raises(ConfigError, match=r"qmix.yaml: line \d+, column \d+ is not valid YAML"):
        load_config("qmix", env="fake", config_dir=tmp_path)
