"""benchmarks/fidelity/recorded_rewards.py: the library's SMAC reward set beside recorded rewards, on
hand-made 3m states (the game's recordings are not in the repository)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fidelity import recorded_rewards as rr
from benchmarks.fidelity.recorded_episodes import Episode
from marl.envs.smac.batched_env import BatchedStarCraft2Env

SCALE = (3 * 45 + 3 * 10 + 200) / 20  # SMAC: max_reward / reward_scale_rate on 3m


def _episode(enemy_hp: list[list[float]], rewards: list[float]) -> Episode:
    t = len(enemy_hp)
    s = np.zeros((t, 48))
    s[:, 0:12:4] = 1.0  # allies at full health
    s[:, 12:21:3] = np.array(enemy_hp)
    return Episode(s, np.ones((t, 3), dtype=np.int64), np.array(rewards), np.ones(t), 0.0, "synthetic")


@pytest.fixture(scope="module")
def env():
    e = BatchedStarCraft2Env("3m", 1, 0)
    e.reset()
    yield e
    e.close()


def test_rewards_follow_smacs_formula_and_a_wrong_one_shows(env):
    # step 0: enemy 0 loses half (22.5); step 1: enemy 1 dies from 0.2 (9 + 10); step 2: the win (enemies 0
    # and 2 die from 0.5 and 1.0: 22.5 + 45 + 20, and 200)
    hp = [[1.0, 0.2, 1.0], [0.5, 0.2, 1.0], [0.5, 0.0, 1.0]]
    right = [22.5 / SCALE, 19.0 / SCALE, (22.5 + 45.0 + 20.0 + 200.0) / SCALE]
    got = rr.compare([_episode(hp, right)], env)
    assert got["last"].tolist() == [False, False, True] and got["code"].tolist() == [2, 2, 1]
    assert np.abs(got["diff"]).max() < 1e-9
    wrong = rr.compare([_episode(hp, [right[0], right[1] + 0.5, right[2]])], env)
    assert wrong["diff"][1] == pytest.approx(-0.5)
