"""``learner.update_rows``: the Q-learner's and PPO's update in row parts of at most R episodes, gradients
summed, gives the one-graph update (with and without length groups); the memory check counts at most R
episodes per graph and names an R that fits."""

from __future__ import annotations

import numpy as np
import pytest
from learner_batches import GROUPS_INFO as INFO  # tests/ is on sys.path under pytest
from learner_batches import LENGTHS, assert_same_update, cfg, make_batch, ppo_pair
from learner_batches import filled_mask as _filled
from train_runs import t_env_final, tiny_cfg

from marl.buffers.replay import MEMORY_SHARE, fill_shortfall, rows_that_fit, update_shortfall
from marl.config import load_config
from marl.config.keys import ConfigError
from marl.config.schema import Config, MixerConfig, WQMIXConfig
from marl.learners import QLearner
from marl.learners.base import full_footprint, held_footprint, step_footprint
from marl.learners.length_groups import split_by_length, split_rows
from marl.learners.wqmix_learner import WQMIXLearner
from marl.utils.ms import setup

setup(1, seed=0)


def test_split_rows_cuts_each_group_in_row_order() -> None:
    groups = split_by_length(_filled(LENGTHS), 2, 21, 4)  # rows 1 and 8 (21 slots), the other 14 (8 slots)
    parts = split_rows(groups, 16, 21, 5)
    assert [(rows.tolist(), t) for rows, t in parts] == [
        ([1, 8], 21),
        ([0, 2, 3, 4, 5], 8),
        ([6, 7, 9, 10, 11], 8),
        ([12, 13, 14, 15], 8),
    ]
    whole = split_rows(None, 16, 12, 6)  # no length groups: the whole batch over its slots
    assert [(rows.tolist(), t) for rows, t in whole] == [
        (list(range(6)), 12),
        (list(range(6, 12)), 12),
        ([12, 13, 14, 15], 12),
    ]
    assert split_rows(None, 16, 12, 16) is None  # one part: the one-graph step
    assert split_rows(None, 16, 12, 0) is None and split_rows(groups, 16, 21, 0) is groups  # 0: no limit


@pytest.mark.parametrize(
    ("length_groups", "rows", "use_jit"), [(1, 5, False), (2, 5, False), (2, 1, False), (1, 6, True)]
)
def test_update_in_row_parts_equals_the_one_graph_update(
    length_groups: int, rows: int, use_jit: bool
) -> None:
    """Same loss, statistics and gradient norm, and the same weights after two Adam steps."""
    batch = make_batch(50, b=16, lengths=LENGTHS, info=INFO)
    other = make_batch(51, b=16, lengths=[4] * 16, info=INFO)
    kw = {"time_bucket": 4, "use_jit": use_jit, "optimizer": "adam"}
    one = QLearner(INFO, cfg(length_groups=1, **kw))
    parts = QLearner(INFO, cfg(length_groups=length_groups, update_rows=rows, **kw))
    parts.load_state_dict(one.state_dict())
    split = parts._group_split(batch["filled"])
    assert split is not None and max(len(r) for r, _ in split) <= rows
    assert sorted(np.concatenate([r for r, _ in split]).tolist()) == list(range(16))  # every episode once
    for i, b in enumerate((batch, other)):
        a, g = one.train(b, 0, i), parts.train(b, 0, i)
        for k in a:
            assert g[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), (i, k)
    # Adam divides by sqrt(v): where an element's gradient is near 0, a rounding difference in it can move
    # that element by a good part of one lr step (on an Intel Xeon: 1 of 12,288 weights was 6.3e-5 off).
    # So nearly every weight agrees to 1e-5, and none is off by more than a tenth of the two steps' lr.
    w1, w2 = (np.concatenate([p.asnumpy().ravel() for p in q.params]) for q in (one, parts))
    off = np.abs(w2 - w1) > 1e-5 + 1e-5 * np.abs(w1)
    assert off.mean() <= 1e-3, f"{off.sum()} of {off.size} weights differ"
    np.testing.assert_allclose(w2, w1, rtol=0, atol=0.1 * 2 * 1e-3)


