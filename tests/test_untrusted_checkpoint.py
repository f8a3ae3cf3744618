"""A run folder as untrusted input: every corruption of the newest checkpoint (its files, ``meta.json``'s
bookkeeping and tags, its manifest) is named and walked back past, by ``load_latest``, ``--resume`` and
``evaluate.py`` alike; an older folder without a manifest still loads; ``log.jsonl`` lines are checked."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from marl.checkpoint import Checkpointer, CheckpointError, load, load_latest, periodic
from marl.checkpoint_verify import write_manifest
from marl.cli import evaluate_main
from marl.run_folder import RunFolderError, read_log, rewind_logs
from marl.trainer import Trainer
from marl.trainer_state import check_payload


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A fresh copy of the trained run folder, to corrupt."""
    return Path(shutil.copytree(trained, tmp_path / "r"))


def _meta(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text())


def _put_meta(folder: Path, meta: dict | str, resign: bool) -> None:
    text = meta if isinstance(meta, str) else json.dumps(meta)
    (folder / "meta.json").write_text(text)
    if resign:  # a hand edit that also rewrote the manifest: the schema must still catch it
        write_manifest(folder)


def _edit(key_path: tuple[str, ...], value: object, resign: bool) -> Callable[[Path], None]:
    def corrupt(folder: Path) -> None:
        meta = _meta(folder)
        node = meta
        for k in key_path[:-1]:
            node = node[k]
        node[key_path[-1]] = value
        _put_meta(folder, meta, resign)

    return corrupt


def _manifest(text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / "manifest.json").write_text(text)


def _nan_literal(folder: Path) -> None:
    meta = _meta(folder)
    meta["tree"]["meta"]["best_metric"] = 12345.5
    _put_meta(folder, json.dumps(meta).replace("12345.5", "NaN"), resign=True)


def _as_format2(folder: Path) -> None:
    """What marl wrote before manifests: format 2, the digest of arrays.npz in meta.json."""
    meta = _meta(folder)
    meta["_checkpoint"]["format"] = 2
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "manifest.json").unlink()


# name -> (corruption of the newest checkpoint folder, file named in the report, words of the reason)
CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "t_env edited": (_edit(("_checkpoint", "t_env"), 10**9, False), "meta.json", "corrupt"),
    "t_env edited, manifest rewritten": (
        _edit(("_checkpoint", "t_env"), 10**9, True),
        "meta.json",
        "differs from the folder's name",
    ),
    "meta.json deleted": (lambda f: (f / "meta.json").unlink(), "meta.json", "missing"),
    "array tag holds a list": (
        _edit(("tree", "arrays"), {"__array__": [1, 2]}, True),
        "meta.json",
        "no array",
    ),
    "float tag holds junk": (
        _edit(("tree", "meta", "best_metric"), {"__float__": "abc"}, True),
        "meta.json",
        "__float__ must be",
    ),
    "unknown tag": (_edit(("tree", "rng"), {"__eval__": "x"}, True), "meta.json", "malformed tag"),
    "deep nesting": (
        lambda f: _put_meta(f, "[" * 100_000 + "]" * 100_000, True),
        "meta.json",
        "nested deeper",
    ),
    "NaN literal": (_nan_literal, "meta.json", "NaN"),
    "number overflows": (_edit(("_checkpoint", "metric"), "OVER", True), "meta.json", "metric"),
    "meta.json not an object": (lambda f: _put_meta(f, "5", True), "meta.json", "exactly the keys"),
    "negative episode": (_edit(("tree", "meta", "episode"), -3, True), "meta.json", "meta.episode"),
    "config unusable": (_edit(("tree", "meta", "config"), {"t_max": "x"}, True), "meta.json", "config"),
    "manifest deleted": (lambda f: (f / "manifest.json").unlink(), "manifest.json", "missing"),
    "manifest a number": (_manifest("5"), "manifest.json", "malformed"),
    "manifest escapes": (
        _manifest(
            json.dumps(
                {"format": 1, "files": {"../x": "0" * 64, "meta.json": "0" * 64, "arrays.npz": "0" * 64}}
            )
        ),
        "manifest.json",
        "not allowed",
    ),
    "arrays truncated": (
        lambda f: (f / "arrays.npz").write_bytes((f / "arrays.npz").read_bytes()[:100]),
        "arrays.npz",
        "corrupt",
    ),
    "agent.ckpt altered": (lambda f: (f / "agent.ckpt").write_bytes(b"x"), "agent.ckpt", "corrupt"),
    "old format, t_env edited": (
        lambda f: (_as_format2(f), _edit(("_checkpoint", "t_env"), 10**9, False)(f)),
        "meta.json",
        "differs from the folder's name",
    ),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_a_corrupt_newest_checkpoint_is_named_and_walked_back(run: Path, name: str) -> None:
    corrupt, file, reason = CORRUPTIONS[name]
    folders = periodic(run)
    newest, older = folders[-1], folders[-2]
    corrupt(newest)
    said: list[str] = []
    payload = load_latest(run, report=said.append, check=check_payload)
    assert payload["_checkpoint"]["path"] == str(older)
    assert len(said) == 1 and str(newest / file) in said[0] and reason in said[0], said
    with pytest.raises(CheckpointError, match=reason.replace("(", r"\(")):
        check_payload(load(newest))


