"""The Ray runner on a real local Ray cluster (loopback, 2 CPUs): same episodes as the local runner under
the same seeds, and a worker killed mid-run costs a replay of the batch, never data."""

import os

import numpy as np
import pytest

# Ray reads this when imported: with it off, a local Ray uses the loopback address for its node.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")

# one local Ray cluster at a time: under `pytest -n` these tests share one worker with test_sweep's
pytestmark = pytest.mark.xdist_group("ray")

from marl import registry  # noqa: E402
from marl.buffers import ReplayBuffer, Scheme  # noqa: E402
from marl.config import load_config  # noqa: E402
from marl.config.schema import AgentConfig, ExplorationConfig, RayConfig  # noqa: E402
from marl.controllers import MultiAgentController  # noqa: E402
from marl.envs.fake import FakeSmacEnv  # noqa: E402
from marl.envs.ray_vector import split_rows  # noqa: E402
from marl.runners import ParallelRunner  # noqa: E402
from marl.runners.episode_runner import _Bound  # noqa: E402
from marl.runners.ray_runner import RayRunner, make_ray_runner  # noqa: E402
from marl.trainer import EnvFactory  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """A fresh local Ray on 127.0.0.1 for this module, stopped afterwards."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        logging_level="WARNING",
    )
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield
    ray.shutdown()


def EnvFn(**kw):
    """Picklable env factory (the trainer's): env ``row`` of the fake env seeded ``10_000 + row``."""
    return EnvFactory("fake", "fake", "sim", kw, seed=1, offset=0)


@pytest.fixture(scope="module")
def weights():
    info = FakeSmacEnv().env_info()
    return MultiAgentController(info, AgentConfig(hidden_dim=8), ExplorationConfig(), seed=0)._weights


def _controller(weights, seed=7):
    info = FakeSmacEnv().env_info()
    expl = ExplorationConfig(epsilon_start=0.5, epsilon_finish=0.5, epsilon_anneal_time=100)
    return MultiAgentController(info, AgentConfig(hidden_dim=8), expl, seed=seed, weights=weights)


def _scheme():
    return Scheme(FakeSmacEnv().env_info())


def test_split_rows():
    assert [list(s) for s in split_rows(5, 2)] == [[0, 1, 2], [3, 4]]
    assert [list(s) for s in split_rows(3, 3)] == [[0], [1], [2]]
    with pytest.raises(ValueError, match="num_workers"):
        split_rows(2, 3)


def test_same_episodes_as_local_runner(cluster, weights):
    n = 5  # over 2 workers: rows 0-2 in one actor, 3-4 in the other
    fns = [_Bound(EnvFn(), i) for i in range(n)]
    local = ParallelRunner(fns, _scheme(), _controller(weights))
    remote = RayRunner(fns, _scheme(), _controller(weights), RayConfig(num_workers=2))
    try:
        assert remote.venv.n_workers == 2 and len(set(remote.venv.pids())) == 2
        for t_env, test_mode in ((0, False), (50, False), (100, True)):
            b_local, s_local = local.run(t_env, test_mode)
            b_ray, s_ray = remote.run(t_env, test_mode)
            assert s_ray == s_local
            for key in b_local.data:
                np.testing.assert_array_equal(b_ray[key], b_local[key], err_msg=key)
        assert remote.env_stats() == local.env_stats()
        assert remote.call(4, "get_stats") == local.call(4, "get_stats")
        assert remote.replayed_batches == 0
    finally:
        local.close()
        remote.close()
    assert ray.is_initialized()  # the runner did not start Ray here, so it must not stop it


class KillingController:
    """Wraps a controller; at its ``at``-th action selection (every ``at``-th with ``repeat``) it kills
    Ray worker 0, which Ray may restart."""

    def __init__(self, inner, at, repeat=False):
        self.inner, self.at, self.repeat, self.calls, self.runner = inner, at, repeat, 0, None

    def init_hidden(self, batch_size):
        self.inner.init_hidden(batch_size)

    def select_actions(self, obs, avail, t_env, test_mode, rows=None):
        self.calls += 1
        if self.calls == self.at or (self.repeat and self.calls % self.at == 0):
            ray.kill(self.runner.venv.actors[0], no_restart=False)
        return self.inner.select_actions(obs, avail, t_env, test_mode, rows=rows)


def _check_batch(batch, stats, n):
    lengths = batch.episode_lengths()
    assert len(stats.lengths) == n and sorted(lengths.tolist()) == sorted(stats.lengths)
    for b, length in enumerate(lengths):
        assert length >= 1
        assert batch["filled"][b, : length + 1, 0].all() and not batch["filled"][b, length + 1 :, 0].any()
    np.testing.assert_allclose(sorted(batch["reward"][:, :, 0].sum(1)), sorted(stats.returns), rtol=1e-6)


def test_killed_worker_is_restarted_and_no_data_is_lost(cluster, weights):
    n = 4
    ctrl = KillingController(_controller(weights), at=10**9)
    env_fn = EnvFn(enemy_hit_prob=0.0, enemy_hp=1000, episode_limit=8)  # every episode lasts 8 steps
    cfg = RayConfig(num_workers=2)
    runner = make_ray_runner(env_fn, _scheme_for(env_fn), ctrl, batch_size_run=n, ray_cfg=cfg)
    ctrl.runner = runner
    buffer = ReplayBuffer(runner.scheme, capacity=32, verbose=False)
    try:
        pids = runner.venv.pids()
        batch, stats = runner.run(0)
        _check_batch(batch, stats, n)
        buffer.insert(batch)
        before = {k: v[:n].copy() for k, v in buffer.storage.data.items()}
        ctrl.calls, ctrl.at = 0, 3  # kill worker 0 at the third step of the second batch
        batch2, stats2 = runner.run(8)
        assert runner.replayed_batches == 1 and runner.venv.failures == 1
        _check_batch(batch2, stats2, n)
        assert stats2.lengths == [8] * n  # whole episodes, replayed from reset, not a resumed fragment
        buffer.insert(batch2)
        assert buffer.size == 2 * n
        for k, v in before.items():
            np.testing.assert_array_equal(buffer.storage.data[k][:n], v, err_msg=k)
        for k in batch2.data:
            np.testing.assert_array_equal(buffer.storage.data[k][n : 2 * n], batch2[k], err_msg=k)
        new_pids = runner.venv.pids()
        assert new_pids[0] != pids[0] and new_pids[1] == pids[1]  # worker 0 restarted, worker 1 untouched
        batch3, stats3 = runner.run(16)  # and the runner goes on normally
        _check_batch(batch3, stats3, n)
        assert runner.replayed_batches == 1
    finally:
        runner.close()


def _scheme_for(env_fn):
    return Scheme(env_fn(0).env_info())


def test_fails_clearly_when_the_worker_cannot_come_back(cluster, weights):
    ctrl = KillingController(_controller(weights), at=2)
    cfg = RayConfig(num_workers=2, max_restarts=0, max_episode_retries=1)
    runner = make_ray_runner(EnvFn(), _scheme(), ctrl, batch_size_run=2, ray_cfg=cfg)
    ctrl.runner = runner
    try:
        with pytest.raises(RuntimeError, match="worker 0 is dead for good"):
            runner.run(0)
    finally:
        runner.close()
    # restarts allowed, but the worker dies again in every replay: give up after max_episode_retries
    ctrl = KillingController(_controller(weights), at=2, repeat=True)
    cfg = RayConfig(num_workers=2, max_restarts=5, max_episode_retries=1)
    runner = make_ray_runner(EnvFn(), _scheme(), ctrl, batch_size_run=2, ray_cfg=cfg)
    ctrl.runner = runner
    try:
        with pytest.raises(RuntimeError, match="gave up after 1 replays"):
            runner.run(0)
        assert runner.replayed_batches == 1
    finally:
        runner.close()


def test_registry_and_config(cluster, weights):
    overrides = ["runner.name=ray", "ray.num_workers=1", "batch_size_run=3"]
    cfg = load_config("qmix", env="fake", overrides=overrides)
    assert cfg.ray == RayConfig(num_workers=1)
    # what the Trainer does: the factory reads runner.batch_size_run and the ray section from the config
    runner = registry.build(
        "runner", "ray", env_fn=EnvFn(), scheme=_scheme(), controller=_controller(weights), cfg=cfg
    )
    try:
        assert runner.venv.n_workers == 1 and runner.n_envs == 3
        batch, stats = runner.run(0)
        _check_batch(batch, stats, 3)
    finally:
        runner.close()
