"""Chunked truncated BPTT for long episodes (``learner.bptt_chunk``): same loss as whole-episode BPTT,
gradients exact up to the documented truncation, and a ~401-slot batch compiles in bounded time."""

from __future__ import annotations

import time

import numpy as np
import pytest
from learner_batches import INFO, cfg, make_batch  # tests/ is on sys.path under pytest

from marl import kernels
from marl.buffers.episode import EpisodeBatch, Scheme
from marl.config.schema import AgentConfig, Config, LearnerConfig, MixerConfig
from marl.envs.base import EnvInfo
from marl.learners import QLearner
from marl.learners.q_chunked import (
    AUTO_CHUNK,
    HYBRID_MAX_SLOTS,
    WHOLE_EPISODE_MAX_LIMIT,
    chunk_group_sizes,
    resolve_bptt_chunk,
)
from marl.learners.targets import chunk_view, live_chunks, transition_mask
from marl.utils.ms import Tensor, setup

setup(1, seed=0)


def long_batch(info: EnvInfo, b: int, seed: int) -> EpisodeBatch:
    """Random padded episodes of length 100..limit filled in one go (shorter ones terminate)."""
    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(info), b)
    d, n, a, lim = eb.data, info.n_agents, info.n_actions, info.episode_limit
    for row in range(b):
        ep = int(rng.integers(100, lim + 1))
        d["obs"][row, : ep + 1] = rng.normal(size=(ep + 1, n, info.obs_shape))
        d["state"][row, : ep + 1] = rng.normal(size=(ep + 1, info.state_shape))
        d["avail_actions"][row, : ep + 1] = 1
        act = rng.integers(0, a, size=(ep, n))
        d["actions"][row, :ep, :, 0] = act
        d["actions_onehot"][row, :ep] = np.eye(a, dtype=np.float32)[act]
        d["reward"][row, :ep, 0] = rng.normal(size=ep)
        d["terminated"][row, ep - 1, 0] = float(ep < lim)
        d["filled"][row, : ep + 1, 0] = 1.0
    return eb