def test_the_overflowing_number_is_refused(run: Path) -> None:
    newest = periodic(run)[-1]
    _put_meta(newest, (newest / "meta.json").read_text().replace('"metric": null', '"metric": 1e999'), True)
    said: list[str] = []
    assert load_latest(run, report=said.append)["_checkpoint"]["path"] != str(newest)
    assert "overflows" in said[0] and "meta.json" in said[0]


def test_checkpoints_without_a_manifest_still_load(run: Path) -> None:
    for folder in periodic(run):
        _as_format2(folder)
    newest = periodic(run)[-1]
    payload = load_latest(run, report=pytest.fail, check=check_payload)
    assert payload["_checkpoint"]["path"] == str(newest) and payload["_checkpoint"]["format"] == 2
    (newest / "arrays.npz").write_bytes(b"PK" + (newest / "arrays.npz").read_bytes()[2:-10])
    with pytest.raises(CheckpointError, match="arrays.npz: corrupt"):
        load(newest)


def test_resume_and_evaluate_walk_back_alike(run: Path, capsys: pytest.CaptureFixture) -> None:
    folders = periodic(run)
    newest, older = folders[-1], folders[-2]
    _edit(("_checkpoint", "t_env"), 10**9, True)(newest)
    with pytest.raises(SystemExit) as exit_:
        evaluate_main(["--checkpoint", str(newest), "--episodes", "1", "--envs", "1"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "meta.json" in err and "folder's name" in err and "Traceback" not in err
    result = evaluate_main(["--checkpoint", str(run), "--episodes", "2", "--envs", "1"])
    assert result["episodes"] == 2
    resumed = Trainer(None, resume=run)
    try:
        assert resumed.t_env == int(older.name)
    finally:
        resumed._close(plot=False)
    assert not (run / "models" / str(10**9)).exists()
    Checkpointer(run, keep_last=2).save(int(older.name) + 1, {"w": 1})  # the newer corrupt folder does not
    assert older in periodic(run)  # count among the kept saves, so the intact older one stays


def test_no_intact_checkpoint_is_one_clear_error(run: Path) -> None:
    for folder in periodic(run):
        (folder / "meta.json").write_text("{")
    with pytest.raises(CheckpointError, match="no intact checkpoint under .*rejected: .*meta.json"):
        load_latest(run, report=lambda _: None)


# ------------------------------------------------------------------------------------------- log.jsonl
@pytest.mark.parametrize(
    ("line", "reason"),
    [("5", "not a JSON object"), ('{"t": 1, "key": "x", "value": NaN}', "NaN"), ('{"t": "x"}', "t must be")],
)
def test_a_malformed_log_line_is_named_before_anything_is_written(run: Path, line: str, reason: str) -> None:
    log = run / "log.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([*lines[:2], line, *lines[2:]]) + "\n")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir() if p.is_file()}
    with pytest.raises(RunFolderError, match=rf"log.jsonl line 3: .*{reason}.*delete that line"):
        read_log(run)
    with pytest.raises(RunFolderError, match="line 3"):
        Trainer(None, resume=run)
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir() if p.is_file()}
    assert after == before


def test_a_log_line_cut_short_by_a_crash_is_dropped(run: Path) -> None:
    log = run / "log.jsonl"
    n = len(read_log(run))
    with open(log, "a") as fh:
        fh.write('{"t": 5, "key": "loss", "val')
    assert len(read_log(run)) == n
    rewind_logs(run, 10**9)
    assert log.read_text().endswith("}\n") and len(read_log(run)) == n


def test_a_tagged_tree_root_is_refused(run: Path) -> None:
    newest = periodic(run)[-1]
    _edit(("tree",), {"__tuple__": [1, 2]}, True)(newest)
    with pytest.raises(CheckpointError, match="tree must be an object"):
        load(newest)
