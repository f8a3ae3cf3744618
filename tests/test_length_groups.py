"""Length groups (``learner.length_groups``): the batch's longest eighth trained apart from the rest gives the
one-batch step's loss, statistics and update (Q-learner and PPO)."""

from __future__ import annotations

import numpy as np
import pytest
from learner_batches import GROUPS_INFO as INFO  # tests/ is on sys.path under pytest
from learner_batches import LENGTHS, assert_same_update, cfg, make_batch, ppo_pair
from learner_batches import filled_mask as _filled

from marl.config.schema import Config, MixerConfig, WQMIXConfig
from marl.learners import QLearner
from marl.learners.base import step_footprint
from marl.learners.length_groups import split_by_length
from marl.learners.wqmix_learner import WQMIXLearner
from marl.utils.ms import setup

setup(1, seed=0)


def test_split_takes_the_longest_eighth_apart_in_row_order() -> None:
    groups = split_by_length(_filled(LENGTHS), 2, 21, 4)
    assert groups is not None
    (long_rows, t_long), (rest_rows, t_rest) = groups
    assert long_rows.tolist() == [1, 8] and t_long == 21  # 16 // 8 = 2 rows; a timed-out episode fills 21
    assert rest_rows.tolist() == [r for r in range(16) if r not in (1, 8)]
    assert t_rest == 8  # the rest's longest fills 8 slots (7 transitions + the final observation)


@pytest.mark.parametrize(
    ("lengths", "n_groups"),
    [
        (LENGTHS, 1),  # switched off
        ([20] * 4 + [5] * 12, 2),  # more long episodes than the group holds: the rest is as long
        ([5] * 16, 2),  # all equally long
        ([3], 2),  # one episode
    ],
)
def test_no_split_where_it_saves_nothing(lengths: list[int], n_groups: int) -> None:
    assert split_by_length(_filled(lengths), n_groups, 21, 4) is None


@pytest.mark.parametrize(
    ("mixer", "use_jit"), [("qmix", False), ("vdn", False), ("none", False), ("qplex", False), ("qmix", True)]
)
def test_grouped_update_equals_the_one_batch_update(mixer: str, use_jit: bool) -> None:
    """Same loss, statistics and gradient norm, and the same weights after two Adam steps (the second on a
    batch without a split, through the one-batch graph)."""
    batch = make_batch(40, b=16, lengths=LENGTHS, info=INFO)
    short = make_batch(41, b=16, lengths=[4] * 16, info=INFO)
    one = QLearner(INFO, cfg(time_bucket=4, length_groups=1, mixer=mixer, use_jit=use_jit, optimizer="adam"))
    two = QLearner(INFO, cfg(time_bucket=4, length_groups=2, mixer=mixer, use_jit=use_jit, optimizer="adam"))
    two.load_state_dict(one.state_dict())
    assert two._group_split(batch["filled"]) is not None and two._group_split(short["filled"]) is None
    for i, b in enumerate((batch, short)):
        a, g = one.train(b, 0, i), two.train(b, 0, i)
        assert a.keys() == g.keys()
        for k in a:
            assert g[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), (i, k)
    for p1, p2 in zip(one.params, two.params, strict=True):
        np.testing.assert_allclose(p2.asnumpy(), p1.asnumpy(), rtol=1e-5, atol=2e-6)


def test_grouped_gradient_equals_the_reference_gradient() -> None:
    """The summed group gradients against ``loss_and_grads`` (the one padded batch, autodiff)."""
    batch = make_batch(42, b=16, lengths=LENGTHS, info=INFO)
    learner = QLearner(INFO, cfg(time_bucket=4, length_groups=2))
    parts, n_valid = learner._group_inputs(batch, learner._group_split(batch["filled"]))
    grad_fn = learner._groups[0]
    (loss_a, _), grads_a = grad_fn(*parts[0], n_valid)
    (loss_b, _), grads_b = grad_fn(*parts[1], n_valid)
    ref_loss, ref_grads = learner.loss_and_grads(batch)
    assert float((loss_a + loss_b).asnumpy()) == pytest.approx(ref_loss, rel=1e-6)
    for ga, gb, ref in zip(grads_a, grads_b, ref_grads, strict=True):
        np.testing.assert_allclose(ga.asnumpy() + gb.asnumpy(), ref, rtol=1e-5, atol=1e-7)


def test_bad_length_groups_are_refused_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"length_groups must be 1 .* or 2 .*got 3"):
        QLearner(INFO, cfg(length_groups=3))
    wq = {"name": "wqmix", "use_jit": False, "length_groups": 2}
    bad = Config(learner=WQMIXConfig(**wq), mixer=MixerConfig(name="qmix", embed_dim=8, hypernet_dim=16))
    with pytest.raises(ValueError, match="length_groups=2 splits the loss of q_learner"):
        WQMIXLearner(INFO, bad)
    assert WQMIXConfig().length_groups == 1  # its default trains one padded batch


def test_memory_check_footprint_is_the_largest_group() -> None:
    """The trainer scales the first update's memory by batch x full length over this footprint."""
    batch = make_batch(43, b=16, lengths=LENGTHS, info=INFO)
    two = QLearner(INFO, cfg(time_bucket=4, length_groups=2))
    one = QLearner(INFO, cfg(time_bucket=4, length_groups=1))
    assert step_footprint(one, batch) == 16 * 21  # the whole batch up to its longest episode (21 slots)
    assert step_footprint(two, batch) == max(2 * 21, 14 * 8)  # the two longest; the rest up to 7 steps + 1


@pytest.mark.parametrize("alg", ["mappo", "ippo"])
def test_ppo_grouped_epochs_equal_the_one_batch_epochs(tmp_path, alg: str) -> None:  # noqa: ANN001
    """PPO's epochs over the two groups give the one-batch epochs' statistics and weights (the no-grad
    evaluation runs over the whole batch either way)."""
    one, two, batch = ppo_pair(tmp_path, alg, length_groups=2)
    assert split_by_length(batch["filled"], 2, 13, 4) is not None
    assert_same_update(one, two, batch)
