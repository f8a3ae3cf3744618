"""``benchmarks/recorded_spawns.py``: og-marl's TFRecord files (gzip TFRecord, ``tf.train.Example`` of
serialised ``TensorProto``s) decoded without TensorFlow, episode starts found by their all-zero last-action
block, positions recovered from SMAC's state and laid out as ``spawn_layout.py`` compares them."""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from recorded_spawns import example, layout, main, start_positions, tfrecords  # noqa: E402


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def _field(num: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(num << 3) + _varint(payload)
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _tensor(a: np.ndarray) -> bytes:
    dtype = {np.dtype(np.float32): 1, np.dtype(np.int64): 9}[a.dtype]
    shape = b"".join(_field(2, _field(1, d)) for d in a.shape)
    return _field(1, dtype) + _field(2, shape) + _field(4, a.tobytes())


def _record(features: dict[str, np.ndarray]) -> bytes:
    entries = b"".join(
        _field(1, _field(1, k.encode()) + _field(2, _field(1, _field(1, _tensor(v)))))
        for k, v in features.items()
    )
    return _field(1, entries)


def _write(path: Path, records: list[bytes]) -> None:
    framed = b"".join(struct.pack("<Q", len(r)) + b"\0" * 4 + r + b"\0" * 4 for r in records)
    path.write_bytes(gzip.compress(framed))


def _state_3m(ally_xy: np.ndarray, enemy_xy: np.ndarray, last_action: bool) -> np.ndarray:
    """SMAC's 3m state (allies [health, cooldown, x, y], enemies [health, x, y], last actions 3 x 9)."""
    rel = lambda xy: (xy - 16.0) / 28.0  # noqa: E731 - centre 32 / 2, playable extent 28
    ally = np.column_stack([np.ones(3), np.zeros(3), rel(ally_xy)])
    enemy = np.column_stack([np.ones(3), rel(enemy_xy)])
    last = np.zeros(27)
    last[4] = float(last_action)
    return np.concatenate([ally.ravel(), enemy.ravel(), last]).astype(np.float32)


def test_episode_starts_are_read_back_as_the_games_layout(tmp_path: Path, capsys) -> None:
    allies = np.array([[9.0, 15.3115], [9.0, 16.0], [9.6885, 16.0]])
    enemies = np.array([[23.6885, 16.0], [23.0, 15.3115], [23.0, 16.0]])  # the game's order varies
    start = np.stack([_state_3m(allies, enemies, False), _state_3m(allies + 1, enemies, True)])
    later = np.stack([_state_3m(allies + 2, enemies, True)] * 2)  # mid-episode: not a start
    f = tmp_path / "log_0.tfrecord"
    _write(
        f,
        [
            _record({"env_state": start, "agent_0_actions": np.zeros(2, np.int64)}),
            _record({"env_state": later}),
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
    _write(f, [_record({"env_state": np.zeros((2, 50), np.float32)})])
    with pytest.raises(ValueError, match="50 values is not 3m's"):
        start_positions([f], "3m", 28.0)
