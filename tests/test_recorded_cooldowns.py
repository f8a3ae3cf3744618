"""benchmarks/fidelity/recorded_cooldowns.py: the weapon-timing laws read from SMAC's state, here on the
engine (the game's side needs og-marl's recordings, which the repository does not hold)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fidelity import recorded_cooldowns as rc
from benchmarks.fidelity.recorded_episodes import Episode


def test_the_engine_shows_the_games_laws_read_from_its_state():
    law = rc.laws(rc.transitions(rc.engine_episodes(60, seed=3, n_envs=8)))
    assert law["fresh n"] > 20 and law["continuing n"] > 50
    # stops at range + both radii (5.75) and fires unmoved (firing units are not pushed, as in D); beyond it
    # walks first, unless held behind a firing ally (the game's allies always walked: 160 of 160; the
    # engine's 0.89 over 400 episodes, results/recorded_cooldowns.md)
    assert law["stand share"] == 1.0 and law["walk share"] > 0.75
    assert law["fresh in body"] == 1.0  # Period + delay - 7, delay in [-1, +2]
    assert law["fresh distinct values"] > 0.9 * law["fresh n"]  # any real delay, not whole loops
    assert law["carry min"] >= -1 - 1e-4 and law["carry max"] <= 2 + 1e-4  # the carried part, exactly
    assert law["loop min"] < -1.2  # counting from the loop boundary would not fit


def test_transitions_read_smacs_3m_state_layout():
    """One step: ally 0 (cooldown 0, at distance 5.6 x 28 / 28) attacks enemy 1 and shows 6.5 loops after."""
    s = np.zeros((2, 4 * 3 + 3 * 3 + 3 * 9))
    s[:, 0:12:4] = 1.0  # allies' health
    s[:, 12:21:3] = 1.0  # enemies' health
    s[0, 2], s[0, 12 + 3 + 1] = 0.0, 5.6 / 28  # ally 0 at x 0, enemy 1 at x 5.6 (relative, over 28)
    s[1, 1] = 6.5 / rc.MAX_CD
    s[1, 2] = 0.1 / 28  # ally 0 moved 0.1
    actions = np.array([[7, 1, 1], [7, 1, 1]])
    ep = Episode(s, actions, np.zeros(2), np.ones(2), 0.0, "synthetic")
    tr = rc.transitions([ep])
    assert len(tr["dist"]) == 1
    assert tr["dist"][0] == pytest.approx(5.6) and tr["cd0"][0] == 0.0
    assert tr["cd1"][0] == pytest.approx(6.5) and not tr["was_attacking"][0]
    assert tr["moved"][0] == pytest.approx(0.1)
