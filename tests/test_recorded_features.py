"""benchmarks/fidelity/recorded_features.py: the units rebuilt from SMAC's 3m state give back the state,
observations and available actions the env produced with them (here the engine's own steps stand in for the
game's recordings, which the repository does not hold)."""

from __future__ import annotations

import numpy as np

from benchmarks.fidelity import recorded_features as rf
from benchmarks.fidelity.recorded_episodes import Episode
from marl.envs.smac.batched_env import BatchedStarCraft2Env


def _engine_episode(steps: int = 12) -> Episode:
    env = BatchedStarCraft2Env("3m", 1, 5)
    env.reset()
    rng = np.random.default_rng(0)
    states, obs, legal = [], [], []
    for _ in range(steps):
        avail = env.get_avail_actions()[0]
        states.append(env.get_state()[0])
        obs.append(env.get_obs()[0])
        legal.append(avail)
        a = np.array([rng.choice(np.flatnonzero(av)) for av in avail])
        _, term, _ = env.step(a[None])
        if term[0]:
            break
    env.close()
    t = len(states)
    zero, one = np.zeros(t), np.ones(t)
    return Episode(
        np.array(states), np.zeros((t, 3), int), zero, one, 0.0, "engine", np.array(obs), np.array(legal)
    )


def test_features_rebuilt_from_the_state_match_and_a_change_shows():
    ep = _engine_episode()
    env = BatchedStarCraft2Env("3m", 1, 0)
    got = rf.compare([ep], env)
    assert np.abs(got["state"] - got["game_state"]).max() < 1e-6
    assert np.abs(got["obs"] - got["game_obs"]).max() < 1e-5
    assert (got["avail"] == got["game_avail"]).all()
    ep.obs_TNO[3, 1, 10] += 0.25
    ep.legal_TNA[2, 0, 4] = 1 - ep.legal_TNA[2, 0, 4]
    bad = rf.compare([ep], env)
    assert np.abs(bad["obs"] - bad["game_obs"]).max() > 0.2
    assert (bad["avail"] != bad["game_avail"]).sum() == 1
    yes, no = rf.pathing_evidence(got)
    grid = np.asarray(env.spec.pathing_grid)
    assert yes and all(grid[c] for c in yes) and not any(grid[c] for c in no)
    env.close()
