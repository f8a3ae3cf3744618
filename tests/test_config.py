"""Layered config loading: layer order, map presets, overrides, coercion, errors, round trips, CLI."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from marl.config import (
    ConfigError,
    config_from_dict,
    config_to_dict,
    dump_config,
    load_config,
    load_saved_config,
    parse_override,
)
from marl.config.cli import build_arg_parser, config_from_args
from marl.config.schema import LEARNER_CONFIGS, DQNConfig, MADDPGConfig, PPOConfig, QLearnerConfig


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))


@pytest.fixture()
def cfg_dir(tmp_path: Path) -> Path:
    """A small config tree whose layers all set learner.lr, so the winning layer is visible."""
    d = tmp_path / "configs"
    write(d / "default.yaml", {"seed": 7, "learner": {"lr": 0.1}, "env": {"name": "e1", "map_name": "m0"}})
    write(
        d / "envs" / "e1.yaml",
        {"t_max": 111, "learner": {"lr": 0.2}, "env": {"args": {"a": 1, "b": {"c": 2}}}},
    )
    write(d / "envs" / "e2.yaml", {"t_max": 222})
    write(d / "algs" / "a1.yaml", {"learner": {"lr": 0.3, "td_lambda": 0.6}, "mixer": {"name": "qmix"}})
    write(d / "algs" / "a2.yaml", {"mixer": {"name": "vdn"}, "env": {"name": "e2"}})
    write(
        d / "maps" / "hard.yaml",
        {"learner": {"lr": 0.4}, "by_alg": {"a1": {"learner": {"td_lambda": 0.3}}, "a2": {"seed": 99}}},
    )
    return d


def test_layer_order_default_env_alg_map_cli(cfg_dir: Path) -> None:
    cfg = load_config("a1", config_dir=cfg_dir)
    assert (cfg.seed, cfg.t_max, cfg.learner.lr, cfg.env.name, cfg.env.map_name) == (7, 111, 0.3, "e1", "m0")
    assert cfg.env.args == {"a": 1, "b": {"c": 2}}
    cfg = load_config("a1", map_name="hard", config_dir=cfg_dir)
    assert (cfg.learner.lr, cfg.learner.td_lambda, cfg.seed, cfg.env.map_name) == (0.4, 0.3, 7, "hard")
    cfg = load_config("a1", map_name="hard", overrides=["learner.lr=0.5"], config_dir=cfg_dir)
    assert cfg.learner.lr == 0.5


def test_map_preset_alg_specific_part_only_for_that_alg(cfg_dir: Path) -> None:
    a2 = load_config("a2", map_name="hard", config_dir=cfg_dir)
    assert a2.seed == 99 and a2.learner.td_lambda == 0.6  # schema default td_lambda, a1's part not applied
    assert a2.mixer.name == "vdn"


def test_alg_file_env_specific_part_only_in_that_env(cfg_dir: Path) -> None:
    write(cfg_dir / "algs" / "a3.yaml", {"learner": {"lr": 0.3}, "by_env": {"e2": {"learner": {"lr": 0.35}}}})
    assert load_config("a3", config_dir=cfg_dir).learner.lr == 0.3  # env e1: no by_env part
    assert load_config("a3", env="e2", config_dir=cfg_dir).learner.lr == 0.35
    assert load_config("a3", env="e2", map_name="hard", config_dir=cfg_dir).learner.lr == 0.4  # map wins
    write(cfg_dir / "algs" / "bad.yaml", {"by_env": {"e1": 3}})
    with pytest.raises(ConfigError, match="by_env must map environment names to settings"):
        load_config("bad", config_dir=cfg_dir)


def test_mappo_takes_the_papers_smac_setting_only_on_smac() -> None:
    smac, mpe = load_config("mappo", map_name="3m"), load_config("mappo", env="mpe", map_name="simple_spread")
    assert (smac.learner.batch_size, smac.learner.ppo_epochs) == (128, 15)
    assert (mpe.learner.batch_size, mpe.learner.ppo_epochs) == (32, 5)


def test_env_chosen_by_alg_file_cli_or_argument(cfg_dir: Path) -> None:
    assert load_config("a2", config_dir=cfg_dir).t_max == 222  # the alg file names env e2
    assert load_config("a1", overrides=["env.name=e2"], config_dir=cfg_dir).t_max == 222
    assert load_config("a1", env="e2", config_dir=cfg_dir).env.name == "e2"
    with pytest.raises(
        ConfigError, match="unknown env 'e3'.*did you mean 'e1'|unknown env 'e3'.*available: e1, e2"
    ):
        load_config("a1", env="e3", config_dir=cfg_dir)
    with pytest.raises(ConfigError, match="unknown alg 'a3'.*available: a1, a2"):
        load_config("a3", config_dir=cfg_dir)


def test_cli_shortcuts_and_coercion(cfg_dir: Path) -> None:
    cfg = load_config(
        "a1",
        overrides=["t_max=2e4", "lr=5e-4", "results_dir=/tmp/run", "use_jit=no", "double_q=0", "seed=3"],
        config_dir=cfg_dir,
    )
    assert cfg.t_max == 20000 and isinstance(cfg.t_max, int)
    assert cfg.learner.lr == pytest.approx(5e-4)
    assert cfg.results_dir == "/tmp/run"
    assert cfg.learner.use_jit is False and cfg.learner.double_q is False
    for text, expected in [("true", True), ("YES", True), ("1", True), ("off", False), ("False", False)]:
        assert (
            load_config("a1", overrides=[f"log.progress={text}"], config_dir=cfg_dir).log.progress is expected
        )


def test_nested_dict_field_keys(cfg_dir: Path) -> None:
    cfg = load_config(
        "a1",
        overrides=["env.args.obs_last_action=true", "env.args.b.d=3.5", "env.args.a=x"],
        config_dir=cfg_dir,
    )
    assert cfg.env.args == {"a": "x", "b": {"c": 2, "d": 3.5}, "obs_last_action": True}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("t_max=2.5", r"t_max must be of type int.*2\.5"),
        ("t_max=lots", r"t_max must be of type int"),
        ("learner.lr=fast", r"learner\.lr must be of type float"),
        ("log.progress=maybe", r"log\.progress must be of type bool.*true/false"),
        ("learner.lrr=0.1", r"unknown config key 'learner\.lrr' \(did you mean 'learner\.lr'\?\)"),
        ("t_maxx=5", r"command line t_maxx=5: unknown config key 't_maxx' \(did you mean 't_max'\?\)"),
        ("name=rnn", r"key 'name' is ambiguous"),
        ("gamma=1.5", r"learner\.gamma must be in \[0, 1\]"),
        ("noequals", r"must look like key=value"),
    ],
)
def test_bad_overrides_fail_with_helpful_messages(cfg_dir: Path, override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config("a1", overrides=[override], config_dir=cfg_dir)


def test_unknown_yaml_key_names_file_and_suggestion(cfg_dir: Path) -> None:
    write(cfg_dir / "algs" / "bad.yaml", {"learner": {"td_lamda": 0.5}})
    with pytest.raises(
        ConfigError, match=r"bad\.yaml: unknown config key 'learner\.td_lamda'.*'learner\.td_lambda'"
    ):
        load_config("bad", config_dir=cfg_dir)
    write(cfg_dir / "algs" / "bad2.yaml", {"learner": 3})
    with pytest.raises(ConfigError, match=r"bad2\.yaml: learner is a section"):
        load_config("bad2", config_dir=cfg_dir)
    write(cfg_dir / "algs" / "bad3.yaml", {"learner": {"batch_size": "big"}})
    with pytest.raises(ConfigError, match=r"bad3\.yaml: learner\.batch_size must be of type int"):
        load_config("bad3", config_dir=cfg_dir)


def test_parse_override() -> None:
    assert parse_override("a.b=value") == ("a.b", "value")
    assert parse_override(" lr = 1e-3 ") == ("lr", "1e-3")
    assert parse_override("env.args.x=a=b") == ("env.args.x", "a=b")
    with pytest.raises(ConfigError):
        parse_override("=3")


def test_config_is_frozen_and_round_trips(tmp_path: Path) -> None:
    cfg = load_config("qmix", map_name="6h_vs_8z", overrides=["env.args.reward_sparse=true"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 3  # type: ignore[misc]
    assert config_from_dict(config_to_dict(cfg)) == cfg
    text = dump_config(cfg, tmp_path / "run")
    assert (tmp_path / "run" / "config.yaml").read_text() == text == dump_config(cfg)
    assert load_saved_config(tmp_path / "run") == cfg
    assert config_from_dict(yaml.safe_load(text)) == cfg
    with pytest.raises(ConfigError, match="unknown config key 'learner.nope'"):
        config_from_dict({"learner": {"nope": 1}})


def test_repo_algs_follow_pymarl2_defaults() -> None:
    for alg, mixer in [("qmix", "qmix"), ("vdn", "vdn"), ("iql", "none")]:
        cfg = load_config(alg)
        assert cfg.alg == alg and cfg.mixer.name == mixer
        assert (cfg.learner.optimizer, cfg.learner.lr, cfg.learner.td_lambda) == ("adam", 1e-3, 0.6)
        assert (cfg.learner.batch_size, cfg.learner.buffer_size, cfg.runner.batch_size_run) == (128, 5000, 8)
        assert (cfg.exploration.epsilon_start, cfg.exploration.epsilon_finish) == (1.0, 0.05)
        assert cfg.exploration.epsilon_anneal_time == 100_000
        assert (cfg.learner.target_update_interval, cfg.learner.grad_norm_clip) == (200, 10.0)
        assert cfg.agent.hidden_dim == 64
        assert (cfg.env.name, cfg.t_max, cfg.log.test_interval, cfg.log.test_nepisode) == (
            "sc2",
            2_050_000,
            10_000,
            32,
        )
    q = load_config("qmix")
    assert (q.mixer.embed_dim, q.mixer.hypernet_dim) == (32, 64)
    hard = load_config("qmix", map_name="6h_vs_8z")
    assert (hard.learner.td_lambda, hard.exploration.epsilon_anneal_time) == (0.3, 500_000)
    assert hard.env.map_name == "6h_vs_8z"
    assert load_config("vdn", map_name="3s5z_vs_3s6z").learner.batch_size == 64
    assert load_config("iql", map_name="3s5z_vs_3s6z").learner.batch_size == 128


def test_arg_parser_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_arg_parser("train_qmix.py", "qmix", "Train QMIX")
    args = parser.parse_args(["--map", "6h_vs_8z", "--seed", "5", "--results-dir", str(tmp_path), "lr=5e-4"])
    cfg = config_from_args(args)
    assert (cfg.alg, cfg.env.map_name, cfg.seed, cfg.results_dir) == ("qmix", "6h_vs_8z", 5, str(tmp_path))
    assert cfg.learner.lr == pytest.approx(5e-4) and cfg.learner.td_lambda == 0.3
    run = tmp_path / "run1"
    dump_config(cfg, run)
    resumed = config_from_args(parser.parse_args(["--resume", str(run), "t_max=3000000"]))
    assert resumed.t_max == 3_000_000 and resumed.learner.lr == pytest.approx(5e-4) and resumed.seed == 5
    with pytest.raises(ConfigError, match="--map 3m differs from the resumed run"):
        config_from_args(parser.parse_args(["--resume", str(run), "--map", "3m"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    out = capsys.readouterr().out
    assert "--resume RUN_DIR" in out and "learner.td_lambda" in out and "SMAC maps:" in out
    algs_line = next(line for line in out.splitlines() if line.startswith("algorithms: "))
    assert {"iql", "qmix", "vdn"} <= set(algs_line.removeprefix("algorithms: ").split(", "))


def test_gymnasium_id_as_env_means_the_gym_adapter():
    cfg = load_config("dqn", env="CartPole-v1")
    assert (cfg.env.name, cfg.env.map_name) == ("gym", "CartPole-v1")
    with pytest.raises(ConfigError, match="unknown env 'CartPol-v1'"):
        load_config("dqn", env="CartPol-v1")


def test_learner_section_holds_only_its_family() -> None:
    """A run's learner section is its learner's family: config.yaml of QMIX has no ppo_clip, MAPPO's no
    td_lambda; a key of another family is an error naming the allowed keys, except where a map preset
    (shared by every algorithm) or a saved config of an older version sets it."""
    q, ppo, dqn = load_config("qmix"), load_config("mappo"), load_config("dqn")
    assert (type(q.learner), type(ppo.learner), type(dqn.learner)) == (QLearnerConfig, PPOConfig, DQNConfig)
    assert "ppo_clip" not in dump_config(q) and "td_lambda:" in dump_config(q)
    assert "td_lambda" not in dump_config(ppo) and "ppo_clip:" in dump_config(ppo)
    assert type(load_config("maddpg").learner) is MADDPGConfig
    with pytest.raises(
        ConfigError, match=r"learner\.ppo_clip is not read by learner 'q_learner'.*learner\.td_lambda"
    ):
        load_config("qmix", overrides=["ppo_clip=0.1"])
    with pytest.raises(
        ConfigError, match=r"learner\.td_lambda is not read by learner 'ppo'.*learner\.ppo_clip"
    ):
        load_config("mappo", overrides=["learner.td_lambda=0.3"])
    # 6h_vs_8z's top level sets td_lambda for every algorithm: MAPPO, which does not read it, runs
    assert type(load_config("mappo", map_name="6h_vs_8z").learner) is PPOConfig
    # a run folder written when the learner section held every field resumes with its own family
    old = config_to_dict(q)
    old["learner"].update({"ppo_clip": 0.3, "critic_lr": 5e-4, "td_loss": "mse"})
    restored = config_from_dict(old)
    assert restored == q and restored.learner == q.learner
    assert load_config(base=old, overrides=["learner.lr=5e-4"]).learner.lr == pytest.approx(5e-4)


def test_every_learner_field_is_read_by_its_learner() -> None:
    """Each family's fields appear in the learner code that uses them (no field carried for nothing)."""
    root = Path(__file__).resolve().parents[1] / "marl"
    code = {
        QLearnerConfig: ["learners/q_learner.py", "learners/q_chunked.py"],
        PPOConfig: ["learners/ppo_learner.py", "learners/pg_learner.py"],
        DQNConfig: ["learners/dqn_learner.py", "learners/transitions.py"],
        MADDPGConfig: ["learners/maddpg_learner.py", "learners/transitions.py", "learners/optim.py"],
    }
    shared = "".join((root / f).read_text() for f in ["trainer.py", "learners/optim.py"])
    for family, files in code.items():
        text = "".join((root / f).read_text() for f in files) + shared
        unread = [f.name for f in dataclasses.fields(family) if f.name != "name" and f".{f.name}" not in text]
        assert not unread, (family.__name__, unread)
    assert LEARNER_CONFIGS["q_learner"] is QLearnerConfig


