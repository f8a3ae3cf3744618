"""End to end: the Logger's summaries read back through a real MindInsight server's REST API.

MindInsight 2.3.1 lives in its own virtual environment (``.venv-board``: it pins protobuf 3.20, which
breaks MindSpore 2.10), built by ``make board-env``. These tests are in the external tier (``make
test-external``): when the venv is missing they skip and say so; a test never installs anything.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from marl.config import load_config
from marl.logging import Logger

ROOT = Path(__file__).resolve().parent.parent
BOARD_VENV = ROOT / ".venv-board"
API = "/v1/mindinsight/datavisual"


def ensure_board_venv() -> Path:
    """Path of the ``mindinsight`` executable of ``.venv-board``; skips the test when the venv is absent."""
    exe = BOARD_VENV / "bin" / "mindinsight"
    if not (exe.is_file() and (BOARD_VENV / ".installed").is_file()):
        pytest.skip(f"no MindInsight venv at {BOARD_VENV.name}/ (build it with `make board-env`)")
    return exe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(port: int, path: str, **params: str) -> dict:
    url = f"http://127.0.0.1:{port}{API}/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.mindinsight
def test_scalars_round_trip_through_mindinsight(tmp_path: Path) -> None:
    exe = ensure_board_venv()
    results = tmp_path / "results"
    run_dir = results / "qmix_3m_seed0"
    expected = {"return_mean": {}, "battle_won_mean": {}}
    lg = Logger(run_dir, load_config("qmix"), t_max=1000, console=False, mindinsight=True)
    assert lg.mindinsight_active
    for i, t in enumerate(range(100, 600, 100)):
        expected["return_mean"][t] = 0.5 + 1.25 * i
        expected["battle_won_mean"][t] = i / 8
        for key, series in expected.items():
            lg.log(key, series[t], t)
    lg.log_histogram("q_taken", np.linspace(-1.0, 1.0, 101), 500)
    lg.close(plot=False)

    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }  # it spawns gunicorn
    start = [
        str(exe),
        "start",
        "--port",
        str(port),
        "--summary-base-dir",
        str(results),
        "--workspace",
        str(tmp_path / "ws"),
        "--reload-interval",
        "1",
    ]
    proc = subprocess.run(start, capture_output=True, text=True, timeout=120, env=env)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"127.0.0.1:{port}" in proc.stdout  # listens on loopback only
        deadline, jobs = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            jobs = get_json(port, "train-jobs")["train_jobs"]
            if jobs and jobs[0]["plugins"]["scalar"]:
                break
            time.sleep(0.5)
        assert [j["train_id"] for j in jobs] == ["./qmix_3m_seed0"]
        assert set(jobs[0]["plugins"]["scalar"]) == {"return_mean/scalar", "battle_won_mean/scalar"}
        assert jobs[0]["plugins"]["histogram"] == ["q_taken/histogram"]
        for key, series in expected.items():
            meta = get_json(port, "scalar/metadata", train_id="./qmix_3m_seed0", tag=f"{key}/scalar")[
                "metadatas"
            ]
            got = {m["step"]: m["value"] for m in meta}
            assert sorted(got) == sorted(series)
            for t, value in series.items():
                assert got[t] == pytest.approx(value, abs=1e-6)
        hist = get_json(port, "histograms", train_id="./qmix_3m_seed0", tag="q_taken/histogram")["histograms"]
        assert hist[0]["step"] == 500
        buckets = hist[0][
            "buckets"
        ]  # [left edge, width, count]; MindInsight re-bins, so counts are approximate
        assert buckets[0][0] == pytest.approx(-1.0, abs=0.05)
        assert buckets[-1][0] + buckets[-1][1] == pytest.approx(1.0, abs=0.05)
        assert sum(b[2] for b in buckets) == pytest.approx(101, rel=0.15)
    finally:
        subprocess.run([str(exe), "stop", "--port", str(port)], capture_output=True, timeout=60, env=env)
    with pytest.raises(urllib.error.URLError):
        get_json(port, "train-jobs")


@pytest.mark.mindinsight
def test_runs_are_compared_on_mindinsights_lineage_page(tmp_path: Path) -> None:
    """Two runs' hyper-parameters and final test metrics, as MindInsight's model-lineage API lists them."""
    exe = ensure_board_venv()
    results = tmp_path / "results"
    for seed, lr, win in ((0, 0.0005, 0.5), (1, 0.001, 0.75)):
        lg = Logger(results / f"qmix_3m_seed{seed}", None, t_max=1000, console=False, mindinsight=True)
        lg.log("test_win_rate", win, 1000)
        hparams = {"alg": "qmix", "map": "3m", "seed": seed, "lr": lr, "batch_size": 32, "optimizer": "adam"}
        lg.log_lineage("qmix", hparams, {"test_win_rate": win, "test_return_mean": 10 + seed}, 1000)
        lg.close(plot=False)
    port = free_port()
    env = {**os.environ, "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    start = [str(exe), "start", "--port", str(port), "--summary-base-dir", str(results)]
    start += ["--workspace", str(tmp_path / "ws"), "--reload-interval", "1"]
    proc = subprocess.run(start, capture_output=True, text=True, timeout=120, env=env)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        url = f"http://127.0.0.1:{port}/v1/mindinsight/lineagemgr/lineages"
        deadline, rows = time.monotonic() + 60, []
        while time.monotonic() < deadline and len(rows) < 2:
            req = urllib.request.Request(url, data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=10) as resp:
                rows = json.loads(resp.read())["object"]
            time.sleep(0.5)
        got = {r["summary_dir"]: r["model_lineage"] for r in rows}
        assert sorted(got) == ["./qmix_3m_seed0", "./qmix_3m_seed1"]
        for seed, lr, win in ((0, 0.0005, 0.5), (1, 0.001, 0.75)):
            row = got[f"./qmix_3m_seed{seed}"]
            assert row["network"] == "qmix" and row["learning_rate"] == pytest.approx(lr)
            assert (
                row["batch_size"] == 32 and row["optimizer"] == "adam" and row["train_dataset_count"] == 1000
            )
            assert row["metric"] == {"test_win_rate": win, "test_return_mean": 10 + seed}
            assert row["user_defined"]["map"] == "3m" and row["user_defined"]["seed"] == seed
    finally:
        subprocess.run([str(exe), "stop", "--port", str(port)], capture_output=True, timeout=60, env=env)
