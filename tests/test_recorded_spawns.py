"""``benchmarks/fidelity/recorded_spawns.py``: og-marl's TFRecord files (gzip TFRecord, ``tf.train.Example``
of serialised ``TensorProto``s) decoded without TensorFlow, episode starts found by their all-zero last-action
block, positions recovered from SMAC's state and laid out as ``spawn_layout.py`` compares them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from og_records import state_3m, tfrecord_example, write_tfrecords  # tests/ is on sys.path

from benchmarks.fidelity.recorded_spawns import example, layout, main, start_positions, tfrecords


def test_episode_starts_are_read_back_as_the_games_layout(tmp_path: Path, capsys) -> None:
    allies = np.array([[9.0, 15.3115], [9.0, 16.0], [9.6885, 16.0]])
    enemies = np.array([[23.6885, 16.0], [23.0, 15.3115], [23.0, 16.0]])  # the game's order varies
    start = np.stack([state_3m(allies, enemies, False), state_3m(allies + 1, enemies, True)])
    later = np.stack([state_3m(allies + 2, enemies, True)] * 2)  # mid-episode: not a start
    f = tmp_path / "log_0.tfrecord"
    write_tfrecords(
        f,
        [
            tfrecord_example({"env_state": start, "agent_0_actions": np.zeros(2, np.int64)}),
            tfrecord_example({"env_state": later}),
        ],
    )
    ex = example(next(tfrecords(f)))
    assert set(ex) == {"env_state", "agent_0_actions"} and ex["env_state"].shape == (2, 48)
    np.testing.assert_array_equal(ex["env_state"], start)
    a, e = start_positions([f], "3m", 28.0)
    assert a.shape == (1, 3, 2) and e.shape == (1, 3, 2)  # one episode start of the two sequences
    np.testing.assert_allclose(a[0], allies, atol=1e-5)
    data = layout("3m", a, e)
    np.testing.assert_allclose(data["enemies"][0], [[0, -0.6885], [0, 0], [0.6885, 0]], atol=1e-5)  # sorted
    assert data["allies_types"] == ["marine"] * 3
    assert main([str(f), "--map", "3m", "--extent", "28", "--json", str(tmp_path / "g.json")]) == 0
    assert "1 episode starts in 1 files" in capsys.readouterr().out and (tmp_path / "g.json").is_file()


def test_a_state_of_another_map_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "log.tfrecord"
    write_tfrecords(f, [tfrecord_example({"env_state": np.zeros((2, 50), np.float32)})])
    with pytest.raises(ValueError, match="50 values is not 3m's"):
        start_positions([f], "3m", 28.0)
