"""End-to-end training: algorithms × fake env, CLI runs, resume, crash safety, stop file, evaluate."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from train_runs import TINY, t_env_final, tiny_cfg  # tests/ is on sys.path under pytest

from marl.checkpoint import latest, load
from marl.config import load_config
from marl.trainer import Trainer, flatten_arrays

ROOT = Path(__file__).resolve().parents[1]


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]


def _scalar(run_dir: Path, key: str) -> list[tuple[int, float]]:
    return [(r["t"], r["value"]) for r in _records(run_dir) if r.get("key") == key]


@pytest.mark.parametrize("alg", ["qmix", "vdn", "iql"])
def test_value_decomposition_algs_train_on_fake_env(tmp_path, alg):
    cfg = tiny_cfg(tmp_path, alg, ("run_name=r", "log.histogram_interval=100"))
    run_dir = Trainer(cfg).run()
    hists = [r for r in _records(run_dir) if r.get("key") == "q_taken" and "hist" in r]
    assert hists and hists[0]["hist"]["n"] > 0  # the Q-value histograms reach the log (and MindInsight)
    losses = [v for _, v in _scalar(run_dir, "loss")]
    assert losses and all(np.isfinite(losses))
    assert _scalar(run_dir, "test_win_rate"), "no greedy test phase was logged"
    t_last = max(t for t, _ in _scalar(run_dir, "episode"))
    assert t_last >= 300
    ckpt = latest(run_dir)
    assert ckpt is not None and (run_dir / "models" / "best").is_dir()
    assert (run_dir / "curves.png").stat().st_size > 1000
    assert load(ckpt)["meta"]["config"]["mixer"]["name"] == {"qmix": "qmix", "vdn": "vdn", "iql": "none"}[alg]
    lineage = [r for r in _records(run_dir) if r.get("key") == "lineage"]  # MindInsight's run comparison
    assert len(lineage) == 1 and lineage[0]["network"] == alg and lineage[0]["t"] == t_env_final(run_dir)
    assert lineage[0]["hparams"]["lr"] == cfg.learner.lr and lineage[0]["hparams"]["map"] == cfg.env.map_name
    assert lineage[0]["metrics"]["test_win_rate"] == _scalar(run_dir, "test_win_rate")[-1][1]


@pytest.mark.slow
def test_resume_continues_counters_and_weights(tmp_path):
    cfg = tiny_cfg(tmp_path, "qmix", ("run_name=r",))
    first = Trainer(cfg)
    run_dir = first.run()
    saved = load(latest(run_dir))
    meta = saved["meta"]
    assert meta["t_env"] >= 400 and meta["train_steps"] > 0

    cfg2 = load_config(base=meta["config"], overrides=["t_max=700"])
    second = Trainer(cfg2, resume=run_dir)
    # everything a resumed run starts from equals the checkpoint
    assert (second.t_env, second.episode, second.train_steps) == (
        meta["t_env"],
        meta["episode"],
        meta["train_steps"],
    )
    restored = second.learner.state_dict()
    for k, v in flatten_arrays(saved["arrays"]).items():
        np.testing.assert_array_equal(restored[k], v, err_msg=k)
    assert second.controller.rng.bit_generator.state == saved["rng"]["controller"]
    second.run()
    resumed = load(latest(run_dir))["meta"]
    assert resumed["t_env"] >= 700 and resumed["episode"] > meta["episode"]
    assert resumed["train_steps"] > meta["train_steps"]
    # one log for the whole run, with env steps increasing across the resume
    ts = [t for t, _ in _scalar(run_dir, "episode")]
    assert ts == sorted(ts) and ts[-1] > meta["t_env"]


def test_crash_keeps_last_checkpoint(tmp_path, monkeypatch):
    cfg = tiny_cfg(tmp_path, "vdn", ("run_name=r", "t_max=100000", "checkpoint.save_interval=100"))
    trainer = Trainer(cfg)
    real_train, calls = trainer.learner.train, []

    def flaky(batch, t_env, episode):
        calls.append(t_env)
        if len(calls) == 12:
            raise RuntimeError("simulated crash in the learner")
        return real_train(batch, t_env, episode)

    monkeypatch.setattr(trainer.learner, "train", flaky)
    with pytest.raises(RuntimeError, match="simulated crash"):
        trainer.run()
    ckpt = latest(trainer.run_dir)
    assert ckpt is not None
    payload = load(ckpt)  # loads cleanly: no partial write
    assert 0 < payload["meta"]["t_env"] <= calls[-1]
    assert not list((trainer.run_dir / "models").glob("*.tmp*"))


def test_stop_file_ends_run_with_checkpoint(tmp_path):
    cfg = tiny_cfg(tmp_path, "qmix", ("run_name=r", "t_max=1000000"))
    trainer = Trainer(cfg)
    (trainer.run_dir / "stop").touch()
    trainer.run()
    payload = load(latest(trainer.run_dir))
    assert payload["meta"]["t_env"] < 1000  # stopped after the first rollout, not at t_max


def _cli(*args: str, timeout: int = 400) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
def test_cli_train_then_evaluate(tmp_path):
    out = _cli("scripts/train_qmix.py", "--env", "fake", *TINY, f"results_dir={tmp_path}", "run_name=cli")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "%" in out.stdout and "ETA" in out.stdout  # the progress line
    run_dir = tmp_path / "cli"
    assert (run_dir / "config.yaml").exists() and (run_dir / "curves.png").exists()
    ev = _cli("scripts/evaluate.py", "--checkpoint", str(run_dir), "--episodes", "6", "--envs", "3")
    assert ev.returncode == 0, ev.stderr[-2000:]
    result = json.loads(ev.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    assert result["episodes"] == 6 and 1 <= result["ep_length_mean"] <= 10  # the fake env's limit is 10
    assert abs(result["win_rate"] * 6 - round(result["win_rate"] * 6)) < 1e-9  # a count out of 6 episodes


def test_cli_rejects_bad_input(tmp_path):
    bad_key = _cli("scripts/train_qmix.py", "--env", "fake", "learner.lrr=1", f"results_dir={tmp_path}")
    assert bad_key.returncode != 0 and "learner.lr" in (bad_key.stderr + bad_key.stdout)
    bad_map = _cli("scripts/train_qmix.py", "--map", "3n", "t_max=10", f"results_dir={tmp_path}")
    assert bad_map.returncode != 0 and "3m" in (bad_map.stderr + bad_map.stdout)


@pytest.mark.slow
def test_cli_smoke_on_embedded_3m(tmp_path):
    """The real path: SMAC 3m on the embedded engine, jitted QMIX at T = 61 (one compile: all slots, one
    group; length buckets and groups would compile four graphs, 18 of a 31 s run)."""
    out = _cli(
        "scripts/train_qmix.py",
        "--map",
        "3m",
        "t_max=600",
        "learner.batch_size=4",
        "learner.buffer_size=16",
        "learner.time_bucket=0",
        "learner.length_groups=1",
        "runner.batch_size_run=4",
        "log.test_interval=300",
        "log.test_nepisode=4",
        "log.log_interval=200",
        f"results_dir={tmp_path}",
        "run_name=sm",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run_dir = tmp_path / "sm"
    assert _scalar(run_dir, "loss") and _scalar(run_dir, "test_win_rate")
    assert load(latest(run_dir))["meta"]["env_info"]["obs_shape"] == 30
    from marl.envs.smac import ENGINE_VERSION
    from marl.provenance import engine_label, read_provenance

    engine = read_provenance(run_dir)[0]["engine"]  # the engine and resolved backend, on the start line too
    assert engine["engine_version"] == ENGINE_VERSION and engine["backend"] in ("sim", "sc2")
    assert f"engine: {engine_label(engine)}  env info:" in out.stdout
    from marl.cli import evaluate_main

    assert evaluate_main(["--checkpoint", str(run_dir), "--episodes", "2", "--envs", "1"])["engine"] == engine


def test_checkpoints_export_the_agent_as_a_mindspore_ckpt(tmp_path):
    from marl.controllers.mac import input_dim
    from marl.registry import build
    from marl.utils.ms import ms, params_to_numpy

    cfg = tiny_cfg(tmp_path, "qmix", ("run_name=r",))
    trainer = Trainer(cfg)
    run_dir = trainer.run()
    folder = latest(run_dir)
    a = cfg.agent
    fresh = build(
        "agent",
        a.name,
        input_dim=input_dim(trainer.info, a),
        hidden_dim=a.hidden_dim,
        n_actions=trainer.info.n_actions,
    )
    untrained = params_to_numpy(fresh)
    loaded = ms.load_checkpoint(str(folder / "agent.ckpt"), net=fresh, strict_load=True)
    assert sorted(loaded) == sorted(untrained)  # every parameter of the network came from the file
    saved = flatten_arrays(load(folder)["arrays"])  # the learner state: nets/agent.<param>
    for name, value in params_to_numpy(fresh).items():
        np.testing.assert_array_equal(value, saved[f"nets/agent.{name}"])
        assert not np.array_equal(value, untrained[name]) or value.std() == 0
    assert (run_dir / "models" / "best" / "agent.ckpt").is_file()


@pytest.mark.parametrize(("interval_s", "during_run"), [(0.0, "every test"), (3600.0, "first test only")])
def test_curves_png_redrawn_at_most_every_plot_interval(tmp_path, monkeypatch, interval_s, during_run):
    from marl.logging import Logger

    drawn: list[int] = []
    real_plot = Logger.plot
    monkeypatch.setattr(Logger, "plot", lambda self: drawn.append(1) or real_plot(self))
    cfg = tiny_cfg(
        tmp_path, "qmix", ("run_name=r", "log.test_interval=100", f"log.plot_interval_s={interval_s}")
    )
    run_dir = Trainer(cfg).run()
    n_tests = len(_scalar(run_dir, "test_win_rate"))
    assert n_tests >= 3
    # one drawing at the end of the run, plus those at the test phases
    assert len(drawn) - 1 == (n_tests if during_run == "every test" else 1)
    assert (run_dir / "curves.png").stat().st_size > 1000


def test_a_buffer_that_would_outgrow_the_memory_stops_the_run_at_the_first_update(tmp_path, monkeypatch):
    """The check at the first update: measured memory says the rest of the buffer cannot fit, so the run
    stops there (exit code 1, no checkpoint written) with sizes that fit; memory_check=false runs on."""
    import marl.trainer as trainer_mod
    from marl.signals import RunStopped

    per_episode = Trainer(tiny_cfg(tmp_path / "probe")).scheme.bytes_per_episode()
    # after the first update only 10 episodes' worth of memory is left (the buffer holds 32)
    monkeypatch.setattr(trainer_mod, "available_memory", lambda: 10 * per_episode)
    cfg = tiny_cfg(tmp_path, extra=("run_name=short",))
    with pytest.raises(RunStopped) as stop:
        Trainer(cfg).run()
    assert stop.value.exit_code == 1
    msg = str(stop.value)
    assert "would outgrow the memory" in msg and "learner.buffer_size=" in msg
    stopped_at = int(re.search(r"stopped at t_env=(\d+)", msg).group(1))
    saved = latest(tmp_path / "short")  # no checkpoint written at the stop (an earlier test phase may save)
    assert saved is None or t_env_final(tmp_path / "short") < stopped_at
    cfg = tiny_cfg(tmp_path, extra=("run_name=regardless", "learner.memory_check=false"))
    assert t_env_final(Trainer(cfg).run()) >= 400


def test_an_on_policy_update_that_would_outgrow_the_memory_stops_the_run_at_the_first_update(
    tmp_path, monkeypatch
):
    """MAPPO has no replay buffer, but its update grows with the episodes' length: the first update's peak
    memory, scaled to full-length episodes, is checked against the memory available, and the stop names a
    learner.batch_size that fits."""
    import marl.learners.base as base
    import marl.trainer as trainer_mod
    from marl.signals import RunStopped

    tiny = [o for o in TINY if not o.startswith("mixer.")]
    cfg = load_config("mappo", env="fake", overrides=[*tiny, f"results_dir={tmp_path}", "run_name=onp"])
    gib = 2**30
    # the first update peaked 1.5 GiB above the memory before it and kept 1 GiB of it
    monkeypatch.setattr(trainer_mod, "reset_peak_rss", lambda: 10 * gib)
    monkeypatch.setattr(trainer_mod, "peak_rss", lambda: int(11.5 * gib))
    monkeypatch.setattr(trainer_mod, "process_rss", lambda: 11 * gib)
    monkeypatch.setattr(trainer_mod, "available_memory", lambda: gib)
    trainer = Trainer(cfg)
    full, half = trainer.scheme.max_seq_length, trainer.scheme.max_seq_length // 2  # episodes half as long
    for mod, name in ((trainer_mod, "step_footprint"), (base, "step_footprint"), (base, "held_footprint")):
        monkeypatch.setattr(mod, name, lambda learner, batch: batch.batch_size * half)
    growth = int(1.5 * gib * full / half) - gib  # the full-length peak, beyond the 1 GiB kept now
    with pytest.raises(RunStopped) as stop:
        trainer.run()
    msg = str(stop.value)
    assert stop.value.exit_code == 1 and trainer.on_policy
    assert "the learner's update would outgrow the memory" in msg
    assert f"needs about {growth / 2**30:.1f} GiB more" in msg
    assert f"learner.batch_size={8 * int(0.8 * 2**30) // growth} or less" in msg  # 8 episodes x what fits
