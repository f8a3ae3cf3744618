"""The replay renderer: frames framed on the fight, type letters, health and shield bars, step and outcome."""

import numpy as np
import pytest
from PIL import Image

from marl.envs.smac import StarCraft2Env
from marl.envs.smac.render import (
    LETTERS,
    MARGIN,
    MIN_VIEW,
    episode_frames,
    outcome,
    render_frame,
    save_frames,
    view_box,
)

ALLY, ENEMY = np.array([40, 110, 220]), np.array([215, 50, 40])


def _table(env):
    env.reset()
    return env._require()


def test_the_view_frames_the_living_units_with_a_margin():
    env = StarCraft2Env("3m", seed=0, backend="sim")
    table = _table(env)
    x0, y0, side = view_box(env.spec, [table])
    pts = np.concatenate([table.allies.pos, table.enemies.pos])
    assert side >= MIN_VIEW and side < max(env.spec.map_size)  # zoomed in: smaller than the whole map
    assert (pts >= np.array([x0, y0]) + MARGIN - 1e-6).all() or side == MIN_VIEW
    assert (pts >= np.array([x0, y0])).all() and (pts <= np.array([x0, y0]) + side).all()


def test_a_frame_zooms_in_on_the_units_and_draws_both_sides():
    env = StarCraft2Env("3m", seed=0, backend="sim")
    table = _table(env)
    framed = render_frame(env.spec, table, step=0)
    whole = render_frame(env.spec, table, view=(0.0, 0.0, float(max(env.spec.map_size))))
    assert framed.shape == whole.shape == (512, 512, 3)
    # a unit covers more pixels when the frame is framed on the fight than when it shows the whole map
    assert (framed == ALLY).all(-1).sum() > 2 * (whole == ALLY).all(-1).sum()
    assert (framed == ENEMY).all(-1).any()
    assert set(LETTERS) >= set(env.spec.ally_types)


def test_protoss_units_get_a_shield_bar_and_the_last_frame_the_outcome():
    env = StarCraft2Env("2s3z", seed=0, backend="sim")
    table = _table(env)
    frame = render_frame(env.spec, table)
    assert (frame == [90, 200, 250]).all(-1).any() and (frame == [60, 220, 60]).all(
        -1
    ).any()  # shields, health
    won = table.copy()
    won.enemies.health[:] = 0
    assert outcome(won) == "won" and outcome(table) == "time limit"
    frames = episode_frames(env.spec, [table, won], [None, None], ended=True, episode_limit=env.episode_limit)
    plain = episode_frames(env.spec, [table, won], [None, None], ended=False, episode_limit=env.episode_limit)
    header = slice(0, 18)
    assert (frames[0][header] == plain[0][header]).all()  # same view, same step
    assert not (frames[1][header] == plain[1][header]).all()  # the outcome is written in the header


def test_a_replay_keeps_one_view(tmp_path):
    env = _played(tmp_path)
    with Image.open(env.save_replay()) as gif:
        assert gif.size == (512, 512) and gif.n_frames >= 2


def _played(tmp_path) -> StarCraft2Env:
    env = StarCraft2Env("3m", seed=0, backend="sim", replay_dir=str(tmp_path))
    env.reset()
    rng = np.random.default_rng(0)
    done = False
    while not done:
        _, done, _ = env.step([rng.choice(np.flatnonzero(a)) for a in env.get_avail_actions()])
    return env


def test_an_mp4_replay_is_a_valid_video_of_every_frame(tmp_path):
    ffmpeg = pytest.importorskip(
        "imageio_ffmpeg", reason="MP4 replays need imageio-ffmpeg (the replay extra)"
    )
    env = _played(tmp_path)
    path = env.save_replay("mp4")
    assert path.endswith(".mp4")
    head = open(path, "rb").read(12)
    assert head[4:8] == b"ftyp"  # an ISO base media file: the MP4 container's first box
    n_frames, _ = ffmpeg.count_frames_and_secs(path)
    assert n_frames == len(env._frames) >= 2  # one video frame per drawn frame (reset + every step)
    reader = ffmpeg.read_frames(path)
    meta = next(reader)
    first = np.frombuffer(next(reader), np.uint8).reshape(512, 512, 3)
    reader.close()
    assert tuple(meta["size"]) == (512, 512)
    drawn = env.render()  # the same renderer: the last frame's picture, the first one's colours
    assert drawn.shape == first.shape
    assert np.abs(first.astype(int) - ALLY).sum(-1).min() < 40  # the blue of the allies survives encoding


def test_mp4_without_imageio_ffmpeg_is_a_usage_error_naming_the_extra(tmp_path, monkeypatch, capsys):
    import importlib.util

    from marl.cli import evaluate_main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "imageio_ffmpeg" else real(n, *a)
    )
    with pytest.raises(SystemExit) as stop:  # refused before any checkpoint is read
        evaluate_main(["--checkpoint", str(tmp_path / "none"), "--replay-format", "mp4"])
    assert stop.value.code == 2
    assert (
        "MP4 replays need imageio-ffmpeg, the 'replay' extra: pip install 'marl[replay]'"
        in capsys.readouterr().err
    )
    env = _played(tmp_path)
    with pytest.raises(ValueError, match=r"marl\[replay\]"):
        env.save_replay("mp4")
    with pytest.raises(ValueError, match="not one of gif, mp4"):
        env.save_replay("avi")
    with pytest.raises(ValueError, match="ends in .gif or .mp4"):
        save_frames([np.zeros((16, 16, 3), np.uint8)], tmp_path / "x.webm")
    assert env.save_replay("gif").endswith(".gif")  # GIFs need nothing more
