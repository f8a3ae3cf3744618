"""Start positions on the real game, read from episodes recorded on StarCraft II (og-marl's SMAC datasets).

How the game places several units created at one point is in no document (docs/fidelity.md, "spawns").
Offline-MARL datasets recorded on the game hold SMAC's global state at every step, and SMAC's state gives
each unit's position as ``(pos - map_size / 2) / playable_extent`` (SMAC's ``get_state``; the extent is the
map's playable area, ``max_distance_x``/``_y``). The first state of every episode is therefore the game's
spawn layout. This script reads og-marl's TFRecord files (gzip TFRecord of ``tf.train.Example``, each
feature a serialised ``TensorProto``: decoded here with a minimal protobuf reader, no TensorFlow), takes
the sequences whose state has an all-zero last-action block (only the first step of an episode has one),
and writes, in ``benchmarks/research/spawn_layout.py``'s JSON format, every unit's offset from its side's
spawn point, so that ``spawn_layout.py --compare`` sets the engine beside the game.

    python benchmarks/fidelity/recorded_spawns.py --map 3m --extent 28 executor_sequence_log_*.tfrecord \\
        --json results/recorded_3m.json
    python benchmarks/research/spawn_layout.py --maps 3m --compare results/recorded_3m.json

``--extent`` is the playable area's width and height in game units (not in our map files; 28 on 3m,
measured from the same data: ally-to-ally offsets in the agents' observations, which SMAC divides by the
sight range 9, against the same offsets in the state). Maps with unit-type bits are not decoded yet (3m has
none). Results: ``benchmarks/results/recorded_spawns.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from marl.envs.smac.maps import load_map  # noqa: E402

_DTYPES = {1: np.float32, 2: np.float64, 3: np.int32, 9: np.int64}  # TensorProto's DataType numbers


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def fields(buf: bytes) -> list[tuple[int, int, object]]:
    """A protobuf message's ``(field number, wire type, value)`` list (values: int or bytes)."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i : i + size], i + size
        else:
            raise ValueError(f"protobuf wire type {wire} is not supported")
        out.append((num, wire, value))
    return out


def tensor(buf: bytes) -> np.ndarray:
    """A ``TensorProto`` with ``tensor_content`` (dtype 1), shape 2 (dims: size 1), content 4)."""
    dtype, shape, content = None, [], None
    for num, _, value in fields(buf):
        if num == 1:
            dtype = value
        elif num == 2:
            shape = [dict((n, v) for n, _, v in fields(d)).get(1, 0) for n, _, d in fields(value) if n == 2]
        elif num == 4:
            content = value
    if dtype not in _DTYPES or content is None:
        raise ValueError(f"unsupported TensorProto (dtype {dtype}, content {'set' if content else 'none'})")
    return np.frombuffer(content, dtype=_DTYPES[dtype]).reshape(shape)


def tfrecords(path: Path) -> Iterator[bytes]:
    """The records of a gzip TFRecord file (length, its CRC, data, its CRC; the CRCs are not checked)."""
    data = gzip.open(path).read()
    i = 0
    while i < len(data):
        (size,) = struct.unpack("<Q", data[i : i + 8])
        yield data[i + 12 : i + 12 + size]
        i += 12 + size + 4


def example(record: bytes) -> dict[str, np.ndarray]:
    """A ``tf.train.Example`` whose features each hold one serialised ``TensorProto`` (og-marl's layout)."""
    ((_, _, features),) = fields(record)
    out = {}
    for _, _, entry in fields(features):
        kv = {n: v for n, _, v in fields(entry)}
        ((_, _, bytes_list),) = fields(kv[2])
        ((_, _, value),) = fields(bytes_list)
        out[kv[1].decode()] = tensor(value)
    return out


def start_positions(paths: list[Path], map_name: str, extent: float) -> tuple[np.ndarray, np.ndarray]:
    """(episodes, n, 2) ally and (episodes, m, 2) enemy positions of every episode's first state."""
    spec = load_map(map_name)
    n, m = sum(g.count for g in spec.allies), sum(g.count for g in spec.enemies)
    n_actions = 6 + m
    centre = np.array(spec.map_size, dtype=float) / 2
    allies, enemies = [], []
    for path in paths:
        for rec in tfrecords(path):
            state = example(rec)["env_state"][0]
            if state.shape[0] != n * 4 + m * 3 + n * n_actions:
                raise ValueError(
                    f"{path}: a state of {state.shape[0]} values is not {map_name}'s (no type bits)"
                )
            if state[-n * n_actions :].any():  # not the first step of an episode
                continue
            ally = state[: n * 4].reshape(n, 4)[:, 2:4]
            enemy = state[n * 4 : n * 4 + m * 3].reshape(m, 3)[:, 1:3]
            allies.append(centre + extent * ally.astype(float))
            enemies.append(centre + extent * enemy.astype(float))
    return np.asarray(allies), np.asarray(enemies)


def layout(map_name: str, allies: np.ndarray, enemies: np.ndarray) -> dict:
    """``spawn_layout.py``'s per-map record: offsets from each side's (first group's) spawn point, the
    units of each episode in (x, y) order."""
    spec = load_map(map_name)
    out: dict = {}
    for key, pos, groups in (("allies", allies, spec.allies), ("enemies", enemies, spec.enemies)):
        if len({g.unit for g in groups}) != 1:
            raise ValueError(f"{map_name}: {key} of several unit types are not decoded yet")
        off = pos - np.asarray(groups[0].spawn, dtype=float)
        # units in (x, y) order in every episode, as SMAC sorts its agents (the game's enemy order varies)
        order = np.lexsort((off[..., 1], off[..., 0]), axis=-1)
        out[key] = np.take_along_axis(off, order[..., None], axis=1).tolist()
        out[f"{key}_types"] = [g.unit for g in groups for _ in range(g.count)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="og-marl TFRecord files of one map")
    ap.add_argument("--map", required=True, help="the SMAC map they were recorded on")
    ap.add_argument("--extent", type=float, required=True, help="the map's playable width and height")
    ap.add_argument("--json", type=Path, default=None, help="write spawn_layout.py's JSON here")
    args = ap.parse_args(argv)
    allies, enemies = start_positions(args.files, args.map, args.extent)
    if not len(allies):
        ap.error("no episode start found in those files")
    data = layout(args.map, allies, enemies)
    print(f"{len(allies)} episode starts in {len(args.files)} files ({args.map}, extent {args.extent:g})")
    for key in ("allies", "enemies"):
        off = np.asarray(data[key])
        rounded = [tuple(map(tuple, np.round(o, 4))) for o in off]
        common = max(set(rounded), key=rounded.count)
        print(f"{key}: {rounded.count(common)} of {len(off)} starts at {common} from the spawn point")
    if args.json:
        args.json.write_text(json.dumps({"backend": "sc2", "recorded": True, "maps": {args.map: data}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
