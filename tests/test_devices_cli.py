"""The ``marl`` command, the MindSpore device setting (``ms_device``) and the kernels' CPU-keyed cache."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from marl import kernels
from marl.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _marl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MS_DEV_HOST_BLOCKING_RUN": "1"}
    cmd = [sys.executable, "-m", "marl", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_marl_lists_its_commands_and_refuses_an_unknown_one(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert all(name in out for name in ("train", "evaluate", "sweep", "report", "board"))
    assert main(["trian"]) == 2
    assert (
        "unknown command 'trian'; commands are train, evaluate, sweep, report, board"
        in capsys.readouterr().err
    )


def test_an_unknown_device_is_a_config_error(tmp_path):
    out = _marl("train", "--env", "fake", "ms_device=tpu", f"results_dir={tmp_path / 'r'}", cwd=tmp_path)
    assert out.returncode == 2
    assert "ms_device must be one of cpu, gpu, ascend, got 'tpu'" in out.stderr
    assert not (tmp_path / "r").exists()


def test_a_device_this_machine_lacks_is_one_usage_line_naming_what_is_available(tmp_path):
    from marl.utils import ms as msu

    if "gpu" in msu.available_devices():
        pytest.skip("this machine has a GPU: the error path needs one without")
    out = _marl("train", "--env", "fake", "ms_device=gpu", f"results_dir={tmp_path / 'r'}", cwd=tmp_path)
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("marl train: error: ms_device=gpu: MindSpore")
    assert errors[0].endswith("available: cpu")
    assert "Traceback" not in out.stderr and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_marl_train_runs_a_fake_env_from_another_directory(tmp_path):
    out = _marl("train", "--env", "fake", "t_max=300", "log.progress=false", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (run,) = (tmp_path / "results").iterdir()
    assert run.name.startswith("qmix_fake_seed0_") and "ms_device: cpu" in (run / "config.yaml").read_text()


def test_the_kernels_are_cpu_code(monkeypatch, capsys):
    monkeypatch.setitem(kernels._DEVICE, "name", "cpu")
    kernels.library.cache_clear()
    try:
        kernels.use_device("gpu")
        assert kernels.library("gru_seq") is None
        assert "gru_seq kernel is CPU code; on gpu MindSpore's path is used" in capsys.readouterr().err
    finally:
        kernels.use_device("cpu")
        kernels.library.cache_clear()


def test_the_kernel_cache_key_follows_the_cpu(monkeypatch, tmp_path):
    if kernels._compiler() is None:
        pytest.skip("no C++ compiler")
    kernels.cpu_signature.cache_clear()
    here = kernels.cpu_signature()
    assert len(here) == 16 and here == kernels.cpu_signature()
    monkeypatch.setattr(kernels, "_cache_dirs", lambda: [tmp_path])
    ours = kernels.build("gru_seq", quiet=True)
    monkeypatch.setattr(kernels, "cpu_signature", lambda: "another-cpu-isa")
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(kernels.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    theirs = kernels.build("gru_seq", quiet=True)  # another CPU: another file, compiled anew
    assert theirs != ours and theirs.parent == ours.parent and len(calls) == 1


def test_marl_board_without_mindinsight_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        main(["board", "--venv", str(tmp_path / "none"), "--results", str(tmp_path / "r")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "MindInsight is not installed in" in err and "make board-env" in err
    assert not (tmp_path / "r").exists()


def test_marl_board_starts_and_stops_the_mindinsight_it_finds(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "venv" / "bin" / "mindinsight"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n')
    fake.chmod(0o755)
    assert (
        main(["board", "--venv", str(tmp_path / "venv"), "--results", str(tmp_path / "r"), "--port", "8091"])
        == 0
    )
    assert main(["board", "stop", "--venv", str(tmp_path / "venv"), "--port", "8091"]) == 0
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [f"start --summary-base-dir {(tmp_path / 'r').resolve()} --port 8091", "stop --port 8091"]
    assert "http://127.0.0.1:8091" in capsys.readouterr().out
