"""``learner.pad_to_compiled``: a new length runs on a longer compiled graph until its padding has cost one
compile (ski rental, at structural prices), and the padded update equals the exact one (Q-learner and PPO)."""

from __future__ import annotations

import numpy as np
import pytest
from learner_batches import GROUPS_INFO as INFO  # tests/ is on sys.path under pytest
from learner_batches import LENGTHS, cfg, cut_episodes, make_batch, ppo_cfg, random_ppo_batch

from marl.envs.base import EnvInfo
from marl.learners import QLearner
from marl.learners.compiled_lengths import COMPILE_AGENT_SLOTS, LengthPlanner
from marl.learners.ppo_learner import PPOLearner
from marl.trainer import with_overrides


def _planned(compiled: dict, n_agents: int = 1) -> LengthPlanner:
    """A planner that has compiled ``compiled`` (``{(kind, episodes): lengths}``)."""
    plan = LengthPlanner(n_agents)
    plan.compiled = {k: set(v) for k, v in compiled.items()}
    return plan


def test_pads_until_the_padding_has_cost_one_compile_then_compiles() -> None:
    plan = _planned({("group", 10): {40}}, n_agents=3)
    per_call = 10 * 3 * (40 - 32)  # episodes x agents x padded slots
    n_padded = -(-COMPILE_AGENT_SLOTS // per_call) - 1  # the last call that keeps the padding under a compile
    runs = [plan.slots(("group", 10), 10, 32) for _ in range(n_padded + 2)]
    assert runs == [40] * n_padded + [32, 32]
    assert plan.padded_calls == n_padded and plan.compiled[("group", 10)] == {32, 40}
    assert "('group', 10): [32, 40]" in plan.summary() and f"{n_padded} graph calls padded" in plan.summary()


def test_never_runs_shorter_than_wanted_and_picks_the_shortest_longer_graph() -> None:
    plan = _planned({("batch", 4): {16, 48, 61}})
    assert plan.slots(("batch", 4), 4, 32) == 48  # the shortest compiled length that fits
    assert plan.slots(("batch", 4), 4, 61) == 61  # compiled
    assert plan.slots(("batch", 4), 4, 64) == 64  # nothing longer: compile
    assert plan.slots(("group", 4), 4, 16) == 16  # graphs are kept apart
    assert plan.compiled == {("batch", 4): {16, 48, 61, 64}, ("group", 4): {16}}


def test_decisions_depend_on_the_lengths_alone_and_survive_a_checkpoint() -> None:
    """No wall-clock enters a decision (a seed gives one run), and a restored planner goes on as the first."""
    wants = [48, 32, 32, 61, 16, 32, 48, 16] * 40
    a, b = LengthPlanner(8), LengthPlanner(8)
    first = [a.slots(("group", 16), 16, t) for t in wants[:100]]
    for i in range(100):
        b.slots(("group", 16), 16, wants[i])
        b.record(0.01 * (i % 7))  # timings never matter
    b_state = b.state()
    c = LengthPlanner(8)
    c.load_state(b_state)
    rest_a = [a.slots(("group", 16), 16, t) for t in wants[100:]]
    rest_c = [c.slots(("group", 16), 16, t) for t in wants[100:]]
    assert first[:4] == [48, 48, 48, 61] and rest_a == rest_c
    assert a.compiled == c.compiled and a.padding == c.padding and a.padded_calls == c.padded_calls


def test_off_and_eager() -> None:
    off = _planned({("batch", 4): {48}})
    off.pad = False
    assert off.slots(("batch", 4), 4, 32) == 32 and off.padded_calls == 0
    assert off.compiled[("batch", 4)] == {32, 48}  # still counted for the run's closing line
    eager = LengthPlanner(jit=False)
    assert eager.slots(("batch", 4), 4, 32) == 32 and not eager.compiled
    eager.load_state({})  # a checkpoint from before the planner: nothing to restore


SHORT = [3, 5, 2, 4, 5, 6, 3, 2, 4, 4, 5, 3, 2, 2, 7, 3]  # longest 7 steps: 8 slots


@pytest.mark.parametrize("length_groups", [1, 2])
def test_q_update_padded_to_a_compiled_length_equals_the_exact_one(length_groups: int) -> None:
    """Eager learners with the planner forced to pad: same statistics and weights as at the exact lengths.
    One group: a batch of 8 slots on the 12-slot graph; two: the rest's 8 slots on its 12-slot graph."""
    batch = make_batch(50, b=16, lengths=SHORT if length_groups == 1 else LENGTHS, info=INFO)
    exact = QLearner(INFO, cfg(time_bucket=4, length_groups=length_groups, optimizer="adam"))
    padded = QLearner(INFO, cfg(time_bucket=4, length_groups=length_groups, optimizer="adam"))
    padded.load_state_dict(exact.state_dict())
    padded.length_plan = _planned({("batch", 16): {12}, ("group", 14): {12}})
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
    info = EnvInfo(n_agents=3, n_actions=4, obs_shape=6, state_shape=7, episode_limit=12)
    over = ("env.args.episode_limit=12", "use_jit=false", "learner.batch_size=16")
    cfg_ = with_overrides(ppo_cfg(tmp_path, "mappo", "fake", over), learner={"time_bucket": 4})
    cfg_ = with_overrides(cfg_, learner={"length_groups": length_groups, "num_minibatches": 1})
    lengths = [2, 5, 3] * 5 + [4]  # one group: 6 slots, bucketed to 8
    if length_groups == 2:  # two run to the limit
        lengths = [2, 12, 3, 2, 4, 3, 2, 12, 3, 2, 3, 4, 2, 3, 2, 3]
    batch = cut_episodes(random_ppo_batch(info, 16, 5), lengths, limit=12)
    exact, padded = PPOLearner(info, cfg_), PPOLearner(info, cfg_)
    padded.load_state_dict(exact.state_dict())
    padded.length_plan = _planned({("batch", 16): {12}, ("group", 14): {12}})
    out_exact, out_padded = exact.train(batch, 0, 0), padded.train(batch, 0, 0)
    assert padded.length_plan.padded_calls == 1
    for k, v in out_exact.items():
        assert out_padded[k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
    sd_padded = padded.state_dict()
    for k, v in exact.state_dict().items():
        if not k.startswith("length_plan/"):  # the planners differ by construction
            np.testing.assert_allclose(sd_padded[k], v, rtol=1e-4, atol=1e-6, err_msg=k)
