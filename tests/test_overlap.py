"""Acting beside learning (``runner.overlap``): the two really run at once, the acting policy never changes
mid-batch, the schedule is fixed (a seed gives one run), and on-policy learners never overlap."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from train_runs import TINY  # tests/ is on sys.path under pytest

from marl.config import load_config
from marl.runners.overlap import run_beside
from marl.trainer import Trainer


def test_run_beside_runs_both_at_once_and_returns_both():
    started = threading.Event()

    def act() -> str:
        started.set()
        time.sleep(0.05)
        return "episodes"

    def work() -> bool:
        return started.wait(timeout=10)  # only true when act runs while work does

    assert run_beside(act, work) == ("episodes", True)


def test_run_beside_waits_for_the_thread_when_work_fails_and_reraises_act_errors():
    finished = threading.Event()

    def slow_act() -> None:
        time.sleep(0.2)
        finished.set()

    def failing_work() -> None:
        raise ValueError("update failed")

    with pytest.raises(ValueError, match="update failed"):
        run_beside(slow_act, failing_work)
    assert finished.is_set()  # nothing still steps the envs once the error reaches the caller

    def failing_act() -> None:
        raise RuntimeError("env died")

    with pytest.raises(RuntimeError, match="env died"):
        run_beside(failing_act, lambda: 1)


def _trainer(tmp_path: Path, name: str, *extra: str, alg: str = "qmix") -> Trainer:
    tiny = [o for o in TINY if alg == "qmix" or not o.startswith("mixer.")]
    # the compiled learner step, as a run has it by default: updates overlap acting while a graph runs
    overrides = [*tiny, "learner.use_jit=true", f"results_dir={tmp_path}", f"run_name={name}", *extra]
    return Trainer(load_config(alg, env="fake", overrides=overrides))


def _instrument(trainer: Trainer, wait_s: float) -> list[bool]:
    """Each train call records whether an acting batch was in flight; each acting batch asserts that no new
    weights reached the controller between its first step and its last. An acting batch of a round that
    trains (the buffer can be sampled) waits up to ``wait_s`` for the update to start, so that a tiny
    batch cannot finish before the update begins; an update waits as long for an acting batch (the first
    one 0.5 s at most: it waited out the whole ``wait_s``, 5 s, in every run)."""
    acting, training, seen, loads = threading.Event(), threading.Event(), [], [0]
    run, train, load = trainer.runner.run, trainer.learner.train, trainer.controller.load_weights
    n = trainer.cfg.learner.batch_size

    def watched_run(t_env: int, test_mode: bool = False):
        before = loads[0]
        acting.set()
        if not test_mode and trainer.buffer.can_sample(n):
            training.wait(timeout=wait_s)
        try:
            return run(t_env, test_mode)
        finally:
            acting.clear()
            assert loads[0] == before, "the acting policy changed in the middle of a batch"

    def watched_train(*args, **kwargs):
        training.set()
        try:  # the first update has no acting beside it (its round filled the buffer): a short look only
            seen.append(acting.wait(timeout=wait_s if seen else min(wait_s, 0.5)))
            return train(*args, **kwargs)
        finally:
            training.clear()

    def counted_load(weights):
        loads[0] += 1
        return load(weights)

    trainer.runner.run, trainer.learner.train = watched_run, watched_train
    trainer.controller.load_weights = counted_load
    return seen


@pytest.mark.parametrize("overlap", [True, False])
def test_updates_run_while_the_next_episodes_are_played_only_with_overlap(tmp_path, overlap):
    trainer = _trainer(tmp_path, f"o{overlap}", f"runner.overlap={str(overlap).lower()}")
    seen = _instrument(trainer, wait_s=5.0 if overlap else 0.0)
    trainer.run()
    assert len(seen) >= 5
    if overlap:  # the first update comes in the round that filled the buffer enough; then every one overlaps
        assert seen[0] is False and all(seen[1:]), seen
    else:
        assert not any(seen), seen


def _losses(run_dir: Path) -> list[tuple[int, float]]:
    recs = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [(r["t"], r["value"]) for r in recs if r.get("key") == "loss" and "value" in r]


def test_an_overlapped_run_is_reproducible_and_differs_from_the_sequential_one(tmp_path):
    a = _trainer(tmp_path, "a", "runner.overlap=true").run()
    b = _trainer(tmp_path, "b", "runner.overlap=true").run()
    c = _trainer(tmp_path, "c").run()
    assert _losses(a) == _losses(b) and len(_losses(a)) >= 3
    assert _losses(a) != _losses(c)  # one update of policy lag: another (fixed) schedule


def test_on_policy_learners_never_overlap(tmp_path):
    trainer = _trainer(tmp_path, "m", "runner.overlap=true", alg="mappo")
    assert trainer.cfg.runner.overlap and not trainer.overlap
    trainer.runner.close()
    trainer.lock.release()
