"""benchmarks/fidelity/fidelity.py: the episode loop and the statistics it reports."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fidelity import fidelity
from benchmarks.research import two_stalker_probe


def test_wilson_interval_matches_known_values():
    lo, hi = fidelity.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = fidelity.wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)


def test_stop_policy_never_fights_and_the_loop_plays_exactly_the_episodes_asked():
    r = fidelity.run_sim("3m", "stop", episodes=7, seed=0, n_envs=3)
    assert len(r["won"]) == 7 and not r["won"].any()
    assert np.all(r["enemy_health_left"] == 1.0)  # passive allies holding position deal no damage
    assert np.all(r["allies_alive"] == 0) and np.all(r["enemies_alive"] == 3)
    assert np.all((r["length"] > 0) & (r["length"] <= 60))


def test_heuristic_fights_and_random_uses_only_available_actions():
    h = fidelity.run_sim("3m", "heuristic", episodes=20, seed=1)
    assert h["enemy_health_left"].mean() < 0.5  # attacking the nearest enemy does damage
    rnd = fidelity.run_sim("3m", "random", episodes=5, seed=2)  # an unavailable action would raise
    assert len(rnd["won"]) == 5


def test_published_figures_prefer_the_primary_source_and_the_check_flags_gaps_over_15_points():
    pub = fidelity.published_heuristic(
        {
            "heuristic": {"win_rate": {"27m_vs_30m": 0}},
            "heuristic_secondary": {"win_rate": {"27m_vs_30m": 5, "2s3z": 90}},
        }
    )
    assert pub == {"27m_vs_30m": (0.0, "a"), "2s3z": (90.0, "b")}
    rows = [
        ("2s3z", "heuristic", {"win": 0.70}),
        ("27m_vs_30m", "heuristic", {"win": 0.15}),
        ("3m", "heuristic", {"win": 0.2}),
    ]
    lines = fidelity.check_lines(rows, pub)
    assert lines[0] == "**±15-point check: 1 of 2 maps within.**"
    assert "2s3z: ours 70.0 %, published 90 % (b): -20.0 points, OUTSIDE" in lines[2]
    assert lines[3].endswith("+15.0 points, within")


def test_the_published_file_names_a_source_for_every_block():
    blocks = fidelity.yaml.safe_load(fidelity.PUBLISHED.read_text())
    assert all(b.get("source") and (b.get("win_rate") or b.get("classes")) for b in blocks.values())
    assert set(blocks["difficulty"]["classes"].values()) == {"easy", "hard", "super_hard"}


def test_two_stalker_probe_plays_2s_vs_1sc():
    env = two_stalker_probe.make_env(seed=0)
    won, length, left = two_stalker_probe.play(env, swap_shield=-1.0)
    assert 0 < length <= 300 and left < 300  # the stalkers reached the crawler and hurt it
    assert won == (left <= 0)
    env.close()
