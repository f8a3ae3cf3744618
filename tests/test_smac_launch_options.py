"""SMAC's game-process arguments (``game_version``, ``move_amount``, window size, ``debug``): a SMAC config
such as pymarl's ``envs/sc2.yaml`` builds the env unchanged, and each value is checked."""

from __future__ import annotations

import logging

import pytest
from shared import last_action_rewards  # tests/ is on sys.path under pytest

from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.options import LaunchOptions, SmacOptions

# env_args of oxwhirl/pymarl's src/config/envs/sc2.yaml at commit a8f171b (the SMAC paper's settings), as
# pymarl passes them to smac.env.StarCraft2Env (plus the seed its main.py adds)
PYMARL_SC2_ENV_ARGS = dict(
    continuing_episode=False, difficulty="7", game_version=None, map_name="3m", move_amount=2,
    obs_all_health=True, obs_instead_of_state=False, obs_last_action=False, obs_own_health=True,
    obs_pathing_grid=False, obs_terrain_height=False, obs_timestep_number=False, reward_death_value=10,
    reward_defeat=0, reward_negative_scale=0.5, reward_only_positive=True, reward_scale=True,
    reward_scale_rate=20, reward_sparse=False, reward_win=200, replay_dir="", replay_prefix="",
    state_last_action=True, state_timestep_number=False, step_mul=8, seed=1, heuristic_ai=False, debug=False,
)  # fmt: skip


def test_pymarl_sc2_config_builds_the_env_and_plays_as_without_it() -> None:
    env = StarCraft2Env(backend="sim", **PYMARL_SC2_ENV_ARGS)
    plain = StarCraft2Env(map_name="3m", backend="sim", seed=1)
    assert env.get_env_info() == plain.get_env_info()
    assert last_action_rewards(env, 5) == last_action_rewards(plain, 5)
    assert env.launch == LaunchOptions()


@pytest.mark.parametrize(
    "flag, value, says",
    [
        ("move_amount", 3, "allowed: 2"),
        ("move_amount", True, "allowed: 2"),
        ("window_size_x", 0, "positive int"),
        ("window_size_y", 1.5, "positive int"),
        ("debug", "yes", "bool"),
        ("game_version", 4.6, "version string"),
    ],
)
def test_bad_launch_values_are_refused_with_what_is_allowed(flag: str, value: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        StarCraft2Env(map_name="3m", backend="sim", **{flag: value})


def test_smac_options_skip_launch_flags_and_unknown_flags_list_them() -> None:
    assert SmacOptions.from_flags(move_amount=2.0, debug=True) == SmacOptions()
    with pytest.raises(ValueError, match="Did you mean 'game_version'.*window_size_x"):
        SmacOptions.from_flags(game_versoin="4.6.2")


def test_debug_logs_every_step(caplog: pytest.LogCaptureFixture) -> None:
    env = StarCraft2Env(map_name="3m", backend="sim", seed=0, debug=True)
    with caplog.at_level(logging.DEBUG, logger="marl.envs.smac"):
        n = len(last_action_rewards(env, 3))
    steps = [r.getMessage() for r in caplog.records if r.name == "marl.envs.smac"]
    assert len(steps) == n == 3
    assert steps[0].startswith("3m step 1: actions [") and "reward" in steps[0]


def test_game_version_on_the_embedded_engine_is_announced(capsys: pytest.CaptureFixture[str]) -> None:
    StarCraft2Env(map_name="3m", backend="sim", game_version="4.6.2")
    assert "game_version=4.6.2 applies to the real game" in capsys.readouterr().out


def test_game_version_and_window_reach_the_game_launcher() -> None:
    pytest.importorskip("pysc2")
    from marl.envs.smac.env import make_engine
    from marl.envs.smac.maps import load_map
    from marl.envs.smac.sc2 import engine as sc2_engine

    seen = {}
    real = sc2_engine.Pysc2Launcher.__init__

    def spy(self, game_version=None, window_size=(1920, 1200)):
        seen.update(game_version=game_version, window_size=window_size)
        real(self, game_version, window_size)

    launch = LaunchOptions(game_version="4.6.2", window_size_x=640, window_size_y=480)
    mp = pytest.MonkeyPatch()
    mp.setattr(sc2_engine.Pysc2Launcher, "__init__", spy)
    mp.setattr("marl.envs.smac.env.resolve_backend", lambda backend, name: ("sc2", "the game"))
    try:
        make_engine(load_map("3m"), "sc2", seed=0, launch=launch)
    finally:
        mp.undo()
    assert seen == {"game_version": "4.6.2", "window_size": (640, 480)}