@pytest.mark.parametrize(
    ("alg", "mixer"), [("qmix_smac_paper", "qmix"), ("vdn_smac_paper", "vdn"), ("iql_smac_paper", "none")]
)
def test_smac_paper_presets_are_pymarls_paper_settings(alg: str, mixer: str) -> None:
    # oxwhirl/pymarl a8f171b: RMSprop 5e-4 (alpha 0.99, eps 1e-5), 32 episodes from a 5000-episode buffer,
    # one-step double-Q targets, target copy every 200 episodes, eps 1 -> 0.05 over 50k steps, one env, 32
    # greedy test episodes every 10k steps; the same on every map (the 6h_vs_8z preset is pymarl2's)
    for map_name in ("3m", "6h_vs_8z", "3s5z_vs_3s6z"):
        c = load_config(alg, map_name=map_name)
        lc = c.learner
        assert (lc.optimizer, lc.lr, lc.optim_alpha, lc.optim_eps) == ("rmsprop", 5e-4, 0.99, 1e-5)
        assert (lc.batch_size, lc.buffer_size, lc.td_lambda, lc.double_q) == (32, 5000, 0.0, True)
        assert (lc.target_update_interval, lc.grad_norm_clip, lc.gamma) == (200, 10.0, 0.99)
        assert (c.exploration.epsilon_start, c.exploration.epsilon_finish) == (1.0, 0.05)
        assert c.exploration.epsilon_anneal_time == 50_000
        assert (c.runner.name, c.runner.batch_size_run) == ("episode", 1)
        assert (c.log.test_interval, c.log.test_nepisode, c.t_max) == (10_000, 32, 2_050_000)
        assert (c.agent.hidden_dim, c.agent.obs_last_action, c.agent.obs_agent_id) == (64, True, True)
        assert c.mixer.name == mixer and c.env.map_name == map_name
    q = load_config("qmix_smac_paper").mixer
    assert (q.embed_dim, q.hypernet_layers, q.hypernet_dim) == (32, 2, 64)


