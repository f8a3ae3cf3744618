"""Algorithm-dependent config sections: a run's ``mixer`` and ``exploration`` sections exist only when its
learner family reads them (``BaseLearnerConfig.sections``), with the family's class for each; keys of a
section the learner does not read are errors from the command line and algorithm YAMLs, and are dropped
from saved configs of older run folders, which still resume."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from marl.config import ConfigError, config_to_dict, dump_config, load_config, load_saved_config
from marl.config.cli import build_arg_parser, config_from_args
from marl.config.layers import CONFIG_DIR, _names
from marl.config.schema import (
    ALG_SECTIONS,
    ExplorationConfig,
    MixerConfig,
    NoiseExplorationConfig,
    learner_config_class,
)

ALGS = _names(CONFIG_DIR / "algs")


@pytest.mark.parametrize("alg", ALGS)
def test_written_config_holds_only_the_sections_its_learner_reads(alg: str) -> None:
    cfg = load_config(alg)
    reads = learner_config_class(cfg.learner.name).sections
    written = yaml.safe_load(dump_config(cfg))
    assert {s for s in ALG_SECTIONS if s in written} == set(reads), alg
    for section in ALG_SECTIONS:
        if section in reads:
            assert type(getattr(cfg, section)) is reads[section]
            assert set(written[section]) == {f.name for f in dataclasses.fields(reads[section])}
        else:
            assert getattr(cfg, section) is None


def test_which_algorithms_read_which_sections() -> None:
    text = {
        alg: dump_config(load_config(alg)) for alg in ("qmix", "qtran", "mappo", "coma", "maa2c", "maddpg")
    }
    assert "mixer:" in text["qmix"] and "epsilon_start" in text["qmix"] and "noise_start" not in text["qmix"]
    assert "mixer:" not in text["qtran"] and "epsilon_start" in text["qtran"]  # Q_jt has its own width
    for alg in ("mappo", "maa2c"):  # on-policy: they sample their policy, no epsilon, no mixer
        assert "mixer:" not in text[alg] and "exploration:" not in text[alg] and "epsilon" not in text[alg]
    assert "mixer:" not in text["coma"] and "epsilon_start: 0.5" in text["coma"]  # pymarl's epsilon floor
    assert "noise_start" not in text["coma"]
    assert "mixer:" not in text["maddpg"] and "noise_start" in text["maddpg"]
    assert type(load_config("qmix").mixer) is MixerConfig
    assert type(load_config("dqn").exploration) is ExplorationConfig
    assert type(load_config("ddpg").exploration) is NoiseExplorationConfig


def test_overrides_reach_the_sections_and_unread_keys_are_errors() -> None:
    assert load_config("qmix", overrides=["embed_dim=16"]).mixer.embed_dim == 16  # a leaf shortcut
    assert load_config("qmix", overrides=["exploration.epsilon_anneal_time=5000"]).exploration == (
        ExplorationConfig(epsilon_anneal_time=5000)
    )
    assert load_config("maddpg", overrides=["noise_start=0.3"]).exploration.noise_start == pytest.approx(0.3)
    with pytest.raises(
        ConfigError, match=r"mixer\.embed_dim is not read by learner 'ppo': it reads no mixer"
    ):
        load_config("mappo", overrides=["mixer.embed_dim=16"])
    with pytest.raises(ConfigError, match=r"exploration\.epsilon_start is not read by learner 'ppo'"):
        load_config("mappo", overrides=["epsilon_start=0.5"])
    with pytest.raises(ConfigError, match=r"mixer\.name is not read by learner 'qtran'"):
        load_config("qtran", overrides=["mixer.name=qmix"])
    with pytest.raises(
        ConfigError,
        match=r"exploration\.noise_start is not read by learner 'q_learner'; its keys are "
        r"exploration\.epsilon_anneal_time, exploration\.epsilon_finish, exploration\.epsilon_start$",
    ):
        load_config("qmix", overrides=["noise_start=0.2"])
    with pytest.raises(ConfigError, match=r"unknown config key 'exploration\.noise_strat' \(did you mean "):
        load_config("maddpg", overrides=["exploration.noise_strat=0.2"])
    # 6h_vs_8z's preset sets exploration at its top level (for every algorithm): MAPPO drops it and runs
    assert load_config("mappo", map_name="6h_vs_8z").exploration is None


def test_an_algorithm_yaml_with_a_section_its_learner_does_not_read_is_an_error(tmp_path: Path) -> None:
    for sub in ("algs", "envs"):
        (tmp_path / sub).mkdir()
    (tmp_path / "envs" / "fake.yaml").write_text("env:\n  name: fake\n")
    (tmp_path / "algs" / "a2c.yaml").write_text(
        "env: {name: fake}\nlearner: {name: ppo}\nmixer: {embed_dim: 8}\n"
    )
    with pytest.raises(ConfigError, match=r"a2c\.yaml: mixer\.embed_dim is not read by learner 'ppo'"):
        load_config("a2c", config_dir=tmp_path)


def test_help_lists_the_sections_of_the_default_algorithm(capsys: pytest.CaptureFixture[str]) -> None:
    for script, alg in (("train_qmix.py", "qmix"), ("train_mappo.py", "mappo")):
        with pytest.raises(SystemExit):
            build_arg_parser(script, alg).parse_args(["--help"])
        out = capsys.readouterr().out
        listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ") and "default" in line}
        others = next(line for line in out.splitlines() if line.startswith(f"keys {alg} does not read"))
        if alg == "qmix":
            assert {"mixer.embed_dim", "exploration.epsilon_start"} <= listed
            assert "exploration.noise_start" in others and "learner.ppo_clip" in others
        else:
            assert (
                not any(k.startswith(("mixer.", "exploration.")) for k in listed)
                and "learner.ppo_clip" in listed
            )
            assert "mixer.embed_dim" in others and "exploration.epsilon_start" in others


def _old_style(cfg_dict: dict) -> dict:
    """The config.yaml layout of run folders written before the sections depended on the algorithm: every
    run carried a mixer section and an exploration section with the noise fields."""
    old = dict(cfg_dict)
    old["mixer"] = dataclasses.asdict(MixerConfig())
    old["exploration"] = {**dataclasses.asdict(NoiseExplorationConfig()), **old.get("exploration", {})}
    return old


@pytest.mark.parametrize("alg", ["mappo", "qmix", "qtran"])
def test_old_run_folders_resume_and_are_rewritten_with_their_sections(tmp_path: Path, alg: str) -> None:
    script = "train_mappo.py" if alg == "mappo" else "train_qmix.py"
    parser = build_arg_parser(script, alg)
    new = config_from_args(parser.parse_args(["--alg", alg, "--seed", "3", f"results_dir={tmp_path}"]))
    run = tmp_path / "old_run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(_old_style(config_to_dict(new)), sort_keys=False))
    assert load_saved_config(run) == new  # the sections its learner does not read are dropped
    resumed = config_from_args(parser.parse_args(["--resume", str(run), "t_max=123456"]))
    assert resumed.t_max == 123_456 and resumed.seed == 3 and resumed.mixer == new.mixer
    assert resumed.exploration == new.exploration
    text = dump_config(resumed)
    assert ("mixer:" in text) == (alg == "qmix") and "noise_start" not in text


def test_an_old_coma_run_resumes_without_the_epsilon_floor_it_never_had(tmp_path: Path) -> None:
    parser = build_arg_parser("train_mappo.py", "coma")
    new = config_from_args(parser.parse_args(["--alg", "coma", "--seed", "3", f"results_dir={tmp_path}"]))
    assert new.exploration.epsilon_start == pytest.approx(0.5)  # coma.yaml: pymarl's floor
    assert load_saved_config(_write_run(tmp_path / "new_run", config_to_dict(new))) == new
    old = load_saved_config(_write_run(tmp_path / "old_run", _old_style(config_to_dict(new))))
    assert old.exploration.epsilon_start == 0.0 and old.exploration.epsilon_finish == 0.0
    assert old.learner == new.learner


def _write_run(run: Path, cfg: dict) -> Path:
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return run


@pytest.mark.slow
def test_an_old_run_folder_trains_on_after_resume(tmp_path: Path) -> None:
    """End to end: a MAA2C run on the fake env whose config.yaml is put back to the old layout resumes,
    trains on and rewrites config.yaml without the sections its learner does not read."""
    from marl.checkpoint import latest, load
    from marl.cli import train_main

    small = ["--env", "fake", "learner.batch_size=4", "runner.batch_size_run=2", "agent.hidden_dim=16"]
    small += [
        "learner.critic_hidden_dim=16",
        "log.mindinsight=false",
        "log.progress=false",
        "log.test_nepisode=2",
    ]
    run = train_main(
        "train_mappo.py", "mappo", "", ["--alg", "maa2c", *small, f"results_dir={tmp_path}", "t_max=100"]
    )
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert "mixer" not in saved and "exploration" not in saved
    (run / "config.yaml").write_text(yaml.safe_dump(_old_style(saved), sort_keys=False))
    t_before = load(latest(run))["meta"]["t_env"]
    train_main("train_mappo.py", "mappo", "", ["--resume", str(run), "t_max=200"])
    assert load(latest(run))["meta"]["t_env"] > t_before >= 100
    rewritten = yaml.safe_load((run / "config.yaml").read_text())
    assert rewritten == saved | {"t_max": 200}
