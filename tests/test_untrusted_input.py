"""Untrusted input other than checkpoints: names that become paths, OS errors of a full or read-only disk
(simulated by patching ``os``, no root needed), map files, ``sweep.json``, agent ids, rollout uniforms and
Ctrl-C at any moment of a command-line run."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from train_runs import CLI_TINY as SMALL  # tests/ is on sys.path under pytest

from marl.cli import train_main
from marl.config import ConfigError, dump_config, load_config, load_saved_config
from marl.envs.base import AgentIdError
from marl.run_folder import RunFolderError, RunLock, create_run_dir, rewind_logs
from marl.untrusted import check_name

ROOT = Path(__file__).resolve().parents[1]


def _train(tmp_path: Path, *args: str) -> None:
    train_main("train_qmix.py", "qmix", "", [*SMALL, f"results_dir={tmp_path / 'results'}", *args])


# ---------------------------------------------------------------------------------------------- names
@pytest.mark.parametrize(
    "name", ["/etc/x", "../../escape", "..", ".", "a\nb", "tab\there", "x" * 300, "é", ""]
)
def test_a_name_is_one_folder_name(name: str) -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        check_name(name, "run_name")


@pytest.mark.parametrize("name", ["/etc/x", "../../escape", "..", "a\nb", "x" * 300])
def test_a_bad_run_name_is_a_usage_error_before_anything_is_written(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _train(tmp_path, f"run_name={name}")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "run_name" in err and "at most 100 characters" in err
    assert not (tmp_path / "results").exists() and sorted(os.listdir(tmp_path)) == []
    with pytest.raises(ConfigError, match="run_name"):
        load_config("qmix", env="fake", overrides=[f"run_name={name}"])


def test_the_run_folder_stays_inside_results_dir(tmp_path: Path) -> None:
    results, outside = tmp_path / "results", tmp_path / "outside"
    results.mkdir()
    outside.mkdir()
    (results / "link").symlink_to(outside)
    with pytest.raises(RunFolderError, match="outside"):
        create_run_dir(results, "link", explicit=True)
    with pytest.raises(RunFolderError, match="run_name"):
        create_run_dir(results, "../outside", explicit=True)
    assert create_run_dir(results, "fine.name-1", explicit=True) == results / "fine.name-1"


def test_sweep_run_folders_have_safe_names(tmp_path: Path) -> None:
    from marl.sweep import plan

    runs = plan("qmix", ["3m"], [0], tmp_path, env=None)
    assert runs[0][2] == tmp_path / "qmix_3m_seed0"


# -------------------------------------------------------------------------------------------- OS errors
def _enospc(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_at_the_start_is_one_line_and_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(os, "pwrite", _enospc)  # the lock file's first write finds the disk full
    with pytest.raises(SystemExit) as exit_:
        _train(tmp_path, "run_name=full")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "disk is full" in err and str(tmp_path / "results" / "full") in err
    assert "Traceback" not in err and os.listdir(tmp_path / "results") == []


def test_a_read_only_file_system_on_resume_is_one_line(
    trained: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    real_open = os.open

    def open_(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(".lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", open_)
    with pytest.raises(SystemExit) as exit_:
        train_main("train_qmix.py", "qmix", "", ["--resume", str(trained)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "read-only" in err and str(trained / ".lock") in err


def test_a_full_disk_on_resume_leaves_no_temp_file(
    trained: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    import shutil

    run = Path(shutil.copytree(trained, tmp_path / "r"))
    config_before = (run / "config.yaml").read_bytes()
    real_write_text = Path.write_text

    def write_text(self: Path, *args: object, **kwargs: object) -> int:
        if self.name.endswith(".tmp"):
            real_write_text(self, "")  # a real full disk: the file is created, the write fails
            _enospc()
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(SystemExit) as exit_:
        train_main("train_qmix.py", "qmix", "", ["--resume", str(run), "t_max=400"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "disk is full" in err and str(run) in err and "Traceback" not in err
    assert not list(run.glob("*.tmp")) and (run / "config.yaml").read_bytes() == config_before
    monkeypatch.undo()
    with RunLock(run):  # and the lock was released
        pass


def test_dump_config_and_rewind_leave_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config("qmix", env="fake")
    (tmp_path / "log.jsonl").write_text('{"t": 1, "key": "x", "value": 1.0}\n')
    monkeypatch.setattr(os, "replace", _enospc)
    with pytest.raises(OSError):
        dump_config(cfg, tmp_path / "config.yaml")
    with pytest.raises(RunFolderError, match="disk is full"):
        rewind_logs(tmp_path, 0)
    assert sorted(os.listdir(tmp_path)) == ["log.jsonl"]


def test_a_name_too_long_for_the_file_system_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit_:
        train_main("train_qmix.py", "qmix", "", [*SMALL, f"results_dir={tmp_path / ('d' * 300)}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "too long" in err and "Traceback" not in err


# ----------------------------------------------------------------------------------- maps, sweep.json
@pytest.mark.parametrize(("value", "shown"), [(".inf", "inf"), (".nan", "nan"), ("true", "True")])
def test_a_map_number_must_be_finite(value: str, shown: str) -> None:
    from marl.envs.smac.maps import MAPS_DIR, parse_map

    raw = yaml.safe_load((MAPS_DIR / "3m.yaml").read_text())
    raw["allies"][0]["spawn"] = [yaml.safe_load(value), 16]
    with pytest.raises(ValueError, match=rf"^my.yaml: allies\[0\].spawn must be a point .*finite.*{shown}"):
        parse_map(raw, source="my.yaml")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("5", "JSON object"),
        ('{"alg": NaN}', "NaN"),
        ("[" * 5000 + "]" * 5000, "nested deeper"),
        ("{}", "alg"),
    ],
)
def test_a_malformed_sweep_json_names_the_file_and_field(tmp_path: Path, text: str, reason: str) -> None:
    from marl.sweep_plan import read_plan

    (tmp_path / "sweep.json").write_text(text)
    with pytest.raises(SystemExit, match=f"sweep.json.*{reason}"):
        read_plan(tmp_path / "sweep.json")
    plan = {"alg": "qmix", "env": None, "overrides": [], "metric": "m", "threshold": 0.9}
    (tmp_path / "sweep.json").write_text(json.dumps({**plan, "maps": ["3m"], "seeds": [0, "1"]}))
    with pytest.raises(SystemExit, match="seeds must be a non-empty list of ints"):
        read_plan(tmp_path / "sweep.json")


# --------------------------------------------------------------------------------------------- env API
def test_agent_ids_out_of_range_raise_as_smac_does() -> None:
    from marl.envs.fake import FakeSmacEnv
    from marl.envs.smac import StarCraft2Env

    for env in (StarCraft2Env("3m", seed=0), FakeSmacEnv()):
        env.reset()
        n = env.get_env_info()["n_agents"]
        for bad in (-1, n, 1.0, True):
            for getter in (env.get_obs_agent, env.get_avail_agent_actions):
                with pytest.raises(AgentIdError, match=rf"agent_id {bad!r} is out of range"):
                    getter(bad)
        with pytest.raises(KeyError):  # what SMAC raises
            env.get_obs_agent(-1)
        with pytest.raises(IndexError):
            env.get_avail_agent_actions(n)
        np.testing.assert_array_equal(env.get_obs_agent(n - 1), env.get_obs()[n - 1])
        env.close()
    from marl.envs.smac.batched_env import BatchedStarCraft2Env

    for env in (StarCraft2Env("3m", seed=0), BatchedStarCraft2Env("3m", 2, seed=0)):
        with pytest.raises(AgentIdError, match="agent_id -1"):
            env.action_name(-1, 6)
        assert env.action_name(2, 6) == "attack enemy 0"


@pytest.mark.parametrize("bad", [1.0, -0.1, np.nan, np.inf])
def test_random_rollout_refuses_uniforms_outside_the_unit_interval(bad: float) -> None:
    from marl.envs.smac.batched_env import BatchedStarCraft2Env
    from marl.envs.smac.rollout import random_rollout

    env = BatchedStarCraft2Env("3m", 2, seed=0)
    env.reset()
    u = np.random.default_rng(0).random((4, 2, 3))
    u[2, 1, 0] = bad
    with pytest.raises(ValueError, match=r"in \[0, 1\).*uniforms\[2, 1, 0\]"):
        random_rollout(env, u)
    random_rollout(env, np.nextafter(1.0, 0.0) * np.ones((4, 2, 3)))  # the largest uniform is fine
    env.close()


# -------------------------------------------------------------------------------------------- Ctrl-C
@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.8, 2.0, 5.0, "training"])
def test_ctrl_c_at_any_moment_is_one_line_and_exit_130(tmp_path: Path, delay: float | str) -> None:
    """Sent during the imports, MindSpore's start-up or the first steps (``training``: as soon as the run
    has logged a loss, at any load; a fixed 12 s before): never a traceback."""
    cmd = [sys.executable, "scripts/train_qmix.py", *SMALL, f"results_dir={tmp_path}", "t_max=100000000"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if delay == "training":
        deadline = time.time() + 240
        while not any('"key": "loss"' in log.read_text() for log in tmp_path.glob("*/log.jsonl")):
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the run did not log a loss in 240 s"
            time.sleep(0.1)
    else:
        time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode in (130, 143), (out, err)
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert len([line for line in err.splitlines() if line.strip()]) <= 2, err
    for run in tmp_path.iterdir():  # a folder is left only with a checkpoint in it
        assert (run / "models").is_dir() and any((run / "models").iterdir()), sorted(os.listdir(run))


def test_the_quiet_handler_exits_130_in_one_line(tmp_path: Path) -> None:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        "from marl.interrupt import exit_on_interrupt; exit_on_interrupt();"
        "print('ready', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(ROOT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (
        proc.returncode == 130
        and err.strip() == "[marl] SIGINT received: stopped (nothing half-written is left)"
    )


def test_saved_config_of_a_bad_run_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(dump_config(load_config("qmix", env="fake")) + "run_name: ../up\n")
    with pytest.raises(ConfigError, match="run_name"):
        load_saved_config(tmp_path)


@pytest.mark.parametrize(
    ("text", "reason"), [('{"format": NaN}', "NaN"), ("[" * 5000 + "]" * 5000, "nested")]
)
def test_a_malformed_run_record_names_the_file(tmp_path: Path, text: str, reason: str) -> None:
    from marl.report.records import RecordError, read_record

    (tmp_path / "qmix_3m_seed0.json").write_text(text)
    with pytest.raises(RecordError, match=f"qmix_3m_seed0.json: the run record does not parse .*{reason}"):
        read_record(tmp_path / "qmix_3m_seed0.json")


def test_an_unreadable_best_metric_is_ignored_not_fatal(tmp_path: Path) -> None:
    from marl.checkpoint import Checkpointer, best

    Checkpointer(tmp_path).save(10, {"w": np.zeros(2)}, metric=0.5)
    (best(tmp_path) / "meta.json").write_text('{"_checkpoint": {"metric": "high"}}')
    assert Checkpointer(tmp_path).best_metric is None
