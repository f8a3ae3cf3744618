"""SMACv2 scenarios on the embedded engine (marl/envs/smac/smacv2/): sizes, seeding, SMACv2 features."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.options import SmacOptions
from marl.envs.smac.smacv2.env import SMACv2Env
from marl.envs.smac.smacv2.features import V2Flags
from marl.envs.smac.smacv2.observer import V2Observer
from marl.envs.smac.smacv2.scenarios import SCENARIOS, list_scenarios
from marl.registry import build


def smacv2_sizes(
    n_agents: int, n_enemies: int, race: str, last_action: bool = False, own_pos: bool = True, n_fov: int = 0
):
    """Transcription of smacv2 StarCraft2Env.get_obs_size / get_state_size / n_actions on a 10gen map
    (unit_type_bits 3, team_gen observe, obs_all_health, no stochastic capabilities; ``n_fov`` the
    num_fov_actions of conic_fov, 0 without it)."""
    shield, bits, conic = int(race == "protoss"), 3, int(n_fov > 0)
    n_actions = 4 + n_fov + 2 + n_enemies  # n_actions_move + n_fov_actions + 2, + n_enemies
    n_enemy_feats = 4 + bits + 1 + shield  # get_obs_enemy_feats_size
    n_ally_feats = 4 + 1 + shield + n_actions * last_action + bits  # get_obs_ally_feats_size
    own = bits + 1 + shield + 2 * own_pos + 2 * conic  # get_obs_own_feats_size
    obs = 4 + n_enemies * n_enemy_feats + (n_agents - 1) * n_ally_feats + own
    nf_al = 4 + shield + 2 * conic + bits  # ally_state_attr_names (fov_x, fov_y) + capability_attr_names
    nf_en = 3 + shield + bits  # enemy_state_attr_names
    state = n_agents * nf_al + n_enemies * nf_en + n_agents * n_actions  # state_last_action
    return obs, state, n_actions


# SMACv2's 5 vs 5 sizes from the formulas above (docs/smacv2.md §3 tabulates all 15)
FIVE = {"protoss_5_vs_5": (92, 130, 11), "terran_5_vs_5": (82, 120, 11), "zerg_5_vs_5": (82, 120, 11)}


@pytest.mark.parametrize("name", list_scenarios())
def test_sizes_equal_smacv2(name: str) -> None:
    sc = SCENARIOS[name]
    env = SMACv2Env(name, seed=0)
    want = smacv2_sizes(sc.n_units, sc.n_enemies, sc.race)
    info = env.get_env_info()
    assert (info["obs_shape"], info["state_shape"], info["n_actions"]) == want
    assert (info["n_agents"], info["episode_limit"]) == (sc.n_units, 200)
    if name in FIVE:
        assert want == FIVE[name]


@pytest.mark.parametrize("name", ["protoss_5_vs_5", "terran_10_vs_11", "zerg_20_vs_23"])
def test_observed_vectors_have_those_sizes(name: str) -> None:
    env = build("env", "sc2", map_name=name, seed=1)
    assert isinstance(env, SMACv2Env)
    obs, state = env.reset()
    assert all(o.shape == (env.get_obs_size(),) for o in obs) and state.shape == (env.get_state_size(),)
    assert np.array(env.get_avail_actions()).shape == (env.n_agents, env.get_total_actions())
    sc = SCENARIOS[name]
    flagged = SMACv2Env(name, seed=1, obs_last_action=True, obs_own_pos=False)
    want = smacv2_sizes(sc.n_units, sc.n_enemies, sc.race, last_action=True, own_pos=False)
    assert (flagged.get_obs_size(), flagged.get_state_size(), flagged.n_actions) == want
    assert flagged.reset()[0][0].shape == (want[0],)


def _episode_signature(env: SMACv2Env) -> tuple:
    obs, state = env.reset()
    st = env.get_stats()
    return (tuple(st["ally_team"]), tuple(st["enemy_team"]), st["start_positions"], state.tobytes())


def test_seed_reproduces_teams_and_positions_and_resets_redraw() -> None:
    a, b = SMACv2Env("terran_5_vs_5", seed=3), SMACv2Env("terran_5_vs_5", seed=3)
    sig_a = [_episode_signature(a) for _ in range(6)]
    sig_b = [_episode_signature(b) for _ in range(6)]
    assert sig_a == sig_b
    assert len(set(sig_a)) == 6  # every reset draws a new team or new positions
    assert _episode_signature(SMACv2Env("terran_5_vs_5", seed=4)) != sig_a[0]
    assert _episode_signature(a.__class__("terran_5_vs_5", seed=9)) == _episode_signature(
        SMACv2Env("terran_5_vs_5", seed=9)
    )
    a.reset(seed=3)
    assert _episode_signature(a)[:3] == sig_a[1][:3]  # reset(seed) restarts the draws
    c = SMACv2Env("terran_5_vs_5", seed=99)
    c.seed(3)  # before the first reset too
    assert [_episode_signature(c) for _ in range(2)] == sig_a[:2]


def test_agents_sorted_like_smacv2_and_types_in_obs() -> None:
    env = SMACv2Env("zerg_10_vs_10", seed=5)
    obs, _ = env.reset()
    team = env.get_stats()["ally_team"]
    rank = {"baneling": 0, "hydralisk": 1, "zergling": 2}  # alphabetical RL-unit ids
    assert [rank[u] for u in team] == sorted(rank[u] for u in team)
    bit = {"zergling": 0, "hydralisk": 1, "baneling": 2}  # smacv2 get_unit_type_id on zerg_gen
    pos = env.unit_table.allies.pos
    for i, o in enumerate(obs):
        np.testing.assert_array_equal(o[-3:], np.eye(3)[bit[team[i]]])
        np.testing.assert_allclose(o[-5:-3], pos[i] / 32.0, rtol=1e-6)  # obs_own_pos
    d = env.get_state_dict()  # the same bits close each unit's state row, enemies included
    np.testing.assert_array_equal(d["allies"][:, -3:], np.eye(3)[[bit[u] for u in team]])
    # the state's positions: from the map's centre over the playable area, 28 (SMACv2's get_state)
    np.testing.assert_allclose(d["allies"][:, 2:4], (pos - 16.0) / 28.0, rtol=1e-5)
    enemy_pos = env.unit_table.enemies.pos
    np.testing.assert_allclose(d["enemies"][:, 1:3], (enemy_pos - 16.0) / 28.0, rtol=1e-5)
    np.testing.assert_array_equal(
        d["enemies"][:, -3:], np.eye(3)[[bit[u] for u in env.get_stats()["enemy_team"]]]
    )


def _stream(seed: int) -> np.ndarray:
    """An observation stream (the (1,) uint64 SplitMix64 state V2Observer draws from)."""
    return np.array([seed], dtype=np.uint64)


def _observer(types, enemy_types, prob=1.0, race="P") -> V2Observer:
    order = {"P": ("stalker", "zealot", "colossus"), "T": ("marine", "marauder", "medivac")}[race]
    one = lambda ts: np.eye(3)[[order.index(t) for t in ts]]  # noqa: E731
    return V2Observer(
        tuple(types), tuple(enemy_types), one(types), one(enemy_types), race, (32, 32),
        SmacOptions(), V2Flags(prob_obs_enemy=prob), race == "T",
    )  # fmt: skip


def test_unit_sight_and_attack_ranges() -> None:
    ob = _observer(["stalker", "zealot"], ["zealot"])
    pos = np.array([[10.0, 10.0], [10.0, 11.0], [19.5, 10.0]])  # the enemy is 9.5 from the stalker
    health, hmax, shield = np.full(3, 100.0), np.full(3, 100.0), np.array([80.0, 50.0, 50.0])
    move = np.tile([0, 1, 1, 1, 1, 1], (2, 1))
    avail = ob.avail(pos, health, move, check_range=True)
    assert avail[0, 6] == 0  # stalker range 6 < 9.5
    obs = ob.observe(pos, health, hmax, shield, np.ones((2, 4)), avail, np.zeros((2, 7)), 0.0, _stream(0))
    nf_e = 4 + 2 + 3
    assert obs[0, 4 + 1] == pytest.approx(9.5 / 10.0)  # seen by the stalker (sight 10), distance / 10
    assert not obs[1, 4 : 4 + nf_e].any()  # the zealot (sight 9) is sqrt(9.5^2 + 1) away
    pos[2] = (11.9, 11.0)  # 1.9 from the zealot: inside min_attack_range 2, although a zealot's is 0.1
    assert ob.avail(pos, health, move, check_range=True)[1, 6] == 1
    pos[2] = (12.1, 11.0)
    assert ob.avail(pos, health, move, check_range=True)[1, 6] == 0


def test_epo_prob_obs_enemy_zero_leaves_only_the_tagging_agent() -> None:
    ob = _observer(["stalker", "stalker", "stalker"], ["stalker"], prob=0.0)
    pos = np.array([[10.0, 10.0], [11.0, 10.0], [30.0, 10.0], [14.0, 10.0]])  # agent 2 cannot see it
    health = np.full(4, 80.0)
    avail = ob.avail(pos, health, np.tile([0, 1, 1, 1, 1, 1], (3, 1)), check_range=True)
    args = (health, health, health, np.ones((3, 4)), avail, np.zeros((3, 7)), 0.0)
    seen = []
    for seed in range(20):
        ob.new_episode()
        obs = ob.observe(pos, *args, _stream(seed))
        seen.append(tuple(bool(obs[i, 4:13].any()) for i in range(3)))
    assert all(s[0] + s[1] == 1 and not s[2] for s in seen)  # exactly one of the two that can see it
    assert len(set(seen)) == 2  # which one tags it depends on the shuffled visiting order
    ob.new_episode()
    obs = ob.observe(pos, *args, _stream(0))
    pos[2] = (15.0, 10.0)  # agent 2 walks up: it stays blind to that enemy for the whole episode
    obs = ob.observe(pos, *args, _stream(1))
    assert not obs[2, 4:13].any()
    full = _observer(["stalker"] * 3, ["stalker"], prob=1.0)
    obs = full.observe(pos, *args, _stream(0))
    assert all(obs[i, 4:13].any() for i in range(3))


def test_medivac_heals_allies_and_bad_options() -> None:
    ob = _observer(["marine", "medivac"], ["marine", "marine"], race="T")
    pos = np.array([[10.0, 10.0], [12.0, 10.0], [13.0, 10.0], [30.0, 30.0]])
    avail = ob.avail(pos, np.full(4, 45.0), np.tile([0, 1, 1, 1, 1, 1], (2, 1)), check_range=True)
    assert avail[1, 6:].tolist() == [1, 0]  # heals marine 0 (range max(4, 2)), never itself
    assert avail[0, 6:].tolist() == [1, 0]  # marine range 5
    with pytest.raises(ValueError, match="num_fov_actions"):
        SMACv2Env("protoss_5_vs_5", conic_fov=True, num_fov_actions=0)
    with pytest.raises(ValueError, match="unknown SMAC backend 'game'; allowed: sim, auto, sc2"):
        SMACv2Env("protoss_5_vs_5", backend="game")
    with pytest.raises(ValueError, match="unknown SMACv2 scenario"):
        SMACv2Env("protoss_5v5")


def test_random_episodes_end_within_the_limit() -> None:
    env = SMACv2Env("protoss_5_vs_5", seed=0)
    rng = np.random.default_rng(0)
    for _ in range(2):
        env.reset()
        done, steps = False, 0
        while not done:
            acts = [rng.choice(np.flatnonzero(a)) for a in env.get_avail_actions()]
            _, done, _ = env.step(acts)
            steps += 1
        assert steps <= 200
    assert env.get_stats()["battles_game"] == 2


def test_an_unobserved_enemy_blanks_the_block_before_it_as_smacv2_does() -> None:
    ob = _observer(["stalker", "stalker"], ["stalker", "stalker"])
    pos = np.array([[10.0, 10.0], [11.0, 10.0], [14.0, 10.0], [30.0, 30.0]])  # enemy 1 is out of sight
    health = np.full(4, 80.0)
    avail = ob.avail(pos, health, np.tile([0, 1, 1, 1, 1, 1], (2, 1)), check_range=True)
    args = (health, health, health, np.ones((2, 4)), avail, np.zeros((2, 8)), 0.0, _stream(0))
    obs = ob.observe(pos, *args)
    assert not obs[:, 4 : 4 + 2 * 9].any()  # enemy 0 is in sight, yet its row is zero
    ob.new_episode()
    pos[[2, 3]] = pos[[3, 2]]  # swap: now the unseen enemy comes first, the seen one's row survives
    obs = ob.observe(pos, *args)
    assert obs[:, 4 + 9 : 4 + 18].any(axis=1).all() and not obs[:, 4 : 4 + 9].any()


def test_epo_tag_is_dropped_when_the_tagger_dies() -> None:
    ob = _observer(["stalker", "stalker", "stalker"], ["stalker"], prob=0.0)
    pos = np.array([[10.0, 10.0], [11.0, 10.0], [30.0, 10.0], [14.0, 10.0]])
    health = np.full(4, 80.0)
    move = np.tile([0, 1, 1, 1, 1, 1], (3, 1))
    rng = _stream(0)

    def obs_now() -> np.ndarray:
        avail = ob.avail(pos, health, move, check_range=True)
        return ob.observe(pos, health, health, health, np.ones((3, 4)), avail, np.zeros((3, 7)), 0.0, rng)

    first = [i for i in range(2) if obs_now()[i, 4:13].any()]
    assert len(first) == 1
    health[first[0]] = 0.0
    ob.after_step(health)
    other = 1 - first[0]
    assert obs_now()[other, 4:13].any()  # the survivor tags it now
    assert ob.tag_owner[0] == other
    health[3] = 0.0  # the enemy dies: its tag and observers are cleared
    ob.after_step(health)
    assert ob.tag_owner[0] == -1 and not ob.obs_enemies.any()


def test_pettingzoo_view_of_a_scenario() -> None:
    from pettingzoo.test import parallel_api_test

    from marl.envs.smac import pettingzoo_env

    pz = pettingzoo_env("terran_5_vs_5", seed=0)
    assert pz.observation_space(pz.possible_agents[0])["observation"].shape == (82,)
    parallel_api_test(pz, num_cycles=300)
    wide = SMACv2Env("zerg_5_vs_5", seed=0, fully_observable=True)
    lo, hi = wide.feature_bounds()["obs"]
    obs, _ = wide.reset()
    assert hi == pytest.approx(np.hypot(32, 32) / 8.0) and all(np.all(np.abs(o) <= hi) for o in obs)
    assert wide.feature_bounds()["state"][1] >= 1.5  # a hydralisk's cooldown over SMAC's normaliser 10


def _cap(**over) -> dict:
    cfg = {
        "n_units": 10,
        "n_enemies": 11,
        "team_gen": {
            "dist_type": "weighted_teams",
            "unit_types": ["marine", "marauder", "medivac"],
            "weights": [0.45, 0.45, 0.1],
            "exception_unit_types": ["medivac"],
            "observe": True,
        },
        "start_positions": {"dist_type": "surrounded_and_reflect", "p": 0.5, "map_x": 32, "map_y": 32},
    }
    cfg.update(over)
    return cfg


def test_smacv2_capability_config_form() -> None:
    env = SMACv2Env("10gen_terran", seed=2, capability_config=_cap())
    named = SMACv2Env("terran_10_vs_11", seed=2)
    assert env.get_env_info()["obs_shape"] == named.get_env_info()["obs_shape"] == 170
    assert [_episode_signature(env)[:3] for _ in range(3)] == [
        _episode_signature(named)[:3] for _ in range(3)
    ]
    default = build("env", "sc2", map_name="10gen_zerg", seed=0)  # sc2_gen_zerg.yaml: 5 vs 5
    assert (default.n_agents, default.n_enemies) == (5, 5)
    sur = _cap(start_positions={"dist_type": "surrounded", "map_x": 32, "map_y": 32})
    env = SMACv2Env("10gen_terran", seed=0, capability_config=sur)
    assert {_episode_signature(env)[2] for _ in range(5)} == {"surrounded"}
    bad = [
        (_cap(attack={"observe": True}), "not implemented"),
        (
            _cap(team_gen={**_cap()["team_gen"], "unit_types": ["marine", "stalker", "medivac"]}),
            "not on 10gen",
        ),
        (_cap(start_positions={"dist_type": "grid", "map_x": 32, "map_y": 32}), "not supported"),
        (_cap(start_positions={"dist_type": "reflect", "map_x": 64, "map_y": 64}), "32x32_flat"),
        (_cap(n_units="5"), "int >= 1"),
    ]
    for cfg, msg in bad:
        with pytest.raises(ValueError, match=msg):
            SMACv2Env("10gen_terran", capability_config=cfg)
    with pytest.raises(ValueError, match="10gen_protoss"):
        SMACv2Env("protoss_5_vs_5", capability_config=_cap())


@pytest.mark.parametrize("compiled", [True, False])
def test_an_attack_out_of_range_sends_no_command_as_smacv2(compiled: bool) -> None:
    """With action_mask=False an agent may pick an enemy out of its attack range; SMACv2 then sends no
    command (get_agent_action returns None when get_can_shoot fails): the agent keeps its order (here: idle),
    exactly as if it had stopped, while last_action records the chosen attack."""
    a = SMACv2Env("protoss_5_vs_5", seed=2, action_mask=False, compiled=compiled)
    b = SMACv2Env("protoss_5_vs_5", seed=2, action_mask=False, compiled=compiled)
    a.reset()
    b.reset()
    t = a.unit_table
    d = np.linalg.norm(t.enemies.pos[None] - t.allies.pos[:, None], axis=2)  # (agent, enemy)
    i, j = np.unravel_index(np.argmax(d), d.shape)
    assert d[i, j] > 7.0 and a.get_avail_actions()[i][6 + j] == 1  # far, yet selectable
    acts = [1] * 5
    acts[i] = 6 + int(j)
    a.step(acts)
    b.step([1] * 5)
    np.testing.assert_array_equal(a.unit_table.allies.pos, b.unit_table.allies.pos)
    assert a.last_action[i, 6 + j] == 1


def test_conic_field_of_view_as_smacv2() -> None:
    """conic_fov: SMACv2's sizes, actions 6..6+F-1 turn the cone (no command to the engine), the cone test
    of is_position_in_cone, the own direction in the observation and the state."""
    from marl.envs.smac.smacv2.reference import fov_directions, in_cone

    h = np.pi / 12  # half of SMACv2's conic_fov_angle 2 pi / 12
    assert in_cone(0, 0, 1, 0, 5, np.tan(0.9 * h) * 5, 9, h) and not in_cone(
        0, 0, 1, 0, 5, np.tan(1.1 * h) * 5, 9, h
    )
    assert not in_cone(0, 0, 1, 0, 9.5, 0, 9, h)  # beyond the range
    assert in_cone(0, 0, 1, 0, -5, 0.1, 9, h)  # SMACv2 compares arctangents: the opposite side counts too
    assert in_cone(0, 0, 0, 1, 0.1, 5, 9, h) and not in_cone(0, 0, 0, 1, -3, 0.1, 9, h)
    np.testing.assert_allclose(fov_directions(4), [[1, 0], [0, 1], [-1, 0], [0, -1]], atol=1e-12)
    for name in ("protoss_5_vs_5", "terran_10_vs_11"):
        sc = SCENARIOS[name]
        env = SMACv2Env(name, seed=0, conic_fov=True)
        want = smacv2_sizes(sc.n_units, sc.n_enemies, sc.race, n_fov=12)
        assert (env.get_obs_size(), env.get_state_size(), env.n_actions) == want
    env = SMACv2Env("protoss_5_vs_5", seed=1, conic_fov=True, num_fov_actions=4)
    still = SMACv2Env("protoss_5_vs_5", seed=1, conic_fov=True, num_fov_actions=4)
    obs, _ = env.reset()
    still.reset()
    own = slice(-5, -3)  # own direction: after the own position, before the 3 type bits
    assert all((o[own] == [1, 0]).all() for o in obs)  # every agent faces (1, 0) at reset
    avail = np.array(env.get_avail_actions())
    assert (avail[:, 6:10] == 1).all()  # the 4 turns are always available to the living
    env.step([7, 8, 9, 6, 1])  # turn to directions 1, 2, 3, 0; agent 4 stops
    still.step([1] * 5)
    np.testing.assert_array_equal(env.unit_table.allies.pos, still.unit_table.allies.pos)  # no command
    obs = env.get_obs()
    np.testing.assert_allclose([o[own] for o in obs[:4]], fov_directions(4)[[1, 2, 3, 0]], atol=1e-7)
    allies = env.get_state_dict()["allies"]
    np.testing.assert_allclose(allies[:4, 5:7], fov_directions(4)[[1, 2, 3, 0]], atol=1e-7)
    assert env.action_name(0, 7) == "turn field of view 1" and env.action_name(0, 10) == "attack enemy 0"
