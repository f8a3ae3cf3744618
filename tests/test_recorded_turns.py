"""benchmarks/fidelity/recorded_turns.py: unobstructed move steps by the ally's turn (synthetic episodes; the
game's side needs og-marl's recordings, which the repository does not hold)."""

from __future__ import annotations

import numpy as np

from benchmarks.fidelity import recorded_turns as rt
from benchmarks.fidelity.recorded_episodes import Episode
from benchmarks.fidelity.recorded_movement import FULL, PER_LOOP


def _episode(actions: list[list[int]]) -> Episode:
    t = len(actions)
    return Episode(np.zeros((t, 48)), np.array(actions), np.zeros(t), np.ones(t), 0.0, "synthetic")


def test_turns_are_measured_from_the_last_target_or_walk_and_blocked_steps_are_left_out():
    # ally 0 walks east, then west (a reversal, full step); ally 1 fires at enemy 0 (north of it), then
    # walks east (a quarter turn) losing one loop; ally 2 walks north into ally 1's old place: blocked
    ep = _episode([[4, 6, 1], [5, 4, 2]])
    pos = np.full((3, 6, 2), np.nan)
    pos[:, 0] = [[10, 10], [10 + FULL, 10], [10, 10]]
    pos[:, 1] = [[20, 20], [20, 20], [20 + FULL - PER_LOOP, 20]]
    pos[:, 2] = [[20, 19], [20, 19], [20, 19 + FULL]]
    pos[:, 3] = [[20, 25], [20, 25], [20, 25]]  # enemy 0, north of ally 1
    rows = sorted(rt.free_steps([ep], [pos]))
    assert [(c, round(turn), round(loss, 6)) for c, turn, loss in rows] == [
        ("attack", 90, 1.0),
        ("other move", 180, 0.0),
    ]
    tab = rt.table(rows)
    assert tab["attack", "about 90°"] == {"n": 1, "full": 0.0, "mean": 1.0, "max": 1.0, "whole": 1}
    assert tab["other move", "about 180°"]["full"] == 1.0 and tab["other move", "about 180°"]["whole"] == 0


def test_facing_is_unknown_without_a_walk_or_a_living_target():
    ep = _episode([[1, 1, 1], [4, 4, 4]])
    pos = np.zeros((3, 6, 2))
    assert rt.facing(ep, pos, 1, 0) is None  # stood still: no walk to read the way it faces from


def test_late_attacks_read_the_cooldowns_and_the_targets_health_from_the_state():
    from benchmarks.fidelity.recorded_episodes import MARINE_MAX_CD

    # ally 0 attacks enemy 1 in step 0 (alone), then moves: its cooldown at step 1's start is 13 loops;
    # enemy 1 loses one marine hit (6 of 45) in step 0 and none in step 1. Allies 1 and 2 share an attack on
    # enemy 2 with the same cooldowns: left out
    ep = _episode([[7, 8, 8], [4, 4, 4], [4, 4, 4]])
    state = np.zeros((3, 48))
    ally = state[:, :12].reshape(3, 3, 4)
    enemy = state[:, 12:21].reshape(3, 3, 3)
    ally[:, :, 0] = 1.0
    ally[0, 0, 1], ally[1, 0, 1] = 6.5 / MARINE_MAX_CD, 13.0 / MARINE_MAX_CD
    ally[1, 1:, 1] = 13.0 / MARINE_MAX_CD
    enemy[:, 1, 0] = [1.0, 39 / 45, 39 / 45]
    ep.state_TS[:] = state
    rows = rt.late_attacks([ep])
    assert np.allclose(rows, [(6.5, 13.0, 6.0, 0.0)])
