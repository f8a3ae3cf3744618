"""``benchmarks/fidelity/replay_recorded.py`` and its two modules: og-marl's overlapping sequences stitched
into episodes, hits and the split-fire index read from health, and recorded actions replayed in the engine.
Every input is built here (og-marl's layout, written as its logger writes it); nothing is read from disk
outside ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from og_records import state_3m, tfrecord_example, write_tfrecords  # tests/ is on sys.path

from benchmarks.fidelity.recorded_episodes import (
    Episode,
    fire_split,
    first_fire,
    game_won,
    hits,
    sequences,
    stitch,
    unpack,
)
from benchmarks.fidelity.replay_engine import LOST, _pairing, divergence, replay
from benchmarks.fidelity.replay_recorded import engine_stats, main
from marl.envs.smac.maps import load_map

# the game's 3m layout at the first observation (results/recorded_spawns.md)
ALLIES = np.array([[9.0, 15.3115], [9.0, 16.0], [9.6885, 16.0]])
ENEMIES = np.array([[22.8594, 15.3137], [22.8594, 16.0022], [23.5479, 16.0022]])
CENTRE = np.array([16.0, 16.0])


def _rows(T: int, won: bool, tag: int) -> dict[str, np.ndarray]:
    """One episode's T rows as og-marl logs them; agent 0's health marks the step."""
    state = np.stack([state_3m(ALLIES, ENEMIES, t > 0) for t in range(T)])
    state[:, 0] = 1.0 - 0.01 * np.arange(T)  # agent 0's health marks the step
    rew = np.full(T, 0.5, np.float32)
    rew[-1] = 11.671233 if won else 0.0
    disc = np.ones(T, np.float32)
    disc[-1] = 0.0
    rows = {"env_state": state, "agent_0_rewards": rew, "agent_0_discounts": disc}
    for i in range(3):
        rows[f"agent_{i}_actions"] = (1 + (7 * tag + np.arange(T) + i) % 5).astype(np.int64)  # stop, moves
    return rows


def _sequences(rows: dict[str, np.ndarray], length: int = 20, period: int = 10) -> list[bytes]:
    """og-marl's logger: a sequence of ``length`` rows starts every ``period`` steps, zero-padded."""
    T, out = len(rows["env_state"]), []
    for start in range(0, T, period):
        k = min(length, T - start)
        seq = {}
        for key, v in rows.items():
            pad = np.zeros((length, *v.shape[1:]), v.dtype)
            pad[:k] = v[start : start + k]
            seq[key] = pad
        seq["zero_padding_mask"] = (np.arange(length) < k).astype(np.float32)
        seq["episode_return"] = np.array(rows["agent_0_rewards"].sum(), np.float32)
        out.append(tfrecord_example(seq))
    return out


def test_overlapping_sequences_are_stitched_into_whole_episodes(tmp_path: Path) -> None:
    a, b, c = _rows(23, True, 1), _rows(12, False, 2), _rows(20, True, 3)
    f = tmp_path / "executor_sequence_log_0.tfrecord"
    write_tfrecords(f, _sequences(a) + _sequences(b) + _sequences(c))
    eps, found = stitch(sequences([f]), 3, 9)
    assert [len(e.actions_TN) for e in eps] == [23, 12, 20]
    assert found == {
        "sequences": 7,
        "overlaps_checked": 4,
        "overlaps_differ": 0,
        "orphans": 0,
        "no_terminal": 0,
    }
    for ep, rows in zip(eps, (a, b, c), strict=True):
        np.testing.assert_array_equal(ep.actions_TN[:, 1], rows["agent_1_actions"])
        np.testing.assert_array_equal(ep.state_TS, rows["env_state"])
        assert ep.rewards_T.sum() == pytest.approx(ep.episode_return)
    assert [game_won(e, 3, 135.0) for e in eps] == [True, False, True]


def test_a_sequence_whose_overlap_disagrees_or_has_no_start_is_counted(tmp_path: Path) -> None:
    seqs, other = _sequences(_rows(23, True, 1)), _sequences(_rows(23, True, 2))
    f = tmp_path / "log.tfrecord"
    write_tfrecords(f, [other[1], *seqs])
    eps, found = stitch(sequences([f]), 3, 9)
    assert found["orphans"] == 1  # other[1] comes before any episode start: dropped
    assert len(eps) == 1 and found["overlaps_checked"] == 2 and found["overlaps_differ"] == 0
    rows = _rows(23, True, 1)
    rows["env_state"][12, 0] = 0.5  # step 12 as the second sequence has it differs from the first's
    write_tfrecords(f, [seqs[0], _sequences(rows)[1]])
    assert stitch(sequences([f]), 3, 9)[1]["overlaps_differ"] == 1