def test_coma_smac_paper_preset_is_pymarls_coma() -> None:
    # pymarl a8f171b coma.yaml: 8 envs, 8 fresh episodes, RMSprop 5e-4, TD(0.8), target every 200 critic
    # steps, eps floor 0.5 -> 0.01 over 100k, state without last actions (the critic adds them)
    c = load_config("coma_smac_paper", map_name="6h_vs_8z")
    lc = c.learner
    assert (lc.name, lc.optimizer, lc.lr, lc.td_lambda, lc.target_update_interval) == (
        "coma",
        "rmsprop",
        5e-4,
        0.8,
        200,
    )
    assert (lc.batch_size, c.runner.batch_size_run, lc.entropy_coef) == (8, 8, 0.0)
    assert (c.exploration.epsilon_start, c.exploration.epsilon_finish) == (0.5, 0.01)
    assert c.exploration.epsilon_anneal_time == 100_000 and c.env.args["state_last_action"] is False


def test_alg_file_may_leave_map_presets_out(cfg_dir: Path) -> None:
    (cfg_dir / "algs" / "plain.yaml").write_text("map_presets: false\nlearner: {lr: 0.1}\n")
    (cfg_dir / "maps" / "m.yaml").write_text("learner: {lr: 0.5}\n")
    assert load_config("plain", map_name="m", config_dir=cfg_dir).learner.lr == 0.1
    (cfg_dir / "algs" / "bad.yaml").write_text("map_presets: sometimes\n")
    with pytest.raises(ConfigError, match="map_presets must be true or false"):
        load_config("bad", map_name="m", config_dir=cfg_dir)
