"""Property: whatever happens to the newest checkpoint's files, loading a run's checkpoints either uses the
newest intact one or ends in one clear :class:`CheckpointError`, never another exception (Hypothesis)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from marl.checkpoint import CheckpointError, load_latest, periodic
from marl.checkpoint_verify import write_manifest
from marl.trainer_state import check_payload

FILES = ["arrays.npz", "meta.json", "manifest.json", "agent.ckpt"]
TAGS = ["__array__", "__numpy_scalar__", "__tuple__", "__float__", "__other__"]

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(TAGS), inner, max_size=4)
        | st.tuples(st.sampled_from(TAGS), inner).map(lambda kv: {kv[0]: kv[1]})  # tag-shaped objects
    ),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def corruptions(draw: st.DrawFn) -> tuple:
    """(file, operation, its arguments)."""
    file = draw(st.sampled_from(FILES))
    op = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "replace_json", "edit_meta"]))
    frac = draw(st.floats(0, 1))
    byte = draw(st.integers(1, 255))
    value = draw(json_values)
    pick = draw(st.integers(0, 10_000))
    return file, op, frac, byte, value, pick


def _corrupt(folder: Path, file: str, op: str, frac: float, byte: int, value: Any, pick: int) -> None:
    path = folder / file
    if op == "edit_meta":  # set one node of meta.json (bookkeeping or payload tree) to a random value
        meta = json.loads((folder / "meta.json").read_text())
        where = _paths(meta)[1:]
        *parents, leaf = where[pick % len(where)]
        node = meta
        for k in parents:
            node = node[k]
        node[leaf] = value
        (folder / "meta.json").write_text(json.dumps(meta, allow_nan=True))
        return
    if not path.exists():
        return
    data = bytearray(path.read_bytes())
    at = int(frac * len(data))
    if op == "truncate":
        path.write_bytes(bytes(data[:at]))
    elif op == "flip" and data:
        data[min(at, len(data) - 1)] ^= byte
        path.write_bytes(bytes(data))
    elif op == "insert":
        path.write_bytes(bytes(data[:at]) + bytes([byte]) + bytes(data[at:]))
    elif op == "delete":
        path.unlink()
    elif op == "replace_json":
        path.write_text(json.dumps(value))


def _to_format2(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    meta["_checkpoint"]["format"] = 2
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "manifest.json").unlink()


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _last_two(source: Path, run: Path) -> tuple[Path, Path]:
    """The ``source`` run's two newest checkpoints copied into ``run``'s models/: (older, newest)."""
    for folder in periodic(source)[-2:]:
        shutil.copytree(folder, run / "models" / folder.name)
    older, newest = periodic(run)
    return older, newest


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(corruption=corruptions(), resign=st.booleans(), old_format=st.booleans())
# found by CI: a carriage return before the manifest's JSON (valid JSON whitespace)
@example(corruption=("manifest.json", "insert", 0.0, 13, None, 0), resign=False, old_format=False)
def test_loading_uses_the_newest_intact_checkpoint_or_says_why(
    trained: Path,
    corruption: tuple,
    resign: bool,
    old_format: bool,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        older, newest = _last_two(trained, run)
        if old_format:
            _to_format2(older)
            _to_format2(newest)
        original = _bytes(newest)
        _corrupt(newest, *corruption)
        if resign and not old_format:  # a hand edit that rewrote the manifest too
            write_manifest(newest)
        said: list[str] = []
        try:
            payload = load_latest(run, report=said.append, check=check_payload)
        except CheckpointError as exc:  # only when the older one is gone too: never here
            pytest.fail(f"the intact older checkpoint was not used: {exc}")
        used = Path(payload["_checkpoint"]["path"])
        assert used in (newest, older)
        if used == older:
            assert len(said) == 1 and str(newest) in said[0]  # the rejected folder is named, with why
        elif not resign and not old_format:  # verified by its manifest: only an unchanged folder is used
            now = _bytes(newest)  # (the manifest itself may differ by JSON whitespace: it says the same)
            assert json.loads(now.pop("manifest.json")) == json.loads(original.pop("manifest.json"))
            assert now == original


tagged = st.tuples(st.sampled_from(TAGS), json_values).map(lambda kv: {kv[0]: kv[1]})


@settings(max_examples=100, deadline=None, database=None)
@given(value=tagged | json_values, pick=st.integers(0, 10_000), old_format=st.booleans())
def test_any_edit_of_meta_is_used_or_refused_by_the_schema(
    trained: Path,
    value: Any,
    pick: int,
    old_format: bool,
) -> None:
    """A hand edit of one node of ``meta.json`` whose manifest was rewritten too (or that has none)."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        older, newest = _last_two(trained, run)
        if old_format:
            _to_format2(newest)
        _corrupt(newest, "meta.json", "edit_meta", 0.0, 1, value, pick)
        if not old_format:
            write_manifest(newest)
        said: list[str] = []
        payload = load_latest(run, report=said.append, check=check_payload)
        assert Path(payload["_checkpoint"]["path"]) in (newest, older)


@settings(max_examples=60, deadline=None, database=None)
@given(
    text=st.text(max_size=40) | json_values.map(json.dumps),
    name=st.sampled_from(["meta.json", "manifest.json"]),
)
def test_a_lone_corrupt_checkpoint_is_one_clear_error(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "models" / "100"
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text("{}")
        (folder / "arrays.npz").write_bytes(b"")
        (folder / name).write_text(text)
        with pytest.raises(CheckpointError, match=re.escape(str(folder))):
            load_latest(Path(tmp), report=lambda _: None, check=check_payload)
