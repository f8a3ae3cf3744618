"""The learner's reused host arrays (:mod:`marl.learners.host_buffers`): the agent inputs written into them
equal the readable ``build_agent_inputs``, and a learner that refills them call after call gives the losses
of one that builds fresh arrays (no stale rows or slots from an earlier, longer or wider call)."""

from __future__ import annotations

import numpy as np
import pytest
from learner_batches import GROUPS_INFO as INFO  # tests/ is on sys.path under pytest
from learner_batches import LENGTHS, cfg, make_batch

from marl.controllers.mac import build_agent_inputs
from marl.learners import QLearner
from marl.learners.host_buffers import HostBuffers, agent_inputs_into
from marl.utils.ms import setup

setup(1, seed=0)


@pytest.mark.parametrize(("last_action", "agent_id"), [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("rows", [None, np.array([1, 4, 5])])
def test_agent_inputs_into_equals_the_reference(last_action: bool, agent_id: bool, rows) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(6, 9, 3, 5)).astype(np.float32)
    act = np.eye(4, dtype=np.float32)[rng.integers(0, 4, size=(6, 9, 3))]
    t = 7
    pick = slice(None) if rows is None else rows
    want = build_agent_inputs(obs[pick, :t], act[pick, :t], last_action, agent_id)
    out = np.full((len(obs) if rows is None else len(rows), t, 3, want.shape[3]), np.nan, np.float32)
    got = agent_inputs_into(out, obs, act, rows, last_action, agent_id)
    assert got is out
    np.testing.assert_array_equal(got, want)


def test_buffers_are_reused_contiguous_and_grow() -> None:
    host = HostBuffers()
    a = host.take("x", (4, 5), np.float32)
    b = host.take("x", (3, 5), np.float32)  # shorter: the same memory, still contiguous
    assert b.flags.c_contiguous and np.shares_memory(a, b)
    c = host.take("x", (6, 5), np.float32)  # longer: new memory
    assert c.shape == (6, 5) and not np.shares_memory(a, c)
    assert not np.shares_memory(c, host.take("y", (6, 5), np.float32))  # another key: its own array
    assert host.take("x", (2,), np.int32).dtype == np.int32
    assert host.nbytes() == 6 * 5 * 4 + 2 * 4


@pytest.mark.parametrize(("length_groups", "use_jit"), [(1, False), (2, False), (2, True)])
def test_reused_arrays_give_the_losses_of_fresh_ones(length_groups: int, use_jit: bool) -> None:
    """Batches of decreasing and increasing length through one learner (the buffers shrink and grow, the
    groups change shape) give the losses and the update that the same learner computes from fresh arrays,
    step by step: each step is taken into the reused arrays (time-major rows), then again from the state
    before it with fresh arrays (4-D inputs, the readable form), each path through its own graphs."""
    batches = [
        make_batch(50, b=16, lengths=LENGTHS, info=INFO),
        make_batch(51, b=16, lengths=[4] * 16, info=INFO),
        make_batch(52, b=16, lengths=LENGTHS[::-1], info=INFO),
    ]
    c = cfg(time_bucket=4, length_groups=length_groups, use_jit=use_jit, optimizer="adam")
    learner = QLearner(INFO, c)
    own_cut = learner._cut

    def fresh_cut(batch, t, rows=None, part=None):  # noqa: ANN001, ANN202
        return own_cut(batch, t, rows)  # without part: new arrays, not the reused ones

    def nets(sd: dict) -> dict:
        return {k: v for k, v in sd.items() if not k.startswith("length_plan/")}

    for i, b in enumerate(batches + batches[:1]):
        before = learner.state_dict()
        a = learner.train(b, 0, i)
        after, used = nets(learner.state_dict()), learner._host.nbytes()
        learner.load_state_dict(before)
        learner._cut = fresh_cut
        try:
            f = learner.train(b, 0, i)
        finally:
            del learner._cut  # the reused arrays again, as the step before left them
        for k in a:
            assert a[k] == f[k], (i, k)
        for k, v in nets(learner.state_dict()).items():
            np.testing.assert_array_equal(v, after[k], err_msg=f"{i} {k}")
        assert learner._host.nbytes() == used > 0  # the fresh step took none of the reused arrays


@pytest.mark.parametrize(("agent", "length_groups", "use_jit"), [("rnn", 2, False), ("dueling_rnn", 1, True)])
def test_inputs_as_rows_give_the_losses_of_4d_inputs(agent: str, length_groups: int, use_jit: bool) -> None:
    """Agent inputs go to the learner's graph as time-major rows (T*B*N, I) and through
    ``RNNAgent.unroll_rows``; the losses and updates equal those of the 4-D inputs through ``unroll``."""
    from dataclasses import replace

    c = cfg(time_bucket=4, length_groups=length_groups, use_jit=use_jit, optimizer="adam")
    c = replace(c, agent=replace(c.agent, name=agent, hidden_dim=8))  # inputs: 6 obs + 5 actions + 3 ids
    rows, four = QLearner(INFO, c), QLearner(INFO, c)
    four.load_state_dict(rows.state_dict())
    four._rows_inputs = False
    assert (
        rows._rows_inputs
        and rows._arrays(make_batch(1, b=2, lengths=[3, 4], info=INFO), 5, None, 0)[0].ndim == 2
    )
    batches = [
        make_batch(60, b=16, lengths=LENGTHS, info=INFO),
        make_batch(61, b=16, lengths=[4] * 16, info=INFO),
    ]
    for i, b in enumerate(batches * 2):
        a, f = rows.train(b, 0, i), four.train(b, 0, i)
        for k in a:
            assert a[k] == pytest.approx(f[k], rel=1e-6, abs=1e-7), (i, k)
