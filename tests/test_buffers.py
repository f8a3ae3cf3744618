"""Scheme, EpisodeBatch and ReplayBuffer: shapes from EnvInfo, filling, wrap-around, sampling."""

from pathlib import Path

import numpy as np
import pytest

from marl.buffers import EpisodeBatch, ReplayBuffer, Scheme
from marl.envs.base import EnvInfo

INFO = EnvInfo(n_agents=3, n_actions=9, obs_shape=30, state_shape=48, episode_limit=60)


def test_scheme_sizes_come_from_env_info():
    scheme = Scheme(INFO)
    assert scheme.max_seq_length == 61
    assert scheme.fields["obs"].shape == (3, 30)
    assert scheme.fields["state"].shape == (48,)
    assert scheme.fields["avail_actions"].shape == (3, 9)
    assert scheme.fields["actions"].shape == (3, 1)
    assert scheme.fields["actions_onehot"].shape == (3, 9)
    batch = EpisodeBatch(scheme, 4)
    assert batch["obs"].shape == (4, 61, 3, 30)
    assert batch.nbytes() == 4 * scheme.bytes_per_episode()


def test_env_info_rejects_bad_sizes():
    with pytest.raises(ValueError, match="obs_shape"):
        EnvInfo(n_agents=3, n_actions=9, obs_shape=0, state_shape=48, episode_limit=60)
    info = EnvInfo.from_dict({**INFO.as_dict(), "unknown_extra": 1})
    assert info == INFO


def test_update_marks_filled_and_derives_onehot():
    batch = EpisodeBatch(Scheme(INFO), 2)
    batch.update({"actions": np.array([[1], [4], [8]])}, t=5, rows=np.array([1]))
    assert batch["filled"][1, 5, 0] == 1 and batch["filled"][0, 5, 0] == 0
    np.testing.assert_array_equal(batch["actions_onehot"][1, 5].argmax(-1), [1, 4, 8])
    assert batch["actions_onehot"][1, 5].sum() == 3
    with pytest.raises(KeyError, match="unknown episode field"):
        batch.update({"obz": np.zeros(1)}, t=0)


def _marked_batch(scheme, markers):
    batch = EpisodeBatch(scheme, len(markers))
    batch.data["reward"][:, 0, 0] = markers
    return batch


def test_replay_wraps_and_overwrites_oldest():
    scheme = Scheme(INFO)
    buf = ReplayBuffer(scheme, capacity=5, verbose=False)
    buf.insert(_marked_batch(scheme, [1, 2, 3]))
    assert (buf.size, buf.index) == (3, 3)
    buf.insert(_marked_batch(scheme, [4, 5, 6, 7]))
    assert (buf.size, buf.index, buf.episodes_in) == (5, 2, 7)
    # slots 0 and 1 now hold episodes 6 and 7; episodes 1 and 2 are gone
    np.testing.assert_array_equal(buf.storage["reward"][:, 0, 0], [6, 7, 3, 4, 5])


def test_replay_samples_distinct_episodes():
    scheme = Scheme(INFO)
    buf = ReplayBuffer(scheme, capacity=8, verbose=False)
    with pytest.raises(ValueError, match="cannot sample"):
        buf.sample(2, np.random.default_rng(0))
    buf.insert(_marked_batch(scheme, np.arange(8)))
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(50):
        s = buf.sample(4, rng)
        markers = s["reward"][:, 0, 0]
        assert len(set(markers)) == 4
        seen.update(markers.tolist())
    assert seen == set(range(8))  # uniform sampling reaches every episode


def test_replay_reports_memory(capsys):
    ReplayBuffer(Scheme(INFO), capacity=10)
    assert "MiB" in capsys.readouterr().out
    with pytest.raises(ValueError, match="positive"):
        ReplayBuffer(Scheme(INFO), capacity=0)


def test_replay_refuses_a_buffer_larger_than_memory():
    per_episode = Scheme(INFO).bytes_per_episode()
    ReplayBuffer(Scheme(INFO), capacity=8, verbose=False, available=10 * per_episode)  # 8 <= 0.8 * 10
    with pytest.raises(ValueError, match=r"learner.buffer_size=9 .*Use learner.buffer_size=8 or less"):
        ReplayBuffer(Scheme(INFO), capacity=9, verbose=False, available=10 * per_episode)
    with pytest.raises(ValueError, match="even one episode does not fit"):
        ReplayBuffer(Scheme(INFO), capacity=1, verbose=False, available=per_episode)