def _cos(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    dot = sum(float((x * y).sum()) for x, y in zip(a, b, strict=True))
    return dot / np.sqrt(sum(float((x * x).sum()) for x in a) * sum(float((y * y).sum()) for y in b))


def test_resolve_bptt_chunk_auto_rule() -> None:
    assert resolve_bptt_chunk(0, 60, True) == 0  # short maps keep whole-episode BPTT
    assert resolve_bptt_chunk(0, WHOLE_EPISODE_MAX_LIMIT, True) == 0
    assert resolve_bptt_chunk(0, 400, True) == AUTO_CHUNK == 50  # corridor, 2c_vs_64zg: 8 chunks of 50
    assert resolve_bptt_chunk(0, 300, True) == 50  # 2s_vs_1sc
    assert resolve_bptt_chunk(0, 250, True) == 50  # 3s_vs_5z
    assert resolve_bptt_chunk(0, 220, True) == 44  # split evenly: 5 chunks of 44, not 4 x 50 + 20
    assert resolve_bptt_chunk(0, 180, True) == 0  # 27m_vs_30m, MMM2: whole-episode compile ~37 CPU s at 201
    assert resolve_bptt_chunk(0, 150, True) == 0  # 3s5z, MMM
    assert resolve_bptt_chunk(0, 120, True) == 0  # 8m, 2s3z
    assert resolve_bptt_chunk(-1, 400, True) == 0
    assert resolve_bptt_chunk(0, 400, True, compiled=True) == 0  # the GRU kernels: whole episodes always
    assert resolve_bptt_chunk(7, 60, True) == 7
    assert resolve_bptt_chunk(7, 400, False) == 0  # a feed-forward agent has no time loop to cut
    with pytest.raises(ValueError, match="bptt_chunk"):
        resolve_bptt_chunk(-2, 400, True)
    mlp = QLearner(
        INFO, Config(learner=LearnerConfig(use_jit=False, bptt_chunk=2), agent=AgentConfig(name="mlp"))
    )
    assert mlp.bptt_chunk == 0


def test_chunk_group_sizes() -> None:
    """Full groups, then the rest in the smallest halving of the batch size that holds it (>= 1/8)."""
    assert chunk_group_sizes(128, 128) == [128]
    assert chunk_group_sizes(140, 128) == [128, 16]  # 12 rows left: a group of 16, not of 128
    assert chunk_group_sizes(200, 128) == [128, 128]
    assert chunk_group_sizes(40, 128) == [64]
    assert chunk_group_sizes(3, 128) == [16]  # never below batch_size / 8
    assert chunk_group_sizes(9, 4) == [4, 4, 1]
    assert chunk_group_sizes(0, 4) == []


@pytest.fixture
def no_kernels(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The reference GRU path (as without a C++ compiler), where auto mode chunks long episodes."""
    monkeypatch.setenv("MARL_KERNELS", "0")
    kernels.library.cache_clear()
    yield
    kernels.library.cache_clear()


def test_auto_mode_with_kernels_trains_long_episodes_whole() -> None:
    info = EnvInfo(n_agents=2, n_actions=4, obs_shape=5, state_shape=6, episode_limit=240)
    learner = QLearner(info, cfg(bptt_chunk=0))
    assert kernels.library("gru_seq") is not None and learner.bptt_chunk == 0 and learner.hybrid_slots == 0


def test_auto_mode_trains_short_batches_on_the_whole_episode(no_kernels: None) -> None:
    """Auto mode on a long-limit map without the kernels: a batch of short episodes takes the exact
    whole-episode step (same loss and gradient as bptt_chunk=-1); a batch holding a long episode takes the
    chunked one (same loss, truncated gradient)."""
    info = EnvInfo(n_agents=2, n_actions=4, obs_shape=5, state_shape=6, episode_limit=240)
    whole = QLearner(info, cfg(bptt_chunk=-1))
    auto = QLearner(info, cfg(bptt_chunk=0))
    auto.load_state_dict(whole.state_dict())
    assert auto.bptt_chunk == 48 and auto.hybrid_slots == HYBRID_MAX_SLOTS
    short = make_batch(5, lengths=[30, 12, 47, 8], info=info)  # 48 filled slots -> 48
    long = make_batch(6, lengths=[30, 90, 47, 8], info=info)  # 91 -> 96 > 64: chunks
    assert not auto._use_chunks(short) and auto._use_chunks(long)
    for batch, exact in ((short, True), (long, False)):
        (loss_w, grads_w), (loss_a, grads_a) = whole.loss_and_grads(batch), auto.loss_and_grads(batch)
        assert loss_a == pytest.approx(loss_w, rel=1e-5)
        diff = max(float(np.abs(a - b).max()) for a, b in zip(grads_w, grads_a, strict=True))
        assert (diff < 1e-5) if exact else (diff > 1e-5 and _cos(grads_w, grads_a) > 0.9), diff
    explicit = QLearner(info, cfg(bptt_chunk=40))  # a chunk length set by hand is always used
    assert explicit.hybrid_slots == 0 and explicit._use_chunks(short)


def test_chunk_view_and_live_chunks() -> None:
    x = np.arange(2 * 5).reshape(2, 5, 1).astype(np.float32)
    v = chunk_view(x, 2, 3)  # 5 slots -> 3 chunks of 2, the last one zero-padded
    assert v.shape == (2, 3, 2, 1)
    np.testing.assert_array_equal(v[1, 2, :, 0], [9, 0])
    np.testing.assert_array_equal(chunk_view(x, 2, 2)[0, :, :, 0], [[0, 1], [2, 3]])  # cut
    mask = np.zeros((3, 6, 1), np.float32)
    mask[0, :6], mask[1, :2], mask[2, :3] = 1, 1, 1
    b_idx, k_idx = live_chunks(mask, 2)  # episode 1 has 1 live chunk, episode 2 has 2, episode 0 all 3
    assert list(zip(b_idx.tolist(), k_idx.tolist(), strict=True)) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (2, 0),
        (2, 1),
    ]


def test_unroll_from_carries_the_hidden_state() -> None:
    learner = QLearner(INFO, cfg(bptt_chunk=2))
    agent, hd = learner.nets.agent, learner.nets.agent.hidden_dim
    x = np.random.default_rng(0).normal(size=(2, 6, INFO.n_agents, agent.input_dim)).astype(np.float32)
    want = agent.unroll(Tensor(x)).asnumpy()
    h0 = Tensor(np.zeros((2 * INFO.n_agents, hd), np.float32))
    q, _ = agent.unroll_from(Tensor(x), h0)
    np.testing.assert_allclose(q.asnumpy(), want, atol=1e-6)
    q1, h = agent.unroll_from(Tensor(x[:, :4]), h0)  # two pieces, the hidden state carried over
    q2, _ = agent.unroll_from(Tensor(x[:, 4:]), h)
    np.testing.assert_allclose(np.concatenate([q1.asnumpy(), q2.asnumpy()], 1), want, atol=1e-6)


@pytest.mark.parametrize("mixer", ["qmix", "vdn", "none", "qplex"])
def test_chunked_loss_equals_whole_episode(mixer: str) -> None:
    """Any chunk length gives the whole-episode loss (the chunk's h0 is exact); C >= T - 1 (one chunk)
    gives the same gradient too; shorter chunks only truncate the gradient."""
    whole = QLearner(INFO, cfg(mixer=mixer, bptt_chunk=-1))
    state = whole.state_dict()
    batch = make_batch(3, b=4, lengths=[2, 5, 4, 5])
    loss_w, grads_w = whole.loss_and_grads(batch)
    for chunk in (8, 5, 2):
        learner = QLearner(INFO, cfg(mixer=mixer, bptt_chunk=chunk))
        learner.load_state_dict(state)
        loss_c, grads_c = learner.loss_and_grads(batch)
        assert loss_c == pytest.approx(loss_w, rel=1e-6), chunk
        diff = max(float(np.abs(a - b).max()) for a, b in zip(grads_w, grads_c, strict=True))
        if chunk >= INFO.episode_limit:
            assert diff < 1e-5, (chunk, diff)
        else:  # truncated, but pointing the same way
            assert diff > 1e-4 and _cos(grads_w, grads_c) > 0.95, (chunk, diff)
    np.testing.assert_allclose(
        learner.q_values_for_histogram(batch), whole.q_values_for_histogram(batch), atol=1e-6
    )


def test_truncation_is_the_only_difference() -> None:
    """With the recurrence switched off (W_hh = 0, update gate z = 0, so h_t does not depend on h_{t-1})
    there is nothing to truncate: chunks of 2 give the whole-episode gradient."""
    whole = QLearner(INFO, cfg(bptt_chunk=-1))
    sd = whole.state_dict()
    hd = whole.nets.agent.hidden_dim
    for net in ("agent", "target_agent"):
        sd[f"nets/{net}.rnn.weight_hh"] = np.zeros_like(sd[f"nets/{net}.rnn.weight_hh"])
        for b in ("bias_ih", "bias_hh"):
            sd[f"nets/{net}.rnn.{b}"][hd : 2 * hd] = -60.0  # sigmoid(-120) = 0 in float32
    whole.load_state_dict(sd)
    chunked = QLearner(INFO, cfg(bptt_chunk=2))
    chunked.load_state_dict(sd)
    batch = make_batch(4, b=4, lengths=[5, 3, 5, 4])
    (loss_w, grads_w), (loss_c, grads_c) = whole.loss_and_grads(batch), chunked.loss_and_grads(batch)
    assert loss_c == pytest.approx(loss_w, rel=1e-6)
    for a, b in zip(grads_w, grads_c, strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6)


def test_one_chunk_training_matches_whole_episode_training() -> None:
    """train(): one chunk (C >= T - 1) reproduces the whole-episode stats step by step (optimizer and
    target updates included); chunks of 2 give the same first loss, then drift (truncated gradient)."""
    kw = {"mixer": "qmix", "target_update_interval": 2}
    whole = QLearner(INFO, cfg(bptt_chunk=-1, **kw))
    one = QLearner(INFO, cfg(bptt_chunk=5, **kw))
    two = QLearner(INFO, cfg(bptt_chunk=2, **kw))
    for other in (one, two):
        other.load_state_dict(whole.state_dict())
    for episode in range(3):
        batch = make_batch(10 + episode, lengths=[5, 2, 3, 5] if episode else [2, 2, 3, 1])
        w, o, t = whole.train(batch, 0, episode), one.train(batch, 0, episode), two.train(batch, 0, episode)
        for key in w:
            assert o[key] == pytest.approx(w[key], rel=1e-5, abs=1e-6), (episode, key)
        if episode == 0:
            assert t["loss"] == pytest.approx(w["loss"], rel=1e-6)


def test_padding_does_not_change_the_chunked_loss() -> None:
    learner = QLearner(INFO, cfg(bptt_chunk=2))
    batch = make_batch(30, lengths=[2, 3, 5, 1])
    loss = learner.loss_and_grads(batch)[0]
    noisy = batch.select(np.arange(4))
    pad = noisy["filled"][..., 0] == 0
    noisy["obs"][pad] = np.random.default_rng(0).normal(size=noisy["obs"][pad].shape)
    noisy["reward"][pad] = 100.0
    assert learner.loss_and_grads(noisy)[0] == pytest.approx(loss, rel=1e-6)
    assert transition_mask(batch["filled"], batch["terminated"]).sum() == 11


@pytest.mark.slow
def test_long_episode_step_compiles_in_bounded_time() -> None:
    """T = 401 slots (corridor's limit) with tiny widths and chunks of 10: every graph has at most 10
    unrolled steps, so the first (compiling) call costs bounded CPU time; later calls -- other episode
    lengths, hence another number of live chunks -- reuse the graphs; the jitted step matches the eager
    chunked loss. CPU time, not wall time, is asserted: the test machine is shared."""
    info = EnvInfo(n_agents=2, n_actions=3, obs_shape=4, state_shape=6, episode_limit=400)
    small = {"agent": AgentConfig(hidden_dim=8), "mixer": MixerConfig(embed_dim=4, hypernet_dim=8)}
    learner = QLearner(info, Config(learner=LearnerConfig(batch_size=4, bptt_chunk=10), **small))
    eager = QLearner(info, Config(learner=LearnerConfig(batch_size=4, bptt_chunk=10, use_jit=False), **small))
    eager.load_state_dict(learner.state_dict())
    assert learner.bptt_chunk == 10
    batches = [long_batch(info, 4, seed) for seed in range(3)]
    want = eager.loss_and_grads(batches[0])[0]
    c0 = time.process_time()
    first = learner.train(batches[0], 0, 0)
    compile_cpu = time.process_time() - c0
    c0 = time.process_time()
    later = [learner.train(b, 0, i) for i, b in enumerate(batches[1:], 1)]
    step_cpu = (time.process_time() - c0) / 2
    assert first["loss"] == pytest.approx(want, rel=1e-5)
    assert np.isfinite([first["grad_norm"]] + [s["loss"] for s in later]).all()
    assert compile_cpu < 40.0, compile_cpu  # whole-episode BPTT at this T: minutes, or the call-depth error
    assert step_cpu < max(2.0, 0.2 * compile_cpu), (step_cpu, compile_cpu)  # no recompile for new lengths
