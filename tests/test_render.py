"""The replay renderer: frames framed on the fight, type letters, health and shield bars, step and outcome."""

import numpy as np
from PIL import Image

from marl.envs.smac import StarCraft2Env
from marl.envs.smac.render import LETTERS, MARGIN, MIN_VIEW, episode_frames, outcome, render_frame, view_box

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
    env = StarCraft2Env("3m", seed=0, backend="sim", replay_dir=str(tmp_path))
    env.reset()
    rng = np.random.default_rng(0)
    done = False
    while not done:
        _, done, _ = env.step([rng.choice(np.flatnonzero(a)) for a in env.get_avail_actions()])
    with Image.open(env.save_replay()) as gif:
        assert gif.size == (512, 512) and gif.n_frames >= 2
