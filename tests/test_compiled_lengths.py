"""``learner.pad_to_compiled``: a new length runs on a longer compiled graph until its padding has cost one
compile (ski rental), and the padded update equals the exact one (Q-learner and PPO)."""

from __future__ import annotations

import numpy as np
import pytest
from test_length_groups import INFO, LENGTHS
from test_q_learner import cfg, make_batch  # tests/ is on sys.path under pytest

from marl.envs.base import EnvInfo
from marl.learners import QLearner
from marl.learners.compiled_lengths import LengthPlanner
from marl.learners.ppo_learner import PPOLearner
from marl.trainer import with_overrides


def _priced(compiled: dict, sec_per_cell: float = 1e-3, compile_s: float = 1.0) -> LengthPlanner:
    """A planner that has compiled ``compiled`` and measured these prices."""
    plan = LengthPlanner()
    plan.compiled = {k: set(v) for k, v in compiled.items()}
    plan.sec_per_cell, plan.compile_s = sec_per_cell, compile_s
    return plan


def test_pads_until_the_padding_has_cost_one_compile_then_compiles() -> None:
    plan = _priced({"g": {40}})
    # 10 episodes x 8 slots of padding = 0.08 s a call against a 1 s compile: 12 calls padded (0.96 s), then
    # the 13th would bring the padding to 1.04 s, so the length compiles
    runs = [plan.slots("g", 10, 32) for _ in range(14)]
    assert runs == [40] * 12 + [32, 32]
    assert plan.padded_calls == 12 and plan.new_graphs == 1 and plan.compiled["g"] == {32, 40}
    assert "g: [32, 40]" in plan.summary() and "12 graph calls padded" in plan.summary()


def test_never_runs_shorter_than_wanted_and_picks_the_shortest_longer_graph() -> None:
    plan = _priced({"g": {16, 48, 61}})
    assert plan.slots("g", 4, 32) == 48  # the shortest compiled length that fits
    assert plan.slots("g", 4, 61) == 61  # compiled
    assert plan.slots("g", 4, 64) == 64 and plan.new_graphs == 1  # nothing longer: compile
    assert plan.slots("other", 4, 16) == 16 and plan.new_graphs == 2  # graphs are kept apart


def test_compiles_until_both_prices_are_measured_and_when_switched_off() -> None:
    plan = LengthPlanner()
    assert [plan.slots("g", 4, t) for t in (48, 32)] == [48, 32]  # no prices yet: every length compiles
    off = _priced({"g": {48}})
    off.pad = False
    assert off.slots("g", 4, 32) == 32 and off.padded_calls == 0 and off.compiled["g"] == {32, 48}
    eager = LengthPlanner(jit=False)
    assert eager.slots("g", 4, 32) == 32 and not eager.compiled


def test_record_measures_the_step_and_the_compile() -> None:
    plan = LengthPlanner()
    plan.slots("g", 10, 20)
    plan.record(5.0, 200)  # a call that compiled: no step price yet, so all of it is the compile
    assert plan.compile_s == pytest.approx(5.0) and plan.sec_per_cell is None and plan.new_graphs == 0
    plan.slots("g", 10, 20)
    plan.record(0.2, 200)  # compiled already: 1 ms a cell
    assert plan.sec_per_cell == pytest.approx(1e-3)
    plan.slots("g", 10, 40)
    plan.record(3.4, 400)  # 0.4 s of running, 3 s of compiling, averaged with the first
    assert plan.compile_s == pytest.approx(0.5 * (5.0 + 3.0))


SHORT = [3, 5, 2, 4, 5, 6, 3, 2, 4, 4, 5, 3, 2, 2, 7, 3]  # longest 7 steps: 8 slots


@pytest.mark.parametrize("length_groups", [1, 2])
def test_q_update_padded_to_a_compiled_length_equals_the_exact_one(length_groups: int) -> None:
    """Eager learners with the planner forced to pad: same statistics and weights as at the exact lengths.
    One group: a batch of 8 slots on the 12-slot graph; two: the rest's 8 slots on its 12-slot graph."""
    batch = make_batch(50, b=16, lengths=SHORT if length_groups == 1 else LENGTHS, info=INFO)
    exact = QLearner(INFO, cfg(time_bucket=4, length_groups=length_groups, optimizer="adam"))
    padded = QLearner(INFO, cfg(time_bucket=4, length_groups=length_groups, optimizer="adam"))
    padded.load_state_dict(exact.state_dict())
    padded.length_plan = _priced({("batch", 16): {12}, ("group", 14): {12}})
    a, p = exact.train(batch, 0, 0), padded.train(batch, 0, 0)
    assert padded.length_plan.padded_calls == 1
    for k in a:
        assert p[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), k
    for p1, p2 in zip(exact.params, padded.params, strict=True):
        np.testing.assert_allclose(p2.asnumpy(), p1.asnumpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("length_groups", [1, 2])
def test_ppo_update_padded_to_a_compiled_length_equals_the_exact_one(tmp_path, length_groups: int) -> None:  # noqa: ANN001
    """As above for MAPPO's epochs: one group pads the evaluation and the epochs from 8 to 12 slots; two
    groups pad the rest's group from 8 to 12 slots (the evaluation runs at the batch's 13)."""
    from test_ppo import _cfg, _random_batch, assert_same_update, cut_episodes

    info = EnvInfo(n_agents=3, n_actions=4, obs_shape=6, state_shape=7, episode_limit=12)
    over = ("env.args.episode_limit=12", "use_jit=false", "learner.batch_size=16")
    cfg_ = with_overrides(_cfg(tmp_path, "mappo", "fake", over), learner={"time_bucket": 4})
    cfg_ = with_overrides(cfg_, learner={"length_groups": length_groups, "num_minibatches": 1})
    lengths = [2, 5, 3] * 5 + [4]  # one group: 6 slots, bucketed to 8
    if length_groups == 2:  # two run to the limit
        lengths = [2, 12, 3, 2, 4, 3, 2, 12, 3, 2, 3, 4, 2, 3, 2, 3]
    batch = cut_episodes(_random_batch(info, 16, 5), lengths, limit=12)
    exact, padded = PPOLearner(info, cfg_), PPOLearner(info, cfg_)
    padded.length_plan = _priced({("batch", 16): {12}, ("group", 14): {12}})
    assert_same_update(exact, padded, batch)
    assert padded.length_plan.padded_calls == 1