def test_memory_footprints_count_at_most_update_rows_episodes() -> None:
    batch = make_batch(52, b=16, lengths=LENGTHS, info=INFO)
    learner = QLearner(INFO, cfg(time_bucket=4, length_groups=2, update_rows=5))
    assert step_footprint(learner, batch) == max(2 * 21, 5 * 8)  # the largest part's episodes x slots
    assert full_footprint(learner, 16, 21) == 5 * 21  # full-length episodes: at most 5 per graph
    # every part's inputs are built before the first runs: the held footprint sums the parts
    lengths = np.asarray(LENGTHS) + 1
    parts = learner._group_split(batch["filled"])
    assert held_footprint(learner, batch) == sum(len(r) * lengths[r].max() for r, _ in parts) > 2 * 21 + 5 * 8
    plain = QLearner(INFO, cfg(time_bucket=4, length_groups=2))
    assert full_footprint(plain, 16, 21) == 16 * 21


def test_rows_that_fit_and_the_hint_in_the_stop_message() -> None:
    gib = 2**30
    # the first update: 1 GiB for 16 x 21 episode-slots; full length (21) costs 1 GiB per 16 episodes
    fits = rows_that_fit(rest=2 * gib, step_bytes=gib, footprint=16 * 21, slots=21, available=4 * gib)
    # 0.8 * 4 GiB may go to the 2 GiB still to come plus the step's growth beyond the first update's 1 GiB
    assert fits == int((MEMORY_SHARE * 4 - 2 + 1) * 16)
    msg = fill_shortfall(1000, 128, 2**20, 9 * gib, 4 * gib, growth=6 * gib, rows_hint=fits)
    assert f"learner.update_rows={fits}" in msg and "learner.memory_check=false" in msg
    assert "update_rows" not in fill_shortfall(1000, 128, 2**20, 9 * gib, 4 * gib, growth=6 * gib)
    on_policy = update_shortfall(128, 9 * gib, 4 * gib, growth=6 * gib, rows_hint=40)
    assert "keep the batch with learner.update_rows=40" in on_policy and "learner.batch_size=" in on_policy


def test_bad_update_rows_are_refused_with_the_allowed_values(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError, match=r"learner.update_rows must be >= 0"):
        load_config("qmix", env="fake", overrides=["learner.update_rows=-1", f"results_dir={tmp_path}"])
    wq = {"name": "wqmix", "use_jit": False, "update_rows": 4}
    bad = Config(learner=WQMIXConfig(**wq), mixer=MixerConfig(name="qmix", embed_dim=8, hypernet_dim=16))
    with pytest.raises(ValueError, match="update_rows=4 splits the loss of q_learner, ppo and pg only"):
        WQMIXLearner(INFO, bad)


def test_a_run_with_update_rows_trains_and_the_memory_stop_names_one(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """End to end on the fake env: a run whose update goes in parts of 3 episodes finishes; a run whose
    first update shows that full-length updates would not fit stops there, naming update_rows."""

    import marl.trainer as trainer_mod
    from marl.signals import RunStopped
    from marl.trainer import Trainer

    run = Trainer(tiny_cfg(tmp_path, extra=("run_name=parts", "learner.update_rows=3"))).run()
    assert t_env_final(run) >= 400
    after = 2**30 + 64 * 2**20  # the first update took 64 MiB (at its peak and after it)
    monkeypatch.setattr(trainer_mod, "reset_peak_rss", lambda: 2**30)
    monkeypatch.setattr(trainer_mod, "peak_rss", lambda: after)
    monkeypatch.setattr(trainer_mod, "process_rss", lambda: after)
    monkeypatch.setattr(trainer_mod, "available_memory", lambda: 2**30)
    with pytest.raises(RunStopped, match=r"learner.update_rows=\d+ \(the same update in parts"):
        Trainer(tiny_cfg(tmp_path, extra=("run_name=stop", "env.args.episode_limit=200"))).run()


@pytest.mark.parametrize(("length_groups", "rows"), [(1, 5), (2, 6)])
def test_ppo_epochs_in_row_parts_equal_the_one_batch_epochs(tmp_path, length_groups: int, rows: int) -> None:  # noqa: ANN001
    """MAPPO's epochs (one minibatch each, the SMAC setting) over row parts give the one-batch epochs'
    statistics and weights."""

    one, parts, batch = ppo_pair(tmp_path, "mappo", length_groups=length_groups, update_rows=rows)
    split = parts._group_split(batch["filled"])
    assert split is not None and max(len(r) for r, _ in split) <= rows and parts.rows_splittable
    assert_same_update(one, parts, batch)
