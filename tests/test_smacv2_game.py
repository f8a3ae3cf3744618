"""SMACv2 scenarios on the real game (``Sc2GenEngine``, ``SMACv2Env(backend="sc2")``) against a
protocol-level fake of StarCraft II answering with real s2clientprotocol messages (tests/sc2_fakes.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pysc2", reason="pysc2 is not installed (pip install -e '.[sc2]')")

from sc2_fakes import PB, STOCK_IDS, FakeGenController, FakeLauncher  # noqa: E402

from marl.envs.factory import EnvFactory  # noqa: E402
from marl.envs.smac.sc2 import Sc2MapMismatch, Sc2Unavailable  # noqa: E402
from marl.envs.smac.sc2.gen_engine import Sc2GenEngine, Sc2SpawnTimeout  # noqa: E402
from marl.envs.smac.sim.avail import sample_available  # noqa: E402
from marl.envs.smac.smacv2.env import SMACv2Env, draw_episode  # noqa: E402
from marl.envs.smac.smacv2.scenarios import get_scenario  # noqa: E402
from marl.envs.smac.types import GEN_RL_UNIT_ORDER  # noqa: E402

N_TYPES = 1970  # the fake game's unit-type count: the RL types are ids 1961..1969


def game_env(name: str, seed: int = 0, launcher: FakeLauncher | None = None, **kw) -> SMACv2Env:
    """A SMACv2Env whose episodes play on a fake game (a first spec only fixes race and counts)."""
    launcher = launcher or FakeLauncher(lambda: FakeGenController(N_TYPES))
    first, _ = draw_episode(np.random.default_rng(0), get_scenario(name))
    engine = Sc2GenEngine(first, seed=seed, launcher=launcher, **kw)
    return SMACv2Env(name, seed=seed, engine=engine)


def _creates(ctrl: FakeGenController) -> list:
    return [c.create_unit for cmds in ctrl.requests("debug") for c in cmds if c.HasField("create_unit")]


def test_reset_launches_32x32_flat_and_creates_the_drawn_units_as_smacv2() -> None:
    env = game_env("terran_5_vs_5", seed=3)
    sim = SMACv2Env("terran_5_vs_5", seed=3)  # the same seed draws the same teams and positions
    env.reset()
    sim.reset()
    ctrl = env._engine._launcher.current
    (create,) = ctrl.requests("create_game")
    assert create.local_map.map_path == "SMAC_Maps/32x32_flat.SC2Map" and create.random_seed == 3
    assert (create.player_setup[1].race, create.player_setup[1].difficulty) == (
        PB.common_pb.Terran,
        PB.sc_pb.VeryHard,
    )
    assert ctrl.requests("join_game")[0].race == PB.common_pb.Terran
    stats, sim_stats = env.get_stats(), sim.get_stats()
    for k in ("ally_team", "enemy_team", "start_positions"):
        assert stats[k] == sim_stats[k]
    made = _creates(ctrl)
    base = N_TYPES - 9  # smacv2: the first RL id is the game's unit-type count minus 9
    allies = [c for c in made if c.owner == 1]
    enemies = [c for c in made if c.owner == 2]
    assert [GEN_RL_UNIT_ORDER[c.unit_type - base] for c in allies] == stats["ally_team"]
    assert [c.unit_type for c in enemies] == [STOCK_IDS[u] for u in stats["enemy_team"]]
    assert all(c.quantity == 1 for c in made)
    spec = sim.spec
    want = [g.spawn for g in spec.allies] + [g.spawn for g in spec.enemies]
    got = [(c.pos.x, c.pos.y) for c in allies + enemies]
    np.testing.assert_allclose(got, want, rtol=1e-6)  # float32 on the wire
    # agents sorted by (unit type, x, y) of where the game put them
    t = env.unit_table
    keys = [(GEN_RL_UNIT_ORDER.index(u), *p) for u, p in zip(t.allies.unit_type, t.allies.pos, strict=True)]
    assert keys == sorted(keys)
    assert list(t.enemies.unit_type) == stats["enemy_team"]


def test_episodes_on_the_game_kill_everything_then_create_the_next_team() -> None:
    env = game_env("zerg_10_vs_11", seed=1)
    rng = np.random.default_rng(0)
    teams, launched = [], 0
    for _ in range(3):
        obs, state = env.reset()
        assert np.array(obs).shape == (10, env.get_obs_size()) and state.shape == (env.get_state_size(),)
        teams.append(tuple(env.get_stats()["ally_team"]))
        for _ in range(3):
            avail = np.asarray(env.get_avail_actions(), dtype=bool)[None]
            env.step(sample_available(avail, rng.random((1, env.n_agents)))[0])
        ctrl = env._engine._launcher.current
        launched = len(env._engine._launcher.controllers)
        assert len(ctrl.units) == 21
    assert launched == 1  # one game for every episode
    kills = [c.kill_unit for cmds in ctrl.requests("debug") for c in cmds if c.HasField("kill_unit")]
    assert len(kills) == 2 and all(len(k.tag) == 21 for k in kills)
    assert len(_creates(ctrl)) == 3 * 21
    assert len(set(teams)) > 1


def test_game_observations_equal_the_numpy_reference_on_the_game() -> None:
    """The compiled path and the NumPy reference, each on its own fake game with the game's map adopted
    (a pathing grid with a blocked column), agree element for element."""
    from sc2_fakes import game_info

    grid = np.ones((32, 32), dtype=bool)
    grid[20, :] = False
    info = game_info(grid_xy=grid)

    def launcher() -> FakeLauncher:
        return FakeLauncher(lambda: FakeGenController(N_TYPES, info=info))

    fast = game_env("protoss_5_vs_5", seed=4, launcher=launcher())
    first, _ = draw_episode(np.random.default_rng(0), get_scenario("protoss_5_vs_5"))
    ref = SMACv2Env(
        "protoss_5_vs_5", seed=4, compiled=False, engine=Sc2GenEngine(first, seed=4, launcher=launcher())
    )
    rng = np.random.default_rng(1)
    for _episode in range(2):
        fast.reset()
        ref.reset()
        assert not fast.spec.pathing_grid[20].any() and not ref.spec.pathing_grid[20].any()
        for env in (fast, ref):  # the game puts agent 0 just west of the blocked column
            tag = int(env._engine._tracker.ally_tags[0])
            unit = next(u for u in env._engine._launcher.current.units if u.tag == tag)
            unit.x, unit.y = 19.5, 10.0
        for t in range(4):
            np.testing.assert_array_equal(np.array(fast.get_obs()), np.array(ref.get_obs()))
            np.testing.assert_array_equal(fast.get_state(), ref.get_state())
            np.testing.assert_array_equal(
                np.array(fast.get_avail_actions()), np.array(ref.get_avail_actions())
            )
            if t > 0:  # agent 0 (alive: the fake game deals no damage) cannot move east into the column
                assert fast.get_avail_actions()[0][2:6] == [1, 1, 0, 1]
            avail = np.asarray(fast.get_avail_actions(), dtype=bool)[None]
            acts = sample_available(avail, rng.random((1, fast.n_agents)))[0]
            acts[0] = 1 if avail[0, 0, 1] else 0  # agent 0 stops (the fake game does not move units)
            assert fast.step(acts) == ref.step(acts)


def test_actions_become_raw_commands_with_the_game_tags() -> None:
    env = game_env("terran_5_vs_5", seed=0)
    env.reset()
    eng = env._engine
    team = env.get_stats()["ally_team"]
    medic = team.index("medivac") if "medivac" in team else None
    acts = [1] * 5
    avail = np.array(env.get_avail_actions())
    shooter = next((i for i in range(5) if i != medic and avail[i, 6:].any()), None)
    if shooter is not None:
        acts[shooter] = 6 + int(np.flatnonzero(avail[shooter, 6:])[0])
    env.step(acts)
    (req,) = eng._launcher.current.requests("actions")[-1:]
    cmds = [a.action_raw.unit_command for a in req.actions]
    assert len(cmds) == 5 and all(
        list(c.unit_tags) == [int(eng._tracker.ally_tags[i])] for i, c in enumerate(cmds)
    )
    for i, c in enumerate(cmds):
        if i == shooter:
            assert c.ability_id == 23 and c.target_unit_tag == int(eng._tracker.enemy_tags[acts[i] - 6])
        else:
            assert c.ability_id == 4  # stop


def test_reset_never_hangs_and_relaunches_a_stuck_game() -> None:
    stuck = FakeLauncher(lambda: FakeGenController(N_TYPES, create_delay=10**9))  # units never appear
    env = game_env("protoss_5_vs_5", launcher=stuck, max_relaunches=2, spawn_timeout_loops=20)
    with pytest.raises(Sc2SpawnTimeout, match="after 2 relaunches"):
        env.reset()
    assert len(stuck.controllers) == 3 and all(c.loop <= 25 for c in stuck.controllers)
    launcher = FakeLauncher(lambda: FakeGenController(N_TYPES))
    env = game_env("protoss_5_vs_5", launcher=launcher, clear_timeout_loops=10)
    env.reset()
    launcher.current.ignore_kills = True  # the next reset cannot clear the map: relaunch, then go on
    env.reset()
    assert len(launcher.controllers) == 2 and env._engine.restarts == 1
    assert len(launcher.current.units) == 10


def test_unknown_rl_ids_and_bad_episodes_are_refused() -> None:
    env = game_env("zerg_5_vs_5")
    env.reset()
    eng = env._engine
    eng.rl_base += 3  # ids that do not match the map's RL types
    with pytest.raises(Sc2MapMismatch):
        eng._tracker.__class__(eng.spec, rl_base=eng.rl_base).start(
            [u.proto() for u in eng._launcher.current.units]
        )
    other, _ = draw_episode(np.random.default_rng(0), get_scenario("zerg_10_vs_10"))
    with pytest.raises(ValueError, match="cannot follow"):
        eng.new_episode(other)
    with pytest.raises(ValueError, match="SMACv2 episode maps"):
        from marl.envs.smac.maps import load_map

        Sc2GenEngine(load_map("3m"))


def _fake_install(root: Path, maps: tuple[str, ...]) -> None:
    (root / "Versions" / "Base75689").mkdir(parents=True)
    (root / "Versions" / "Base75689" / "SC2_x64").write_bytes(b"")
    (root / "Maps" / "SMAC_Maps").mkdir(parents=True)
    for m in maps:
        (root / "Maps" / "SMAC_Maps" / f"{m}.SC2Map").write_bytes(b"")


def test_backend_choice_needs_smacv2s_map(tmp_path, monkeypatch) -> None:
    import marl.envs.smac.env as env_module

    monkeypatch.setattr(env_module, "_ANNOUNCED", set())
    _fake_install(tmp_path / "v1", ("3m",))  # the game with SMAC's maps only
    monkeypatch.setenv("SC2PATH", str(tmp_path / "v1"))
    with pytest.raises(Sc2Unavailable, match="32x32_flat.SC2Map.*SMACv2's SMAC_Maps"):
        SMACv2Env("protoss_5_vs_5", backend="sc2")
    assert SMACv2Env("protoss_5_vs_5", backend="auto").backend == "sim"
    factory = EnvFactory("sc2", "protoss_5_vs_5", "auto", {}, seed=0, offset=0)
    assert factory.batched(2) is not None  # no game for SMACv2: the batched embedded engine
    _fake_install(tmp_path / "v2", ("3m", "32x32_flat"))
    monkeypatch.setenv("SC2PATH", str(tmp_path / "v2"))
    assert SMACv2Env("protoss_5_vs_5", backend="auto").backend == "sc2"
    assert factory.batched(2) is None  # the game: one SMACv2Env per row
    assert SMACv2Env("protoss_5_vs_5", backend="sim").backend == "sim"
