"""The engine's version: held to a fingerprint of its dynamics, carried by the env, recorded in CHANGELOG.md.

``FINGERPRINTS`` is written by ``python -m marl.envs.smac.fingerprint --update``; edit it by hand only to
remove a version that was never released.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from marl.envs.base import EnvInfo
from marl.envs.smac import ENGINE_VERSION, SMACV2_GENERATOR_VERSION, SMACv2Env, StarCraft2Env
from marl.envs.smac import fingerprint as fp
from marl.envs.smac.version import RELEASED_AS, engine_label, engine_record, game_version

FINGERPRINTS = {
    "0.9.0": {
        "3m/0": "a4bae30693d361be",
        "3m/1": "957ddcc9cf7c929f",
        "2s3z/0": "512dd13f2484c5c0",
        "2c_vs_64zg/0": "0cf6db008c8b0a02",
        "bane_vs_bane/0": "486b25a698e17c4f",
        "protoss_5_vs_5/0": "7ceda75044f36a9c",
        "protoss_5_vs_5/1": "84a1e79ecd5030ad",
        "all": "92878504597855afcefba8bc48aedc2aac3d270b7a67ec84275c683fdb7b0b9c",
    },
    "0.9.1": {
        "3m/0": "a4bae30693d361be",
        "3m/1": "957ddcc9cf7c929f",
        "2s3z/0": "512dd13f2484c5c0",
        "2c_vs_64zg/0": "cf9b3ec9260d9466",
        "bane_vs_bane/0": "486b25a698e17c4f",
        "protoss_5_vs_5/0": "7ceda75044f36a9c",
        "protoss_5_vs_5/1": "579f22fa6018e67a",
        "all": "6b90ce0f87e402024f8946aa0cf877d444af7603c078fc005de8c620a1d52621",
    },
    "0.9.2": {
        "3m/0": "811d1b31e43bb3b7",
        "3m/1": "0edd4485c2e98edd",
        "2s3z/0": "2b79c3d3d2b4a0b5",
        "2c_vs_64zg/0": "214cc6aa658987a8",
        "bane_vs_bane/0": "486b25a698e17c4f",
        "protoss_5_vs_5/0": "7ceda75044f36a9c",
        "protoss_5_vs_5/1": "579f22fa6018e67a",
        "all": "850ad39f5b73f716405fa8db71cd08e863931986494c15db2994fc6412f8f9b4",
    },
    "1.0.0": {
        "3m/0": "811d1b31e43bb3b7",
        "3m/1": "0edd4485c2e98edd",
        "2s3z/0": "2b79c3d3d2b4a0b5",
        "2c_vs_64zg/0": "214cc6aa658987a8",
        "bane_vs_bane/0": "486b25a698e17c4f",
        "protoss_5_vs_5/0": "7ceda75044f36a9c",
        "protoss_5_vs_5/1": "579f22fa6018e67a",
        "all": "850ad39f5b73f716405fa8db71cd08e863931986494c15db2994fc6412f8f9b4",
    },
}


def test_dynamics_match_the_engine_version() -> None:
    want = FINGERPRINTS.get(ENGINE_VERSION)
    assert want is not None, (
        f"ENGINE_VERSION {ENGINE_VERSION} has no recorded fingerprint: add its CHANGELOG.md section, then "
        f"run `{fp.UPDATE}`"
    )
    got = fp.fingerprint()
    assert got == want, (
        f"the engine's dynamics changed (episodes {', '.join(fp.differences(want, got))} differ from engine "
        f"{ENGINE_VERSION}'s fingerprint) without a version bump: bump ENGINE_VERSION in "
        "marl/envs/smac/version.py, add a CHANGELOG.md section for it (what changed, its source, its effect "
        f"on docs/fidelity.md's tables), then update the fingerprint with `{fp.UPDATE}`. (A different NumPy "
        "or Numba version can also change the last bit of a float; the fingerprint assumes the pinned ones.)"
    )


def test_the_fingerprint_reads_back_from_this_file() -> None:
    assert fp.recorded(Path(__file__)) == FINGERPRINTS


def test_changelog_has_a_section_for_the_engine_version() -> None:
    assert fp.changelog_has(ENGINE_VERSION), f"CHANGELOG.md lacks a '## Engine {ENGINE_VERSION}' section"
    assert not fp.changelog_has("99.0.0")


def test_update_refuses_a_changed_fingerprint_without_a_bump(tmp_path, monkeypatch) -> None:
    test_file, changelog = tmp_path / "test_engine_version.py", tmp_path / "CHANGELOG.md"
    shutil.copy(Path(__file__), test_file)
    monkeypatch.setattr(fp, "TEST_FILE", test_file)
    monkeypatch.setattr(fp, "CHANGELOG", changelog)
    want = FINGERPRINTS[ENGINE_VERSION]
    changed = {**want, "3m/0": "0" * 16, "all": "1" * 64}
    assert "already recorded" in fp.update(want)
    with pytest.raises(SystemExit, match=r"episodes 3m/0, all\): bump ENGINE_VERSION"):
        fp.update(changed)
    monkeypatch.setattr(fp, "ENGINE_VERSION", "99.0.0")  # bumped, but no CHANGELOG section yet
    with pytest.raises(SystemExit, match=r"CHANGELOG.md has no section for engine 99.0.0"):
        fp.update(changed)
    changelog.write_text("# Changelog\n\n## Engine 99.0.0\n\n- a change\n", encoding="utf-8")
    assert "recorded" in fp.update(changed)
    assert fp.recorded(test_file) == {**FINGERPRINTS, "99.0.0": changed}


def test_env_carries_the_engine_version() -> None:
    env = StarCraft2Env("3m", backend="sim", seed=0)
    assert env.engine_version == ENGINE_VERSION
    info = env.get_env_info()
    assert (info["engine_version"], info["backend"]) == (ENGINE_VERSION, "sim")
    assert EnvInfo.from_dict(info).n_agents == 3  # the extra keys do not disturb SMAC's own
    assert env.engine_info() == {"engine_version": ENGINE_VERSION, "backend": "sim"}
    v2 = SMACv2Env("protoss_5_vs_5", backend="sim", seed=0)
    assert v2.engine_info() == {
        "engine_version": ENGINE_VERSION,
        "backend": "sim",
        "generator_version": SMACV2_GENERATOR_VERSION,
    }
    assert v2.get_env_info()["engine_version"] == ENGINE_VERSION


def test_the_batched_env_carries_it_too() -> None:
    from marl.envs.smac.batched_env import BatchedStarCraft2Env

    env = BatchedStarCraft2Env("3m", n_envs=2, seed=0)
    assert env.engine_info() == StarCraft2Env("3m", backend="sim").engine_info()
    assert env.get_env_info() == StarCraft2Env("3m", backend="sim").get_env_info()


def test_game_version_and_labels(monkeypatch) -> None:
    assert game_version(("Base69232", "Base75689")) == "4.10.0 (Base75689)"
    assert game_version(("Base81102",)) == "Base81102"
    assert game_version(()) == "unknown"
    assert engine_label(None) == "unknown"
    assert engine_label(engine_record("sim", "3m")) == f"sim {ENGINE_VERSION}"
    v2 = engine_record("sim", "protoss_5_vs_5", generator=True)
    assert engine_label(v2) == f"sim {ENGINE_VERSION}, smacv2 generator {SMACV2_GENERATOR_VERSION}"
    game = {"engine_version": "0.9.0", "backend": "sc2", "game_version": "4.10.0 (Base75689)"}
    assert engine_label(game) == "sc2 4.10.0 (Base75689), smac layer 0.9.0"


def test_sc2_record_names_the_game_build(tmp_path, monkeypatch) -> None:
    (tmp_path / "Versions" / "Base75689").mkdir(parents=True)
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    assert engine_record("sc2", "3m")["game_version"] == "4.10.0 (Base75689)"


def test_a_release_that_kept_a_pre_release_s_dynamics_has_its_fingerprint_and_its_runs() -> None:
    assert RELEASED_AS, "no pre-release is named by a release"
    for pre, release in RELEASED_AS.items():
        assert release in FINGERPRINTS and FINGERPRINTS[pre] == FINGERPRINTS[release], (pre, release)
        assert engine_label({"engine_version": pre, "backend": "sim"}) == f"sim {release}"
        sc2 = {"engine_version": pre, "backend": "sc2", "game_version": "4.6.2"}
        assert engine_label(sc2) == f"sc2 4.6.2, smac layer {release}"
    # every other version keeps its own name
    assert engine_label({"engine_version": "0.9.1", "backend": "sim"}) == "sim 0.9.1"
