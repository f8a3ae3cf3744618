"""Training-run helpers (tests/ is on ``sys.path`` under pytest): the tiny fake-env run settings shared by the
trainer, fault and overlap tests, and run folders written in the trainer's format for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

from marl.checkpoint import latest, load, periodic
from marl.config import dump_config, load_config
from marl.logging import Logger
from marl.report.runs import ABSOLUTE_FILE

# ------------------------------------------------ tiny fake-env runs (test_train_integration.py)
TINY = [
    "t_max=400",
    "learner.batch_size=8",
    "learner.buffer_size=32",
    "runner.batch_size_run=2",
    "log.log_interval=100",
    "log.test_interval=200",
    "log.test_nepisode=2",
    "checkpoint.save_interval=200",
    "agent.hidden_dim=16",
    "mixer.embed_dim=8",
    "mixer.hypernet_dim=16",
    # eager learner steps: a tiny run's compile cost more than its training (3.3 of 5 s); the tests whose
    # subject is the compiled path add learner.use_jit=true (CLI_TINY below, the exact-resume test)
    "learner.use_jit=false",
]


def tiny_cfg(tmp_path: Path, alg: str = "qmix", extra: tuple[str, ...] = ()) -> object:
    return load_config(alg, env="fake", overrides=[*TINY, f"results_dir={tmp_path}", *extra])


def t_env_final(run_dir: Path) -> int:
    return int(load(latest(run_dir))["meta"]["t_env"])


# the integration tests' tiny fake-env run (without its t_max), saving more often and keeping more checkpoints
FAULTS_TINY = [
    *(o for o in TINY if not o.startswith("t_max=")),
    "checkpoint.save_interval=100",
    "checkpoint.keep_last=5",
]
# the same run as command-line arguments, its learner step compiled (test_faults_cli.py: signals that land
# while MindSpore runs a graph; test_untrusted_input.py)
CLI_TINY = ["--env", "fake", *FAULTS_TINY, "log.log_interval=50", "learner.use_jit=true"]


def train_checkpointed_run(out: Path) -> Path:
    """A tiny fake-env QMIX run in ``out``, three or more periodic checkpoints (the ``trained`` fixture)."""
    from marl.trainer import Trainer  # MindSpore: imported only by the tests that train

    overrides = [*FAULTS_TINY, f"results_dir={out}", "run_name=r", "t_max=300"]
    cfg = load_config("qmix", env="fake", overrides=overrides)
    run_dir = Trainer(cfg).run()
    assert len(periodic(run_dir)) >= 3
    return run_dir


# ------------------------------------------------ run folders for the report (test_report.py)
def fake_run(root, alg, task, seed, curve, absolute=None, env="fake"):
    """A run folder as the trainer leaves it: config.yaml, and log.jsonl with test phases at ``curve``."""
    cfg = load_config(alg, env=env, map_name=task, overrides=[f"seed={seed}", "test_nepisode=4"])
    run_dir = root / f"{alg}_{task}_seed{seed}"
    log = Logger(run_dir, cfg, t_max=curve[-1][0], console=False, mindinsight=False)
    dump_config(cfg, run_dir)
    for i, (t, win) in enumerate(curve):
        log.log("return_mean", 1.0, t)  # a training scalar between test phases
        for key, value in (("test_return_mean", 10 * win), ("test_win_rate", win), ("time_s", 2.0 * i)):
            log.log(key, value, t)
    log.close(plot=False)
    if absolute is not None:
        (run_dir / ABSOLUTE_FILE).write_text(
            json.dumps({"episodes": 40, "win_rate": absolute, "return_mean": 10 * absolute}), encoding="utf-8"
        )
    return run_dir


FINALS = [0.0, 0.5, 0.7, 1.0]  # IQM of 4 drops one run at each end: (0.5 + 0.7) / 2 = 0.6; mean 0.55
REACHED = [None, 100, 200, 300]  # seed 0 never reaches 0.95 in its 400 steps


def make_sweep(root):
    """Seven run folders in ``root``: QMIX on m1 with the ``FINALS`` / ``REACHED`` seeds, VDN with three."""
    for seed, (final, at) in enumerate(zip(FINALS, REACHED, strict=True)):
        curve = [(0, 0.0), (at, 0.96) if at else (200, 0.5), (400, final)]
        fake_run(root, "qmix", "m1", seed, curve, absolute=final)
    for seed, final in enumerate([0.2, 0.6, 0.9]):
        fake_run(root, "vdn", "m1", seed, [(0, 0.0), (200, 0.1), (400, final)], absolute=final)
    return root
