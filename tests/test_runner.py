"""Runner and vector envs on the fake env: padding, masks, time-limit handling, subprocess parity."""

import numpy as np
import pytest

from marl import registry
from marl.buffers import Scheme
from marl.envs.fake import FakeSmacEnv
from marl.runners import ParallelRunner


class FirstAvailableController:
    """Test double: picks the highest available action of each agent (deterministic)."""

    def __init__(self):
        self.calls = []

    def init_hidden(self, batch_size):
        self.batch_size = batch_size

    def select_actions(self, obs_BNO, avail_BNA, t_env, test_mode, rows=None):
        self.calls.append(None if rows is None else rows.copy())
        return (avail_BNA.shape[-1] - 1 - np.argmax(avail_BNA[..., ::-1], axis=-1)).astype(np.int64)


def _env_fn(seed_base=0, **kw):
    return lambda row: FakeSmacEnv(seed=seed_base + row, **kw)


def _fns(n, **kw):
    fn = _env_fn(**kw)
    return [lambda r=r: fn(r) for r in range(n)]


def test_episode_padding_masks_and_returns():
    env = FakeSmacEnv(seed=0)
    scheme = Scheme(env.env_info())
    runner = ParallelRunner(_fns(4), scheme, FirstAvailableController())
    batch, stats = runner.run(t_env=0)
    lengths = batch.episode_lengths()
    assert sorted(lengths.tolist()) == sorted(stats.lengths)
    for b, length in enumerate(lengths):
        filled = batch["filled"][b, :, 0]
        assert filled[: length + 1].all() and not filled[length + 1 :].any()
        term = batch["terminated"][b, :, 0]
        assert not term[: length - 1].any()
        # actions taken were available when taken; no action after the episode
        taken = batch["actions"][b, :length, :, 0]
        avail = batch["avail_actions"][b, :length]
        assert np.take_along_axis(avail, taken[..., None], -1).all()
        assert not batch["actions_onehot"][b, length:].any()
    np.testing.assert_allclose(sorted(batch["reward"][:, :, 0].sum(1)), sorted(stats.returns), rtol=1e-6)
    runner.close()


def test_time_limit_is_not_terminal_but_task_end_is():
    # hit probability 0 and 1 hp of damage needed per enemy step: focus-fire wins quickly -> terminated=1
    fns = _fns(2, enemy_hit_prob=0.0, enemy_hp=1, episode_limit=10)
    scheme = Scheme(fns[0]().env_info())
    batch, stats = ParallelRunner(fns, scheme, FirstAvailableController()).run(0)
    assert all(stats.won)
    for b, length in enumerate(batch.episode_lengths()):
        assert batch["terminated"][b, length - 1, 0] == 1.0
    # SMAC's default: a timeout is stored as terminated
    fns = _fns(2, enemy_hit_prob=0.0, enemy_hp=1000, episode_limit=6)
    batch, stats = ParallelRunner(fns, Scheme(fns[0]().env_info()), FirstAvailableController()).run(0)
    assert stats.lengths == [6, 6] and not any(stats.won)
    assert batch["terminated"][:, 5, 0].tolist() == [1.0, 1.0]
    assert batch["filled"][:, :, 0].sum(1).tolist() == [7, 7]
    # continuing_episode: the env flags the cut, and it is stored as not terminated (the learner bootstraps)
    fns = _fns(2, enemy_hit_prob=0.0, enemy_hp=1000, episode_limit=6, continuing_episode=True)
    batch, stats = ParallelRunner(fns, Scheme(fns[0]().env_info()), FirstAvailableController()).run(0)
    assert stats.lengths == [6, 6] and not batch["terminated"].any()


class NeverEnds(FakeSmacEnv):
    """Reports an episode limit but never ends by itself (like many Gym-style envs)."""

    def step(self, actions):
        reward, _, info = super().step(actions)
        return reward, False, info


def test_runner_cuts_envs_that_never_end_at_the_limit():
    fns = [
        lambda r=r: NeverEnds(seed=r, enemy_hit_prob=0.0, enemy_hp=1000, episode_limit=5) for r in range(2)
    ]
    batch, stats = ParallelRunner(fns, Scheme(fns[0]().env_info()), FirstAvailableController()).run(0)
    assert stats.lengths == [5, 5] and not batch["terminated"].any()


def test_finished_envs_leave_the_step_loop():
    fns = _fns(3, enemy_hit_prob=0.5)
    ctrl = FirstAvailableController()
    _, stats = ParallelRunner(fns, Scheme(fns[0]().env_info()), ctrl).run(0)
    sizes = [len(r) for r in ctrl.calls]
    assert sizes[0] == 3 and sizes == sorted(sizes, reverse=True)
    assert len(ctrl.calls) == max(stats.lengths)


def _seeded_fake(row):
    return FakeSmacEnv(seed=7 + row)


def test_subprocess_runner_matches_in_process():
    fn = _seeded_fake  # module-level: picklable for the worker processes
    scheme = Scheme(fn(0).env_info())
    sync = registry.build(
        "runner",
        "parallel",
        env_fn=fn,
        scheme=scheme,
        controller=FirstAvailableController(),
        batch_size_run=3,
    )
    sub = registry.build(
        "runner",
        "parallel",
        env_fn=fn,
        scheme=scheme,
        controller=FirstAvailableController(),
        batch_size_run=3,
        subprocess=True,
    )
    try:
        for _ in range(2):
            b1, s1 = sync.run(0)
            b2, s2 = sub.run(0)
            for k in b1.data:
                np.testing.assert_array_equal(b1[k], b2[k], err_msg=k)
            assert s1 == s2
        assert sub.env_stats() == sync.env_stats()
    finally:
        sync.close()
        sub.close()


def test_runner_registry_errors():
    scheme = Scheme(FakeSmacEnv().env_info())
    with pytest.raises(ValueError, match="batch_size_run"):
        registry.build(
            "runner", "parallel", env_fn=_env_fn(), scheme=scheme, controller=None, batch_size_run=0
        )
    with pytest.raises(ValueError, match="use 'parallel'"):
        registry.build(
            "runner", "episode", env_fn=_env_fn(), scheme=scheme, controller=None, batch_size_run=4
        )
    with pytest.raises(KeyError, match="Known: episode, parallel"):
        registry.get("runner", "paralel")


def test_fake_env_rejects_unavailable_action():
    env = FakeSmacEnv(n_agents=2, seed=0)
    with pytest.raises(ValueError, match="agent 0: action 0 is not available"):
        env.step([0, 1])
