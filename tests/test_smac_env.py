"""StarCraft2Env: SMAC's front end, first on a scripted test-double engine (exact numbers), then end to end
on the embedded engine for every map."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from shared import REPRESENTATIVE_MAPS, on_every_map  # tests/ is on sys.path under pytest

from marl.envs.base import EnvInfo
from marl.envs.smac import StarCraft2Env
from marl.envs.smac.features import UNIT_MAX_HEALTH_SHIELD
from marl.envs.smac.maps import load_map
from marl.envs.smac.types import SideTable, UnitTable
from marl.registry import build


def side(types, pos, health=None) -> SideTable:
    n = len(types)
    hmax = np.array([UNIT_MAX_HEALTH_SHIELD[u][0] for u in types], dtype=float)
    smax = np.array([UNIT_MAX_HEALTH_SHIELD[u][1] for u in types], dtype=float)
    return SideTable(
        tuple(types),
        np.array(pos, dtype=float).reshape(n, 2),
        hmax.copy() if health is None else np.array(health, dtype=float),
        hmax,
        smax.copy(),
        smax,
        np.zeros(n),
        np.zeros(n),
    )


def table(map_name, ally_pos, enemy_pos, a_health=None, e_health=None) -> UnitTable:
    s = load_map(map_name)
    return UnitTable(side(s.ally_types, ally_pos, a_health), side(s.enemy_types, enemy_pos, e_health))


class ScriptedEngine:
    """Test double: reset() returns tables[0]; the k-th step returns tables[k] (the last one repeats)."""

    def __init__(self, tables):
        self.tables, self.k, self.actions, self.seeds = tables, 0, [], []

    def reset(self):
        self.k = 0
        return self.tables[0].copy()

    def step(self, actions):
        self.actions.append(np.array(actions))
        self.k += 1
        return self.tables[min(self.k, len(self.tables) - 1)].copy()

    def seed(self, seed):
        self.seeds.append(seed)


A3 = [(9.0, 16.0), (9.0, 17.0), (9.0, 15.0)]
E3 = [(13.0, 16.0), (13.0, 17.0), (13.0, 15.0)]


def env3m(tables, **flags):
    return StarCraft2Env("3m", engine=ScriptedEngine(tables), **flags)


def test_reset_and_env_info():
    env = env3m([table("3m", A3, E3)])
    obs, state = env.reset()
    assert len(obs) == 3 and all(o.shape == (30,) and o.dtype == np.float32 for o in obs)
    assert state.shape == (48,) and state.dtype == np.float32 and not state[21:].any()
    info = env.get_env_info()
    assert {k: info[k] for k in ("state_shape", "obs_shape", "n_actions", "n_agents", "episode_limit")} == {
        "state_shape": 48,
        "obs_shape": 30,
        "n_actions": 9,
        "n_agents": 3,
        "episode_limit": 60,
    }
    assert info["agent_features"] == ["health", "energy/cooldown", "rel_x", "rel_y"]
    assert info["enemy_features"] == ["health", "rel_x", "rel_y"]
    assert EnvInfo.from_dict(info).obs_shape == 30
    assert env.get_avail_agent_actions(0) == [0, 1, 1, 1, 1, 1, 1, 1, 1]
    assert env.get_total_actions() == 9 and env.get_obs_size() == 30 and env.get_state_size() == 48
    assert env.get_unit_types() == ["marine"] * 3
    assert env.get_obs_enemy_feats_size() == (3, 5) and env.get_obs_ally_feats_size() == (2, 5)
    assert env.get_visibility_matrix().shape == (3, 6)


def test_dense_reward_win_bonus_info_and_stats():
    hit = table("3m", A3, E3, a_health=[45, 40, 45], e_health=[39, 0, 45])
    win = table("3m", A3, E3, a_health=[45, 0, 45], e_health=[0, 0, 0])
    env = env3m([table("3m", A3, E3), hit, win])
    env.reset()
    r, term, info = env.step([6, 7, 1])
    assert r == pytest.approx((6 + 45 + 10) / (365 / 20)) and not term
    assert info == {"battle_won": False, "dead_allies": 0, "dead_enemies": 1}
    np.testing.assert_array_equal(env.get_state()[21:].reshape(3, 9), np.eye(9)[[6, 7, 1]])
    np.testing.assert_array_equal(env._engine.actions[0], [6, 6 + 1, 1])
    r, term, info = env.step([6, 1, 8])  # agent 1 still alive before this step
    assert term and info == {"battle_won": True, "dead_allies": 1, "dead_enemies": 3}
    assert r == pytest.approx((39 + 10 + 45 + 10 + 200) / 18.25)
    assert env.get_stats() == {
        "battles_won": 1,
        "battles_game": 1,
        "battles_draw": 0,
        "win_rate": 1.0,
        "timeouts": 0,
        "restarts": 0,
    }
    with pytest.raises(RuntimeError, match="reset"):
        env.step([1, 1, 1])
    assert env.get_avail_agent_actions(1) == [1] + [0] * 8


def test_negative_scale_defeat_and_sparse():
    lose = table("3m", A3, E3, a_health=[0, 0, 0], e_health=[45, 45, 40])
    env = env3m([table("3m", A3, E3), lose], reward_only_positive=False, reward_defeat=-7)
    env.reset()
    r, term, info = env.step([1, 1, 1])
    assert term and not info["battle_won"]
    assert r == pytest.approx((5 - 3 * 5 - 0.5 * 135 - 7) / 18.25)
    sparse = env3m([table("3m", A3, E3), lose], reward_sparse=True, reward_scale=False)
    sparse.reset()
    assert sparse.step([1, 1, 1])[0] == -1.0
    win = table("3m", A3, E3, e_health=[0, 0, 0])
    sparse = env3m(
        [table("3m", A3, E3), table("3m", A3, E3, e_health=[0, 45, 45]), win],
        reward_sparse=True,
        reward_scale=False,
    )
    sparse.reset()
    assert sparse.step([6, 6, 6])[0] == 0.0
    assert sparse.step([7, 7, 7])[0] == 1.0


def test_draw_ends_episode_without_bonus():
    both = table("3m", A3, E3, a_health=[0, 0, 0], e_health=[0, 0, 0])
    env = env3m([table("3m", A3, E3), both])
    env.reset()
    r, term, info = env.step([6, 7, 8])
    assert term and not info["battle_won"] and r == pytest.approx((135 + 30) / 18.25)
    assert env.get_stats()["battles_game"] == 1 and env.get_stats()["timeouts"] == 0


@pytest.mark.parametrize("continuing", [False, True])
def test_timeout(continuing):
    env = env3m([table("3m", A3, E3)], continuing_episode=continuing)
    env.reset()
    for _ in range(59):
        r, term, info = env.step([1, 1, 1])
        assert not term and r == 0 and "episode_limit" not in info
    r, term, info = env.step([1, 1, 1])
    assert term and not info["battle_won"]
    assert info.get("episode_limit", False) is continuing
    st = env.get_stats()
    assert (st["battles_game"], st["timeouts"], st["battles_draw"], st["battles_won"]) == (1, 1, 1, 0)


def test_win_on_last_step_is_a_win_not_a_timeout():
    tables = [table("3m", A3, E3)] * 60 + [table("3m", A3, E3, e_health=[0, 0, 0])]
    env = env3m(tables)
    env.reset()
    for _ in range(59):
        env.step([1, 1, 1])
    _, term, info = env.step([6, 6, 6])
    assert term and info["battle_won"] and env.get_stats()["timeouts"] == 0


def test_bad_actions_are_errors():
    far = [(25.0, 16.0), (13.0, 17.0), (13.0, 15.0)]  # enemy 0 is 16 away
    env = env3m([table("3m", A3, far)])
    env.reset()
    msg = r"agent 0 cannot take action 6 \(attack enemy 0\).*\[1, 2, 3, 4, 5, 7, 8\]"
    with pytest.raises(ValueError, match=msg):
        env.step([6, 1, 1])
    with pytest.raises(ValueError, match="agent 2 cannot take action 0"):
        env.step([1, 1, 0])
    with pytest.raises(ValueError, match="expected 3 actions"):
        env.step([1, 1])
    with pytest.raises(ValueError, match="out of range"):
        env.step([1, 1, 9])


def test_errors_on_construction():
    from marl.envs.smac.sc2 import Sc2Unavailable

    with pytest.raises(ValueError, match="Did you mean 'obs_last_action'"):
        StarCraft2Env("3m", obs_last_actions=True)
    with pytest.raises(ValueError, match="unknown SMAC map '3n'.*Did you mean '3m'"):
        StarCraft2Env("3n")
    with pytest.raises(Sc2Unavailable, match="backend='sim'"):  # conftest hides any installed game
        StarCraft2Env("3m", backend="sc2")
    with pytest.raises(ValueError, match="allowed: sim, auto, sc2"):
        StarCraft2Env("3m", backend="pysc2")
    assert StarCraft2Env("3m", backend="auto").backend == "sim"


def test_heuristic_ai_attacks_closest_enemy():
    enemies = [(20.0, 16.0), (10.0, 20.0), (13.0, 15.5)]
    env = env3m([table("3m", A3, enemies)], heuristic_ai=True)
    env.reset()
    env.step([0, 0, 0])  # the policy's actions are ignored
    np.testing.assert_array_equal(env._engine.actions[0], [8, 7, 8])


def test_render_and_gif_replay(tmp_path):
    env = env3m([table("3m", A3, E3), table("3m", A3, E3, e_health=[30, 45, 45])], replay_dir=str(tmp_path))
    env.reset()
    env.step([6, 1, 1])
    frame = env.render()
    assert frame.shape == (512, 512, 3) and frame.dtype == np.uint8
    assert (frame == [40, 110, 220]).all(-1).any() and (frame == [215, 50, 40]).all(-1).any()
    path = env.save_replay()
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == 2


def test_registry_builds_env():
    env = build("env", "sc2", map_name="2s3z", seed=3, obs_last_action=True)
    assert isinstance(env, StarCraft2Env) and env.get_obs_size() == 80 + 4 * 11


# ---------------------------------------------------------------- end to end on the embedded engine
def _random_episode(env, seed):
    rng = np.random.default_rng(seed)
    obs, state = env.reset()
    info_ = env.get_env_info()
    trace, steps, terminated = [], 0, False
    while not terminated:
        avail = np.array(env.get_avail_actions())
        assert avail.shape == (info_["n_agents"], info_["n_actions"])
        assert (avail.sum(1) >= 1).all()
        actions = [int(rng.choice(np.flatnonzero(a))) for a in avail]
        reward, terminated, info = env.step(actions)
        steps += 1
        obs, state = env.get_obs(), env.get_state()
        assert len(obs) == info_["n_agents"] and obs[0].shape == (info_["obs_shape"],)
        assert state.shape == (info_["state_shape"],) and np.isfinite(state).all()
        assert reward >= 0 and set(info) >= {"battle_won", "dead_allies", "dead_enemies"}
        trace.append((reward, state.copy()))
    assert steps <= info_["episode_limit"]
    return trace, info


def _episode_on_the_embedded_engine(map_name: str) -> None:
    env = StarCraft2Env(map_name, seed=7)
    _random_episode(env, 0)
    assert env.get_stats()["battles_game"] == 1


@pytest.mark.parametrize("map_name", REPRESENTATIVE_MAPS)
def test_map_runs_an_episode_on_the_embedded_engine(map_name):
    _episode_on_the_embedded_engine(map_name)


@pytest.mark.conformance
def test_every_map_runs_an_episode_on_the_embedded_engine():
    on_every_map(_episode_on_the_embedded_engine)


def test_same_seed_same_episode():
    a, b = StarCraft2Env("2s3z", seed=11), StarCraft2Env("2s3z", seed=11)
    ta, _ = _random_episode(a, 5)
    tb, _ = _random_episode(b, 5)
    assert len(ta) == len(tb)
    for (ra, sa), (rb, sb) in zip(ta, tb, strict=True):
        assert ra == rb and np.array_equal(sa, sb)


def test_reset_seed_reproduces_and_seeds_differ():
    env = StarCraft2Env("2s3z", seed=11)
    first = env.reset()[1]
    _random_episode(env, 1)
    assert np.array_equal(env.reset(seed=11)[1], first)
    assert not np.array_equal(StarCraft2Env("2s3z", seed=12).reset()[1], first)


@pytest.mark.parametrize("map_name", ["3m", "2s3z", "MMM", "1c3s5z", "2s_vs_1sc"])
def test_max_reward_from_engine_matches_smac_formula(map_name):
    env = StarCraft2Env(map_name, seed=0)
    nominal = env.max_reward
    env.reset()
    assert env.max_reward == nominal
    assert {"3m": 365, "2s3z": 1020, "MMM": 1015}.get(map_name, nominal) == env.max_reward