def test_available_memory_reads_the_machine():
    from marl.buffers.replay import available_memory

    avail = available_memory()
    if Path("/proc/meminfo").exists():  # Linux (CI): a byte count between 1 MiB and 1 PiB
        assert avail is not None and 2**20 < avail < 2**50


def test_buffer_max_gib_caps_only_large_episodes(capsys):
    from marl.buffers.replay import capped_capacity

    scheme = Scheme(INFO)
    per_episode_gib = scheme.bytes_per_episode() / 2**30
    assert capped_capacity(scheme, 5000, 0.0, 128) == 5000  # 0: no cap
    assert capped_capacity(scheme, 5000, 10.0, 128) == 5000  # the cap is above the buffer: unchanged
    assert capped_capacity(scheme, 5000, 1000.5 * per_episode_gib, 128) == 1000
    assert "1000 episodes instead of buffer_size=5000" in capsys.readouterr().out
    with pytest.raises(ValueError, match="fewer than learner.batch_size=128"):
        capped_capacity(scheme, 5000, 100 * per_episode_gib, 128)


def test_fill_shortfall_names_a_size_that_fits_after_the_first_update():
    from marl.buffers.replay import MEMORY_SHARE, fill_shortfall, process_rss

    mib, gib = 2**20, 2**30
    # 8 MiB episodes, 1000 of them, 128 stored: 872 * 8 MiB = 6.8 GiB still to come
    assert fill_shortfall(1000, 128, 8 * mib, 9 * gib, 10 * gib) is None  # 8 GiB may go to them
    msg = fill_shortfall(1000, 128, 8 * mib, 9 * gib, 4 * gib)
    fits = 128 + int(MEMORY_SHARE * 4 * gib) // (8 * mib)
    assert f"learner.buffer_size={fits} or less" in msg and fits == 537
    assert "need 6.8 GiB more" in msg and "holds 9.0 GiB" in msg and "learner.memory_check=false" in msg
    assert f"learner.buffer_max_gib={fits * 8 * mib / gib:.1f} or less" in msg
    # the learner's step growing by 2 GiB on longer episodes: it no longer fits, and fewer episodes do
    msg = fill_shortfall(1000, 128, 8 * mib, 9 * gib, 10 * gib, growth=2 * gib)
    assert "(2.0 GiB more than now) need 8.8 GiB more" in msg
    assert f"learner.buffer_size={128 + (int(MEMORY_SHARE * 10 * gib) - 2 * gib) // (8 * mib)} or less" in msg
    # a full buffer with no growth, or memory that cannot be read: nothing to say
    assert fill_shortfall(1000, 1000, 8 * mib, 9 * gib, 1) is None
    assert fill_shortfall(1000, 128, 8 * mib, None, 4 * gib) is None
    assert fill_shortfall(1000, 128, 8 * mib, 9 * gib, None) is None
    rss = process_rss()
    assert rss is None or rss > 10 * mib  # this process (Python, NumPy, pytest) holds at least that


def test_update_shortfall_names_a_batch_that_fits_for_on_policy_learners():
    from marl.buffers.replay import MEMORY_SHARE, update_shortfall

    gib = 2**30
    assert update_shortfall(32, 9 * gib, 10 * gib, 7 * gib) is None  # 8 GiB may go to the grown update
    msg = update_shortfall(32, 9 * gib, 10 * gib, 16 * gib)
    fits = 32 * int(MEMORY_SHARE * 10 * gib) // (16 * gib)
    assert fits == 16 and f"learner.batch_size={fits} or less" in msg
    assert "needs about 16.0 GiB more" in msg and "learner.num_minibatches" in msg
    assert "learner.memory_check=false" in msg
    assert update_shortfall(32, None, 10 * gib, 16 * gib) is None
    assert update_shortfall(32, 9 * gib, None, 16 * gib) is None


def test_peak_rss_sees_memory_freed_before_it_is_read():
    """The memory check measures an update by its peak: memory taken and given back inside the update
    counts (``reset_peak_rss`` starts a new peak where Linux allows it)."""
    from marl.buffers.replay import peak_rss, process_rss, reset_peak_rss

    if not Path("/proc/self/status").exists():
        pytest.skip("reads Linux's /proc")
    before = reset_peak_rss()
    assert before is not None and peak_rss() < before + 64 * 2**20  # the peak starts again near now
    block = np.ones(256 * 2**20, dtype=np.uint8)  # 256 MiB, touched
    del block
    assert peak_rss() >= before + 240 * 2**20
    assert process_rss() < before + 64 * 2**20  # given back, but the peak keeps it
