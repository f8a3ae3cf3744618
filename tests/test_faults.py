"""Faults a run must survive (in-process): non-finite updates, corrupt and untrusted checkpoints,
concurrent writers, interrupted-and-resumed runs (exact with ``checkpoint.save_buffer``), log rewind.
Signals and command-line input are in ``test_faults_cli.py``."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from train_runs import FAULTS_TINY as TINY  # tests/ is on sys.path under pytest

from marl.checkpoint import Checkpointer, CheckpointError, latest, load, load_latest, periodic
from marl.cli import evaluate_main
from marl.config import load_config
from marl.provenance import code_version, read_provenance
from marl.run_folder import RunFolderError, RunLock, create_run_dir, default_run_name
from marl.trainer import RunStopped, Trainer, flatten_arrays, nest_arrays


def _cfg(tmp_path: Path, *extra: str, alg: str = "qmix") -> object:
    return load_config(alg, env="fake", overrides=[*TINY, f"results_dir={tmp_path}", "run_name=r", *extra])


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _series(run_dir: Path, key: str) -> list[tuple[int, float]]:
    recs = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [(r["t"], r["value"]) for r in recs if r.get("key") == key and "value" in r]


@pytest.mark.slow
def test_nonfinite_update_stops_without_touching_checkpoints(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=300")).run()
    before = _digests(run_dir / "models")
    assert len(periodic(run_dir)) >= 2
    cfg = load_config(
        base=load(latest(run_dir))["meta"]["config"], overrides=["t_max=5000", "learner.lr=1e30"]
    )
    trainer = Trainer(cfg, resume=run_dir)
    with pytest.raises(RunStopped, match="non-finite values at train step") as stop:
        trainer.run()
    assert stop.value.exit_code == 1 and "learner.on_nonfinite=skip" in str(stop.value)
    after = _digests(run_dir / "models")
    assert before.items() <= after.items()  # every earlier checkpoint kept, unchanged
    for folder in periodic(run_dir):  # and none written holds a NaN or inf
        assert load(folder)["_checkpoint"]["nonfinite"] == [], folder
    for w in trainer.learner.actor_weights().values():  # the non-finite update was never applied
        assert np.isfinite(w).all()


def test_nonfinite_skip_mode_trains_on_with_finite_weights(tmp_path):
    cfg = _cfg(tmp_path, "t_max=600", "learner.lr=1e30", "learner.on_nonfinite=skip")
    trainer = Trainer(cfg)
    run_dir = trainer.run()
    skips = _series(run_dir, "nonfinite_skips")
    assert skips and skips[-1][1] >= 1
    payload = load(latest(run_dir))
    assert payload["meta"]["t_env"] >= 600 and payload["_checkpoint"]["nonfinite"] == []


@pytest.mark.slow
def test_corrupt_latest_checkpoint_falls_back_and_names_the_file(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=300")).run()
    folders = periodic(run_dir)
    newest, older = folders[-1], folders[-2]
    (newest / "arrays.npz").write_bytes((newest / "arrays.npz").read_bytes()[:100])  # truncated
    with pytest.raises(CheckpointError, match="corrupt"):
        load(newest)
    said: list[str] = []
    payload = load_latest(run_dir, report=said.append)
    assert payload["_checkpoint"]["path"] == str(older)
    assert any(str(newest / "arrays.npz") in line and "corrupt" in line for line in said)
    (older / "meta.json").write_text("{not json")
    said.clear()
    assert load_latest(run_dir, report=said.append)["_checkpoint"]["path"] == str(folders[-3])
    assert len(said) == 2 and "meta.json" in said[1]
    result = evaluate_main(["--checkpoint", str(run_dir), "--episodes", "2", "--envs", "1"])
    assert result["episodes"] == 2  # evaluate.py falls back the same way
    resumed = Trainer(load_config(base=load(folders[-3])["meta"]["config"]), resume=run_dir)
    assert resumed.t_env == int(folders[-3].name)
    resumed.run()


def test_checkpoint_holds_no_pickle_and_refuses_one(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=200")).run()
    ckpt = latest(run_dir)
    names = sorted(p.name for p in ckpt.iterdir())
    assert names == ["agent.ckpt", "arrays.npz", "manifest.json", "meta.json"]
    with np.load(ckpt / "arrays.npz", allow_pickle=False) as npz:  # every array loads without pickle
        assert all(npz[name].dtype != object for name in npz.files)
    rng = load(ckpt)["rng"]["trainer"]
    assert rng["bit_generator"] == "PCG64"  # RNG states are plain JSON
    # a planted pickle is never executed: the folder is refused
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (ckpt / "objects.pkl").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(CheckpointError, match="pickle"):
        load(ckpt)
    assert not marker.exists()


def test_nonfinite_weights_in_a_checkpoint_are_reported(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=100")).run()
    payload = load(latest(run_dir))
    arrays = flatten_arrays(payload["arrays"])
    name = next(k for k, v in arrays.items() if v.dtype.kind == "f")
    arrays[name] = np.full_like(arrays[name], np.nan)
    payload["arrays"] = nest_arrays(arrays)
    del payload["_checkpoint"]
    Checkpointer(run_dir, keep_last=10).save(999_999, payload)
    said: list[str] = []
    loaded = load_latest(run_dir, report=said.append)
    assert loaded["_checkpoint"]["nonfinite"] == [f"arrays/{name}"]
    assert len(said) == 1 and "non-finite" in said[0] and name in said[0]


def test_second_writer_is_refused_and_names_are_unique(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    with RunLock(folder):
        with pytest.raises(RunFolderError, match=r"in use by another run \(pid"):
            RunLock(folder).acquire()
    RunLock(folder).acquire().release()  # free again once the holder is gone
    names = {default_run_name("qmix", "3m", 0) for _ in range(50)}
    assert len(names) > 1  # microsecond stamps
    a = create_run_dir(tmp_path, "same", explicit=False)
    b = create_run_dir(tmp_path, "same", explicit=False)
    assert a != b and b.name == "same-2"
    (a / "config.yaml").write_text("alg: qmix\n")
    with pytest.raises(RunFolderError, match="already holds a run"):
        create_run_dir(tmp_path, "same", explicit=True)


def test_resume_of_a_locked_run_fails_at_once(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=100")).run()
    with RunLock(run_dir):
        with pytest.raises(RunFolderError, match="in use"):
            Trainer(None, resume=run_dir)


@pytest.mark.slow
def test_resume_rewinds_logs_to_the_checkpoint(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=300", "log.mindinsight=true")).run()
    t_ckpt = load(latest(run_dir))["meta"]["t_env"]
    with open(run_dir / "log.jsonl", "a") as fh:  # what a crash after the checkpoint leaves behind
        for t in (t_ckpt + 50, t_ckpt + 150):
            fh.write(json.dumps({"t": t, "key": "loss", "value": 123.0, "time": 0}) + "\n")
    events_before = sorted(p.name for p in run_dir.glob("events.out.events.summary.*"))
    cfg = load_config(base=load(latest(run_dir))["meta"]["config"], overrides=["t_max=600"])
    Trainer(cfg, resume=run_dir).run()
    for key in ("loss", "episode", "test_win_rate"):
        ts = [t for t, _ in _series(run_dir, key)]
        assert ts == sorted(ts) and len(ts) == len(set(ts)), (key, ts)
    assert 123.0 not in [v for _, v in _series(run_dir, "loss")]
    moved = [p.name for p in (run_dir / "superseded").rglob("events.out.events.summary.*")]
    assert events_before and sorted(moved) == events_before
    assert list(run_dir.glob("events.out.events.summary.*"))  # a fresh event file: history replayed
    launches = read_provenance(run_dir)  # each launch says which code and machine ran it
    assert [p["event"] for p in launches] == ["start", "resume"]
    assert launches[0]["commit"] == code_version()["commit"] and launches[0]["versions"]["mindspore"]


@pytest.mark.slow
@pytest.mark.parametrize("overlap", ["false", "true"])
def test_exact_resume_reproduces_the_uninterrupted_run(tmp_path, overlap):
    """Also with acting beside learning: a checkpoint falls between rounds, where no batch is in flight.
    The learner step is compiled: this is the compiled learner's exact-resume test."""
    common = (
        "learner.use_jit=true",
        "checkpoint.save_buffer=true",
        "log.log_interval=50",
        "learner.target_update_interval=20",
        f"runner.overlap={overlap}",
    )
    straight = Trainer(_cfg(tmp_path, "run_name=straight", "t_max=700", *common)).run()
    first = Trainer(_cfg(tmp_path, "run_name=cut", "t_max=350", *common)).run()
    cfg = load_config(base=load(latest(first))["meta"]["config"], overrides=["t_max=700"])
    resumed = Trainer(cfg, resume=first)
    resumed.run()
    assert _series(first, "loss") == _series(straight, "loss")
    a, b = load(latest(straight)), load(latest(first))
    assert a["meta"]["t_env"] == b["meta"]["t_env"] and a["meta"]["train_steps"] == b["meta"]["train_steps"]
    for k, v in flatten_arrays(a["arrays"]).items():
        np.testing.assert_array_equal(flatten_arrays(b["arrays"])[k], v, err_msg=k)


