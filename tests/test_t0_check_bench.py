"""benchmarks/fidelity/t0_check.py and benchmarks/research/calibration_probe.py: the game's T=0 figures, the
untrained agent, and the probes' policies and variants."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fidelity import t0_check
from benchmarks.research import calibration_probe


def test_game_t0_pools_every_runs_first_test():
    win, ret, n = t0_check.game_t0("2s_vs_1sc")
    assert n == 26 and (win.lo, win.hi) == (0.0, 0.0)
    assert ret.median == 0.0 and ret.hi == pytest.approx(9.5973)  # one COMA run, tested after 904 steps
    win, _, n = t0_check.game_t0("bane_vs_bane")
    assert n == 24 and 0.0 < win.median < 1.0
    with pytest.raises(ValueError, match="no paper runs"):
        t0_check.game_t0("3m")


def test_untrained_rnn_is_pymarls_gru_with_torchs_init_bounds():
    rng = np.random.default_rng(0)
    net = t0_check.UntrainedRNN(10, 7, rng)
    assert np.abs(net.w1_HI).max() <= 1 / np.sqrt(10) and np.abs(net.wh_GH).max() <= 1 / np.sqrt(64)
    x, h = rng.normal(size=(5, 10)), np.zeros((5, 64))
    q, h1 = net.step(x, h)
    assert q.shape == (5, 7) and h1.shape == (5, 64) and np.all(np.abs(h1) < 1)
    # with h = 0 the GRU gives (1 - z) * n: recompute it by hand
    a = np.maximum(x @ net.w1_HI.T + net.b1_H, 0)
    gi, gh = a @ net.wi_GH.T + net.bi_G, net.bh_G
    r = 1 / (1 + np.exp(-(gi[:, :64] + gh[:64])))
    z = 1 / (1 + np.exp(-(gi[:, 64:128] + gh[64:128])))
    n = np.tanh(gi[:, 128:] + r * gh[128:])
    np.testing.assert_allclose(h1, (1 - z) * n)


def test_play_returns_one_outcome_per_episode():
    out = t0_check.play("3m", "greedy", 3, seed=1)
    assert out["return"].shape == (3,) and out["won"].dtype == bool
    assert np.all(out["return"] >= 0) and np.all(out["return"] <= 20.0 + 1e-6)


def test_probe_stop_loses_and_the_games_arena_is_2c_vs_64zg_only():
    r = calibration_probe.play("2s_vs_1sc", "stop", "default", 2, 0)
    assert r["win"] == 0.0 and r["len"] == 300.0 and r["left"] == 300.0  # the crawler, untouched
    grid = calibration_probe.spec_for("2c_vs_64zg", "arena=game").pathing_grid
    assert not grid[10, 12] and grid[2, 12] and not grid[1, 12]  # the strip, its gap, the playable edge
    with pytest.raises(ValueError, match="2c_vs_64zg only"):
        calibration_probe.spec_for("3m", "arena=game")


def test_probe_scales_the_unit_table_only_while_it_plays():
    from marl.envs.smac.sim import engine, units

    props = calibration_probe.scaled_props("colossus.cooldown=1.5,zergling.dmg=2")
    col, zl = units.TYPE_INDEX["colossus"], units.TYPE_INDEX["zergling"]
    for row in (col, units.N_TYPES + col):  # the RL copy and the stock unit alike
        assert props[row, units.COOLDOWN] == pytest.approx(1.5 * units.PROPS[row, units.COOLDOWN])
    assert props[zl, units.DMG] == 10.0 and props[col, units.DMG] == units.PROPS[col, units.DMG]
    with pytest.raises(SystemExit, match="FIELD one of"):
        calibration_probe.scaled_props("colossus.armor=2")
    # idle colossi take no part: the zerglings' doubled damage alone shortens the episode
    base = calibration_probe.play("2c_vs_64zg", "stop", "default", 2, 0)
    fast = calibration_probe.play("2c_vs_64zg", "stop", "scale:zergling.dmg=2", 2, 0)
    assert fast["len"] < base["len"] and engine.PROPS is units.PROPS  # restored afterwards
    assert 0.3 < base["crowd"] < 0.69  # the approaching crowd, centre to centre


def test_push_rule_keeps_a_crowd_out_of_contact_and_needs_a_number():
    from marl.envs.smac.sim.variants import R_PUSH, parse_rules

    assert parse_rules("push4")[R_PUSH] == 4
    with pytest.raises(ValueError, match="push of passes"):
        parse_rules("push")
    one = calibration_probe.play("2c_vs_64zg", "stop", "default", 4, 0)
    four = calibration_probe.play("2c_vs_64zg", "stop", "push4", 4, 0)
    assert one["crowd"] < 0.65 < four["crowd"]  # the contact distance of two zerglings: 0.6885


def test_checkpoint_rules_plays_a_smac_checkpoint_under_rules_and_refuses_other_envs(tmp_path):
    from train_runs import TINY

    from benchmarks.research import checkpoint_rules
    from marl.config import load_config
    from marl.trainer import Trainer

    cfg = load_config("qmix", env="sc2", overrides=[*TINY, "env.map_name=3m", "env.backend=sim",
                                                     f"results_dir={tmp_path}", "run_name=r", "t_max=200",
                                                     "learner.use_jit=false"])  # fmt: skip
    run = Trainer(cfg).run()
    rows = checkpoint_rules.play(run, ["default", "nohelp"], 4, 0)
    assert [(r["map"], r["rules"]) for r in rows] == [("3m", "default"), ("3m", "nohelp")]
    for r in rows:
        assert 0.0 <= r["lo"] <= r["win"] <= r["hi"] <= 1.0 and 0.0 <= r["ret"] <= 20.0 + 1e-6
        assert r["held_allies"] >= 0.0 and r["held_enemies"] >= 0.0  # pinned unit-steps an episode
    fake = Trainer(load_config("qmix", env="fake", overrides=[*TINY, f"results_dir={tmp_path}", "run_name=f",
                                                                "t_max=100"])).run()  # fmt: skip
    with pytest.raises(SystemExit, match="a run on a SMAC map is needed"):
        checkpoint_rules.play(fake, ["default"], 2, 0)


def test_target_shares_count_each_enemy_types_targets_in_living_envs_only():
    from benchmarks.research.checkpoint_rules import _fractions, target_shares
    from marl.envs.smac.sim.units import N_STATE, N_TYPES, S_HP, S_TGT, TYPE_INDEX

    st, ze = TYPE_INDEX["stalker"], TYPE_INDEX["zealot"]
    utype = np.array([st, ze, st + N_TYPES, ze + N_TYPES])  # allies: stalker, zealot; enemies the same
    S = np.zeros((3, 4, N_STATE))
    S[:, :, S_HP] = 1.0
    S[:, 2, S_TGT] = [0, 1, 0]  # enemy stalker: ally stalker, ally zealot, ally stalker (env 2 is over)
    S[:, 3, S_TGT] = [1, -1, 1]  # enemy zealot: ally zealot, nothing
    S[1, 3, S_HP] = 0.0  # a dead enemy counts for nothing
    got = target_shares(S, utype, 2, np.array([True, True, False]))
    assert got == {"stalker>stalker": 1.0, "stalker>zealot": 1.0, "zealot>zealot": 1.0}
    assert _fractions(got) == "stalker>stalker 0.50, stalker>zealot 0.50, zealot>zealot 1.00"
    S[1, 3, S_HP] = 1.0  # env 1's enemy zealot, alive with no target: counted apart once the approach is over
    got = target_shares(S, utype, 2, np.array([True, True, False]), step=8)
    assert got["zealot>none"] == 1.0 and "zealot>none, fighting" not in got
    got = target_shares(S, utype, 2, np.array([True, True, False]), step=9)
    assert got["zealot>none"] == 1.0 and got["zealot>none, fighting"] == 1.0
    assert _fractions(got).endswith("zealot>none 0.50, zealot>none, fighting 0.50, zealot>zealot 0.50")


def test_targeting_forms_table_has_a_target_row_and_one_row_per_form(tmp_path):
    from benchmarks.research import targeting_forms

    assert targeting_forms.game_band("3s5z") == "0.41 [0.22, 0.62]"  # the SMAC paper's 5 QMIX runs at 300k
    assert targeting_forms.game_band("no_such_map") == "-"
    out = tmp_path / "forms.md"
    text = targeting_forms.main(
        ["--forms", "default", "noretaliate", "--heuristic-maps", "3m", "3s5z", "--heuristic-episodes", "4",
         "--out", str(out)]
    )  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == "| form | heuristic 3m % | heuristic 3s5z % |"
    assert lines[2] == "| **target** | - | 42 (b) |"
    assert [row.split(" | ")[0] for row in lines[3:]] == ["| default", "| noretaliate"]
    assert all(0.0 <= float(c) <= 100.0 for row in lines[3:] for c in row.strip("| ").split(" | ")[1:])
    assert out.read_text().startswith("# Candidate forms") and text in out.read_text()
    for bad in (["--forms", "nosuchrule"], ["--episodes", "0"]):
        with pytest.raises(SystemExit):
            targeting_forms.main(bad)
