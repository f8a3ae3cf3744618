"""Checkpoints: round trip, atomicity under a failure mid-save, pruning, best tracking, recovery."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import marl.checkpoint as ckpt
from marl.checkpoint import Checkpointer, CheckpointError, best, latest, load


def make_payload(t: int) -> dict:
    rng = np.random.default_rng(t)
    py_rng = random.Random(t)
    return {
        "agent": {"fc1.weight": rng.standard_normal((4, 3)).astype(np.float32), "fc1.bias": np.arange(3)},
        "mixer": {"hyper_w1": rng.standard_normal((2, 2))},
        "optimizer": {"step": np.int64(t), "moments": [np.ones(2), np.zeros(2)]},
        "t_env": t,
        "episode": t // 10,
        "counters": {"train_steps": 3 * t, "best": None, "name": "qmix", "last_test": -math.inf},
        "config": {"learner": {"lr": 1e-3, "double_q": True}, "env": {"args": {"x": [1, 2]}}},
        "rng": {"numpy": rng.bit_generator.state, "python": py_rng.getstate()},
    }


def assert_same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (a, b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert type(a) is type(b) and a == b, (a, b)


def test_round_trip_keeps_arrays_types_and_rng_state(tmp_path: Path) -> None:
    payload = make_payload(1000)
    path = Checkpointer(tmp_path).save(1000, payload)
    assert path == tmp_path / "models" / "1000"
    assert {p.name for p in path.iterdir()} == {"arrays.npz", "meta.json", "manifest.json"}  # no pickle
    loaded = load(path)
    meta = loaded.pop("_checkpoint")
    assert meta["t_env"] == 1000 and meta["metric"] is None and meta["path"] == str(path)
    assert_same(payload, loaded)
    # the restored RNG states continue the same streams
    gen = np.random.default_rng()
    gen.bit_generator.state = loaded["rng"]["numpy"]
    ref = np.random.default_rng(1000)
    ref.standard_normal((4, 3)), ref.standard_normal((2, 2))  # the draws made before the state was saved
    np.testing.assert_array_equal(gen.random(5), ref.random(5))
    r = random.Random()
    r.setstate(loaded["rng"]["python"])
    assert r.random() == random.Random(1000).random()


def test_failure_mid_save_keeps_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saver = Checkpointer(tmp_path)
    saver.save(100, make_payload(100))

    real_dump = ckpt.json.dump

    def dump_then_fail(obj: object, fh: object, **kw: object) -> None:
        real_dump(obj, fh, **kw)  # arrays.npz and part of meta.json are on disk when the "crash" happens
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt.json, "dump", dump_then_fail)
    with pytest.raises(OSError, match="No space left"):
        saver.save(200, make_payload(200))
    monkeypatch.undo()
    assert latest(tmp_path) == tmp_path / "models" / "100"
    assert not (tmp_path / "models" / "200").exists()
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["100"]  # the temp folder was removed
    assert load(latest(tmp_path))["t_env"] == 100


def test_killed_process_mid_save_leaves_last_good_checkpoint(tmp_path: Path) -> None:
    """A process that dies hard (os._exit) while writing leaves a temp folder, never a broken checkpoint."""
    script = textwrap.dedent(
        f"""
        import os, numpy as np
        import marl.checkpoint as ckpt
        saver = ckpt.Checkpointer({str(tmp_path)!r})
        saver.save(100, {{"w": np.ones(3), "t_env": 100}})
        def die(*a, **k):
            os._exit(3)
        ckpt.json.dump = die
        saver.save(200, {{"w": np.zeros(3), "t_env": 200}})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    names = sorted(p.name for p in (tmp_path / "models").iterdir())
    assert len(names) == 2 and names[1] == "100" and names[0].startswith(".tmp-200")
    assert latest(tmp_path) == tmp_path / "models" / "100"
    np.testing.assert_array_equal(load(latest(tmp_path))["w"], np.ones(3))
    Checkpointer(tmp_path)  # a new Checkpointer cleans the crashed save's leftovers
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["100"]


def test_pruning_keeps_last_n(tmp_path: Path) -> None:
    saver = Checkpointer(tmp_path, keep_last=2, save_best=False)
    for t in (50, 100, 150, 1000):
        saver.save(t, {"t_env": t, "w": np.full(2, t)})
    assert [p.name for p in ckpt.periodic(tmp_path)] == ["150", "1000"]  # numeric, not lexical, order
    assert latest(tmp_path) == tmp_path / "models" / "1000"
    assert saver.load()["t_env"] == 1000
    assert best(tmp_path) is None


def test_best_tracking_survives_restart(tmp_path: Path) -> None:
    saver = Checkpointer(tmp_path, keep_last=1)
    saver.save(100, {"t_env": 100}, metric=0.2)
    saver.save(200, {"t_env": 200}, metric=0.5)
    saver.save(300, {"t_env": 300}, metric=0.4)
    saver.save(400, {"t_env": 400}, metric=float("nan"))
    b = load(best(tmp_path))
    assert b["t_env"] == 200 and b["_checkpoint"]["metric"] == 0.5
    assert [p.name for p in ckpt.periodic(tmp_path)] == ["400"]
    again = Checkpointer(tmp_path, keep_last=1)
    assert again.best_metric == 0.5
    again.save(500, {"t_env": 500}, metric=0.45)
    assert load(best(tmp_path))["t_env"] == 200
    again.save(600, {"t_env": 600}, metric=0.9)
    assert load(best(tmp_path))["t_env"] == 600


def test_resave_same_step_replaces_and_errors_are_clear(tmp_path: Path) -> None:
    saver = Checkpointer(tmp_path)
    saver.save(10, {"w": np.zeros(2)})
    saver.save(10, {"w": np.ones(2)})
    np.testing.assert_array_equal(load(tmp_path / "models" / "10")["w"], np.ones(2))
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")]
    with pytest.raises(CheckpointError, match="not a checkpoint folder"):
        load(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="without '/'"):
        saver.save(20, {"a/b": 1})
    assert latest(tmp_path / "empty") is None
    with pytest.raises(CheckpointError, match="no checkpoint under"):
        Checkpointer(tmp_path / "empty").load()
    assert os.listdir(tmp_path / "empty" / "models") == []