def test_test_nepisode_zero_means_no_test_phase(tmp_path):
    run_dir = Trainer(_cfg(tmp_path, "t_max=300", "log.test_nepisode=0")).run()
    assert not _series(run_dir, "test_return_mean") and _series(run_dir, "loss")


def test_disk_full_during_a_save_stops_the_run_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    import errno

    import marl.checkpoint as ckpt

    trainer = Trainer(_cfg(tmp_path, "t_max=100000"))
    real_savez, calls = ckpt.np.savez, []

    def savez_then_full(fh, **arrays):
        calls.append(1)
        if len(calls) == 3:
            real_savez(fh, **dict(list(arrays.items())[:2]))  # half written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        real_savez(fh, **arrays)

    monkeypatch.setattr(ckpt.np, "savez", savez_then_full)
    with pytest.raises(RunStopped, match="No space left on device.*newest intact checkpoint") as stop:
        trainer.run()
    assert stop.value.exit_code == 1
    intact = latest(trainer.run_dir)
    assert intact is not None and load(intact)["_checkpoint"]["nonfinite"] == []
    assert not list((trainer.run_dir / "models").glob(".tmp-*"))


@pytest.mark.slow
def test_exact_resume_on_the_embedded_smac_engine(tmp_path):
    """The batched SMAC engine hands over its random streams too: 3m interrupted and resumed is bit-exact."""
    common = [
        "learner.batch_size=4",
        "learner.buffer_size=16",
        "runner.batch_size_run=4",
        "log.test_interval=300",
        "log.test_nepisode=4",
        "log.log_interval=100",
        "checkpoint.save_interval=0",
        "checkpoint.save_buffer=true",
        "log.mindinsight=false",
        "env.backend=sim",
        "learner.target_update_interval=10",
        # the engine's streams are under test, not the graph compiles (each run compiled one graph per episode
        # length: most of the test's time); the compiled learner's exact resume is the fake-env test's above
        "learner.use_jit=false",
        f"results_dir={tmp_path}",
    ]

    def cfg(name: str, t_max: int) -> object:
        return load_config("qmix", map_name="3m", overrides=[*common, f"run_name={name}", f"t_max={t_max}"])

    straight = Trainer(cfg("straight", 900)).run()
    cut = Trainer(cfg("cut", 450)).run()
    Trainer(load_config(base=load(latest(cut))["meta"]["config"], overrides=["t_max=900"]), resume=cut).run()
    assert _series(cut, "loss") == _series(straight, "loss") and len(_series(straight, "loss")) >= 3
    a, b = load(latest(straight)), load(latest(cut))
    assert a["meta"]["t_env"] == b["meta"]["t_env"]
    fb = flatten_arrays(b["arrays"])
    for k, v in flatten_arrays(a["arrays"]).items():
        np.testing.assert_array_equal(fb[k], v, err_msg=k)
