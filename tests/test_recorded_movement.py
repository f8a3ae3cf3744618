"""benchmarks/fidelity/recorded_movement.py: move steps read from SMAC's 3m state, categorised by the previous
action (the game's side needs og-marl's recordings, which the repository does not hold)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fidelity import recorded_movement as rm
from benchmarks.fidelity.recorded_episodes import Episode


def _episode(actions: list[list[int]]) -> Episode:
    t = len(actions)
    return Episode(np.zeros((t, 48)), np.array(actions), np.zeros(t), np.ones(t), 0.0, "synthetic")


def test_move_steps_measure_the_walk_along_the_order_and_the_previous_action():
    # ally 0: east, east (0.5 of a step lost: 4 loops), then north after east; ally 1 attacks then walks
    # south; ally 2 dies after the first step
    ep = _episode([[4, 7, 2], [4, 3, 2], [2, 3, 2]])
    pos = np.full((4, 6, 2), np.nan)
    pos[:, 0] = [[10, 10], [10 + rm.FULL, 10], [10 + 1.5 * rm.FULL, 10], [10 + 1.5 * rm.FULL, 10 + rm.FULL]]
    pos[:, 1] = [[5, 5], [5, 5], [5, 5 - rm.FULL], [5.1, 5 - 2 * rm.FULL]]  # 0.1 sideways in the last step
    pos[:2, 2] = [[20, 20], [20, 20 + rm.FULL]]
    steps = rm.move_steps([ep], [pos])
    got = sorted(zip(steps["cat"], np.round(steps["loss"], 6), np.round(steps["side"], 6), strict=True))
    assert got == sorted(
        [
            ("first step", 0.0, 0.0),  # ally 0, t 0
            ("same move", 4.0, 0.0),  # ally 0, t 1: half a step
            ("other move", 0.0, 0.0),  # ally 0, t 2
            ("attack", 0.0, 0.0),  # ally 1, t 1
            ("same move", 0.0, 0.1),  # ally 1, t 2
            ("first step", 0.0, 0.0),  # ally 2, t 0; dead after t 1
        ]
    )
    s = rm.summary(steps)
    assert s["same move"]["n"] == 2 and s["same move"]["full"] == 0.5
    assert s["same move"]["hist"] == [1, 0, 0, 0, 0, 1, 0, 0]  # 4 lost loops: the bin [3.9, 4.9)
    assert s["stop"]["n"] == 0 and np.isnan(s["stop"]["full"])


def test_an_unhindered_engine_marine_walks_a_full_step():
    """The engine's own replay of orders: a lone marine ordered east four times walks 4 full steps."""
    ep = _episode([[4, 1, 1]] * 4)
    ep.state_TS[0, [0, 4, 8]] = 1.0  # allies alive
    ep.state_TS[0, [12, 15, 18]] = 1.0  # enemies alive
    ep.state_TS[0, [2, 3]] = (-8 / 28, 0.0)  # ally 0 at the centre's west, the others in the west corner
    ep.state_TS[0, [6, 7, 10, 11]] = (-12 / 28, -3 / 28, -12 / 28, 3 / 28)
    ep.state_TS[0, [13, 14, 16, 17, 19, 20]] = (12 / 28, 8 / 28, 12 / 28, 9 / 28, 12 / 28, 10 / 28)
    (pos,) = rm.engine_positions([ep])
    steps = rm.move_steps([ep], [pos])
    assert len(steps["loss"]) == 4 and np.abs(steps["loss"]).max() < 0.05
    assert pos[4, 0, 0] - pos[0, 0, 0] == pytest.approx(4 * rm.FULL, abs=0.01)
