"""The evaluator pieces of the shared Trainer, checked for the baselines: periodic tests, best model,
learning-curve PNG, the ``stop`` file (checkpoint on disk) and save -> load giving the same greedy actions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marl import registry
from marl.checkpoint import best, latest, load
from marl.config import load_config
from marl.trainer import Trainer, flatten_arrays
from marl.utils.ms import setup

setup(1, seed=0)

CASES = {  # alg, env, map, overrides that keep the run small
    "dqn": (
        "dqn",
        "fake",
        "fake",
        [
            "learner.batch_size=4",
            "learner.transition_batch_size=16",
            "agent.hidden_dim=16",
            "agent.obs_last_action=true",
            "agent.obs_agent_id=true",
        ],
    ),
    "ddpg": (
        "ddpg",
        "gym",
        "Pendulum-v1",
        [
            "learner.batch_size=2",
            "learner.transition_batch_size=16",
            "learner.updates_per_step=0.05",
            "agent.hidden_dim=16",
            "learner.critic_hidden_dim=16",
        ],
    ),
    "maddpg": (
        "maddpg",
        "fake",
        "fake",
        ["learner.batch_size=4", "learner.transition_batch_size=16", "runner.batch_size_run=2"],
    ),
}


def _cfg(tmp_path, case: str, t_max: int, extra: list[str] = ()):  # noqa: ANN001, ANN202
    alg, env, map_name, over = CASES[case]
    return load_config(
        alg,
        env=env,
        map_name=map_name,
        overrides=[
            f"t_max={t_max}",
            "log.test_interval=300",
            "log.log_interval=300",
            "log.test_nepisode=2",
            "log.mindinsight=false",
            f"results_dir={tmp_path}",
            f"run_name={case}",
            "checkpoint.save_interval=0",
            *over,
            *extra,
        ],
    )


def _greedy(controller, info, obs):  # noqa: ANN001, ANN202
    controller.init_hidden(obs.shape[0])
    avail = np.ones((obs.shape[0], info.n_agents, info.n_actions), np.int32)
    return controller.select_actions(obs, avail, t_env=10**9, test_mode=True)


@pytest.mark.parametrize("case", ["dqn", "ddpg", "maddpg"])
def test_save_load_same_greedy_actions_best_model_and_curves(tmp_path, case: str):
    trainer = Trainer(_cfg(tmp_path, case, 700))
    run_dir = trainer.run()
    assert trainer.learner.grad_steps > 0
    records = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    tests = [r for r in records if r["key"] == "test_return_mean"]
    assert len(tests) >= 2  # periodic evaluation episodes
    assert best(run_dir) is not None and (run_dir / "curves.png").stat().st_size > 1000
    payload = load(latest(run_dir))
    cfg, info = trainer.cfg, trainer.info
    fresh = registry.build("learner", cfg.learner.name, info=info, cfg=cfg)
    obs = np.random.default_rng(0).normal(size=(16, info.n_agents, info.obs_shape)).astype(np.float32)
    before = _greedy(fresh.make_controller(seed=1), info, obs)
    fresh.load_state_dict(flatten_arrays(payload["arrays"]))
    for k, v in trainer.learner.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[k], v, err_msg=k)
    loaded = _greedy(fresh.make_controller(seed=2), info, obs)
    np.testing.assert_array_equal(loaded, _greedy(trainer.controller, info, obs))
    if case == "ddpg":  # continuous actions: a fresh net acts differently from the trained one
        assert not np.allclose(before, loaded)


def test_stop_file_ends_the_run_with_a_checkpoint(tmp_path):
    trainer = Trainer(_cfg(tmp_path, "dqn", 100_000))
    (trainer.run_dir / "stop").touch()
    run_dir = trainer.run()
    assert trainer.t_env < 100_000
    ckpt = latest(run_dir)
    assert ckpt is not None and load(ckpt)["meta"]["t_env"] == trainer.t_env