def test_hits_and_deaths_are_read_from_health_drops() -> None:
    hp = np.array([[45, 45], [39, 45], [27, 45], [27, 3], [27, 0], [0, 0]], dtype=float) / 45.0
    np.testing.assert_array_equal(hits(hp), [[1, 0], [2, 0], [0, 7], [0, 1], [5, 0]])
    assert first_fire(hp) == (1.0, 1.0, 4.0)
    assert np.isnan(first_fire(np.ones((4, 3)))[0])


def test_the_split_fire_index_tells_focus_from_spread() -> None:
    # ally 2 dies at s_2; then 2 hits on two allies (spread: 1), then 2 hits on one ally (focus: 1/2)
    hp = np.array([[45, 45, 45], [45, 39, 3], [45, 39, 0], [39, 33, 0], [27, 33, 0], [27, 33, 0]]) / 45.0
    split, before, after = fire_split(hp)
    assert split == [1.0, 0.5]
    assert before == [2, 1] and after == [2, 1]  # s_1 -> s_2 (the death) is still before it


def _episode(actions_TN: np.ndarray) -> Episode:
    s0 = state_3m(ALLIES, ENEMIES, False)
    T = len(actions_TN)
    return Episode(np.repeat(s0[None], T, 0), actions_TN, np.zeros(T), np.ones(T), 0.0, "built")


def test_replaying_stop_actions_lets_the_enemies_win_from_the_recorded_layout() -> None:
    spec = load_map("3m")
    ep = _episode(np.ones((60, 3), np.int64))  # every ally stops: the enemies walk in and shoot
    reps = replay([ep], spec, 28.0, placed=True, seeds=2)
    np.testing.assert_allclose(
        reps.pos_RTU2[:, 0], np.repeat(np.vstack([ALLIES, ENEMIES])[None], 2, 0), atol=1e-4
    )
    assert (reps.status_R == LOST).all() and (reps.length_R < 60).all()
    st = engine_stats(reps, 3)
    assert (st["first_hit"] >= 1).all() and (st["won"] == 0).all()
    # stop is always allowed to a living ally; a dead one's recorded stop is replaced and counted
    assert reps.subs["dead_in_engine"] > 0 and reps.subs["attack_unavailable"] == 0
    assert reps.actions == 3 * reps.length_R.sum() and reps.past_recording == 0
    d = divergence([ep], reps, 3, 3, 28.0, CENTRE)
    assert d[0]["ally_pos"] == pytest.approx(0.0, abs=1e-4) and d[0]["n"] == 2


def test_unavailable_recorded_attacks_become_no_ops_and_are_counted() -> None:
    spec = load_map("3m")
    ep = _episode(np.full((3, 3), 6, np.int64))  # attack enemy 0, 14 apart: out of SMAC's 6
    reps = replay([ep], spec, 28.0, placed=True)
    assert reps.subs["attack_unavailable"] == 9 and reps.past_recording > 0
    assert np.isnan(reps.hp_RTU[0, reps.length_R[0] + 1 :]).all()


def test_own_spawns_pair_recorded_units_with_the_engines_by_position() -> None:
    rec = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    assert _pairing(rec, rec[[2, 0, 1]] + 0.1).tolist() == [1, 2, 0]
    spec = load_map("3m")
    reps = replay([_episode(np.ones((5, 3), np.int64))], spec, 28.0, placed=False, seed=3)
    recorded = np.vstack([ALLIES, ENEMIES])
    assert np.linalg.norm(reps.pos_RTU2[0, 0] - recorded, axis=1).max() < 0.85  # paired, not crossed
    g = unpack(_episode(np.ones((1, 3), np.int64)).state_TS, 3, 3, CENTRE, 28.0)
    np.testing.assert_allclose(g["ally_pos"][0], ALLIES, atol=1e-4)


def test_the_cli_writes_its_report(tmp_path: Path) -> None:
    f = tmp_path / "log_0.tfrecord"
    write_tfrecords(f, _sequences(_rows(23, True, 1)) + _sequences(_rows(12, False, 2)))
    out, js = tmp_path / "r.md", tmp_path / "r.json"
    assert (
        main(["--map", "3m", "--extent", "28", str(f), "--seeds", "1", "--out", str(out), "--json", str(js)])
        == 0
    )
    text = out.read_text()
    assert "| win rate | 50.0 %" in text and "2 stitched from 5 sequences" in text
