"""og-marl's TFRecord files built by hand (gzip TFRecord of ``tf.train.Example`` of serialised
``TensorProto``s, as its logger writes them) and SMAC's 3m state; shared by the recorded-data benchmark tests
(tests/ is on ``sys.path`` under pytest)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def field(num: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def tensor_proto(a: np.ndarray) -> bytes:
    dtype = {np.dtype(np.float32): 1, np.dtype(np.int64): 9}[a.dtype]
    shape = b"".join(field(2, field(1, d)) for d in a.shape)
    return field(1, dtype) + field(2, shape) + field(4, a.tobytes())


def tfrecord_example(features: dict[str, np.ndarray]) -> bytes:
    entries = b"".join(
        field(1, field(1, k.encode()) + field(2, field(1, field(1, tensor_proto(v)))))
        for k, v in features.items()
    )
    return field(1, entries)


def write_tfrecords(path: Path, records: list[bytes]) -> None:
    framed = b"".join(struct.pack("<Q", len(r)) + b"\0" * 4 + r + b"\0" * 4 for r in records)
    path.write_bytes(gzip.compress(framed))


def state_3m(ally_xy: np.ndarray, enemy_xy: np.ndarray, last_action: bool) -> np.ndarray:
    """SMAC's 3m state (allies [health, cooldown, x, y], enemies [health, x, y], last actions 3 x 9)."""
    rel = lambda xy: (xy - 16.0) / 28.0  # noqa: E731 - centre 32 / 2, playable extent 28
    ally = np.column_stack([np.ones(3), np.zeros(3), rel(ally_xy)])
    enemy = np.column_stack([np.ones(3), rel(enemy_xy)])
    last = np.zeros(27)
    last[4] = float(last_action)
    return np.concatenate([ally.ravel(), enemy.ravel(), last]).astype(np.float32)
