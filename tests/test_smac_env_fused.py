"""StarCraft2Env's fused path (a batch of one, ``env_fused.py``) equals its table-by-table path exactly."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.env import StarCraft2Env

FLAGS = dict(
    obs_last_action=True, obs_pathing_grid=True, obs_timestep_number=True, state_timestep_number=True
)


def _pair(name: str, seed: int | None = 3, **flags) -> tuple[StarCraft2Env, StarCraft2Env]:
    fast = StarCraft2Env(name, backend="sim", seed=seed, **flags)
    ref = StarCraft2Env(name, backend="sim", seed=seed, fused=False, **flags)
    return fast, ref


def _same_view(fast: StarCraft2Env, ref: StarCraft2Env, where: str) -> None:
    for x, y, what in (
        (np.array(fast.get_obs()), np.array(ref.get_obs()), "obs"),
        (fast.get_state(), ref.get_state(), "state"),
        (fast.last_action, ref.last_action, "last_action"),
        (fast.death_tracker_ally, ref.death_tracker_ally, "dead allies"),
        (fast.death_tracker_enemy, ref.death_tracker_enemy, "dead enemies"),
        (fast.get_visibility_matrix(), ref.get_visibility_matrix(), "visibility"),
    ):
        assert x.dtype == y.dtype, f"{what} {where}"
        np.testing.assert_array_equal(x, y, err_msg=f"{what} {where}")
    assert fast.get_avail_actions() == ref.get_avail_actions(), where
    assert fast.get_obs_agent(0).tolist() == ref.get_obs_agent(0).tolist()
    ft, rt = fast.unit_table, ref.unit_table
    for side in ("allies", "enemies"):
        a, b = getattr(ft, side), getattr(rt, side)
        for field in ("pos", "health", "shield", "cooldown", "energy", "health_max", "shield_max"):
            np.testing.assert_array_equal(
                getattr(a, field), getattr(b, field), err_msg=f"{side} {field} {where}"
            )


def _play(fast: StarCraft2Env, ref: StarCraft2Env, steps: int, seed: int = 0) -> int:
    """Random available actions on both, resetting at every end; returns the episodes played."""
    assert fast._fused_ok and not ref._fused_ok
    for x, y in zip(fast.reset(), ref.reset(), strict=True):
        np.testing.assert_array_equal(np.array(x), np.array(y))
    assert fast._fused is not None and ref._fused is None  # the two paths really differ
    rs = np.random.default_rng(seed)
    episodes = 0
    for t in range(steps):
        _same_view(fast, ref, f"step {t}")
        avail = np.array(fast.get_avail_actions(), dtype=bool)
        acts = (rs.random(avail.shape) * avail).argmax(1)
        got, want = fast.step(acts.tolist()), ref.step(acts)
        assert got == want, f"step {t}"
        assert type(got[0]) is float and type(got[1]) is bool
        if got[1]:
            episodes += 1
            fast.reset()
            ref.reset()
    assert fast.get_stats() == ref.get_stats()
    assert fast.max_reward == ref.max_reward
    return episodes


def test_fused_equals_reference_on_3m_over_many_episodes():
    assert _play(*_pair("3m"), steps=300) >= 5


@pytest.mark.parametrize(
    "name,flags",
    [
        ("MMM", FLAGS),  # Medivac heals (its actions are ally targets)
        ("2s3z", dict(reward_sparse=True, obs_instead_of_state=True)),
        ("bane_vs_bane", dict(reward_only_positive=False, reward_scale=False)),
    ],
)
def test_fused_equals_reference_across_maps_and_flags(name, flags):
    _play(*_pair(name, **flags), steps=120)


def test_timeouts_continuing_episodes_and_a_shortened_limit():
    fast, ref = _pair("2s3z", continuing_episode=True)
    fast.episode_limit = ref.episode_limit = 5  # changed after construction, as a caller may
    _play(fast, ref, steps=40)
    stats = fast.get_stats()
    assert stats["timeouts"] >= 3 and stats == ref.get_stats()


def test_seed_reset_seed_and_close_follow_the_reference():
    fast, ref = _pair("3m", seed=None)
    for env in (fast, ref):
        env.seed(11)
    _play(fast, ref, steps=30)
    for x, y in zip(fast.reset(seed=12), ref.reset(seed=12), strict=True):
        np.testing.assert_array_equal(np.array(x), np.array(y))
    _same_view(fast, ref, "after reset(seed=12)")
    for env in (fast, ref):
        env.close()
    _play(fast, ref, steps=30)  # a fresh engine on the stored seed after close


def test_render_and_replay_frames_match(tmp_path):
    fast, ref = _pair("MMM", replay_dir=str(tmp_path))
    _play(fast, ref, steps=25)
    np.testing.assert_array_equal(fast.render(), ref.render())
    assert len(fast._frames) == len(ref._frames)
    from PIL import Image

    a, b = Image.open(fast.save_replay()), Image.open(ref.save_replay())
    assert a.n_frames == b.n_frames >= 2
    for k in range(a.n_frames):
        a.seek(k)
        b.seek(k)
        np.testing.assert_array_equal(np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB")))


def test_bad_actions_give_the_references_errors_and_change_nothing():
    fast, ref = _pair("3m")
    fast.reset()
    ref.reset()
    bad = [
        [0, 1, 1],  # no-op of a living agent: unavailable
        [1, 1],  # too few
        [1, 1, 99],  # out of range
        [1.5, 1, 1],  # not an integer
    ]
    for acts in bad:
        with pytest.raises(ValueError) as got:
            fast.step(acts)
        with pytest.raises(ValueError) as want:
            ref.step(acts)
        assert str(got.value) == str(want.value)
    assert fast.step([1.0, 2.0, 1.0]) == ref.step([1, 2, 1])  # integral floats are accepted by both
    _same_view(fast, ref, "after the refused actions")


def test_getters_before_reset_and_heuristic_or_injected_engines_keep_the_reference_path():
    env = StarCraft2Env("3m", backend="sim")
    with pytest.raises(RuntimeError, match="reset"):
        env.get_obs()
    with pytest.raises(RuntimeError, match="reset"):
        env.step([1, 1, 1])
    assert not StarCraft2Env("3m", backend="sim", heuristic_ai=True)._fused_ok
    assert not StarCraft2Env("3m", backend="sim", fused=False)._fused_ok


def test_the_api_benchmark_times_both_paths_and_keeps_earlier_results(tmp_path):
    from benchmarks.throughput import smac_api_step

    out = tmp_path / "api.md"
    for note in ("first", "second"):
        smac_api_step.main(
            ["--maps", "3m", "--steps", "40", "--blocks", "1", "--out", str(out), "--note", note]
        )
    text = out.read_text()
    assert text.startswith("# `StarCraft2Env`") and text.count("\n## ") == 2
    assert text.index("note: second") < text.index("note: first")  # newest first
    row = next(line for line in text.splitlines() if line.startswith("| 3m |"))
    fused, ref = (float(c.replace(",", "")) for c in row.split("|")[2:4])
    assert fused > 0 and ref > 0 and "--blocks 1" in text
