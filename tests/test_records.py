"""Run records (``marl/report/records.py``): a run folder written as a record reads back as the same run, the
report over records gives the same rows, tables and files as over the run folders, and bad records, a
records "folder" that is a file and an overwrite of a different record are refused with what was wrong."""

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rliable", reason="the report extra is not installed: pip install -e '.[report]'")

from train_runs import fake_run, make_sweep  # noqa: E402  (tests/ is on sys.path under pytest)

from marl.provenance import PROVENANCE_FILE, append_provenance, code_version  # noqa: E402
from marl.report.cli import report_main, save_records  # noqa: E402
from marl.report.records import (  # noqa: E402
    RECORD_VERSION,
    RecordError,
    read_record,
    record_from_run_dir,
    write_record,
)
from marl.report.runs import load_run, load_runs  # noqa: E402
from marl.report.summary import analyse, markdown_tables  # noqa: E402


def _same_runs(a, b):
    """Two lists of runs equal in everything but where they were read from."""
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert dataclasses.replace(x, run_dir=Path(".")) == dataclasses.replace(y, run_dir=Path(".")), (
            x.run_dir
        )


def test_a_record_reads_back_as_its_run_folder_and_the_report_is_the_same(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "sweep")
    (sweep / "qmix_m1_seed1" / "result.json").write_text(json.dumps({"started": 100.0, "finished": 700.0}))
    recs = tmp_path / "runs" / "tiny"
    out = tmp_path / "out"
    assert report_main([str(sweep), "--no-absolute", "--reps", "100", "--out", str(out / "a")]) == 0
    argv = [
        str(sweep),
        "--no-absolute",
        "--reps",
        "100",
        "--out",
        str(out / "b"),
        "--save-records",
        str(recs),
    ]
    assert report_main(argv) == 0
    names = sorted(p.name for p in recs.iterdir())
    assert names == [f"qmix_m1_seed{k}.json" for k in range(4)] + [f"vdn_m1_seed{k}.json" for k in range(3)]
    assert "7 run records in" in capsys.readouterr().err
    # what the record keeps: the Run's fields and provenance, no checkpoint, no invented git commit
    rec = read_record(recs / "qmix_m1_seed1.json")
    assert (rec["env"], rec["task"], rec["alg"], rec["seed"], rec["test_nepisode"]) == (
        "fake",
        "m1",
        "qmix",
        1,
        4,
    )
    assert rec["version"] == RECORD_VERSION and rec["budget"] == 400 and rec["source"] == "qmix_m1_seed1"
    assert rec["curves"]["test_win_rate"] == [[0, 0.0], [100, 0.96], [400, 0.5]]
    assert rec["curves"]["test_return_mean"] == [[0, 0.0], [100, 9.6], [400, 5.0]]
    assert rec["absolute"] == {"episodes": 40, "win_rate": 0.5, "return_mean": 5.0}
    cfg = yaml.safe_load((sweep / "qmix_m1_seed1" / "config.yaml").read_text())
    assert rec["config"] == cfg
    assert rec["wall_clock"]["last"] >= rec["wall_clock"]["first"] > 0
    assert rec["sweep_task"] == {"started": 100.0, "finished": 700.0}
    assert "provenance" not in rec  # the fake run has no provenance.jsonl: no commit is invented
    assert "commit" not in json.dumps(rec) and "time_s" not in rec["curves"]  # only the curves reports read
    # one Run, one report, whether read from the folders or from the records
    from_dirs, _ = load_runs([sweep], "test_win_rate", 0.95)
    from_recs, notes = load_runs([recs], "test_win_rate", 0.95)
    _same_runs(from_dirs, from_recs)
    assert not notes and load_run(recs / "qmix_m1_seed1.json", "test_win_rate", 0.95).started == 100.0
    for metric, target in (("test_win_rate", 0.95), ("test_return_mean", 5.0)):
        a = analyse(load_runs([sweep], metric, target)[0], metric, target, reps=100)
        b = analyse(load_runs([recs], metric, target)[0], metric, target, reps=100)
        assert a == b and markdown_tables(a) == markdown_tables(b)
    assert report_main([str(recs), "--no-absolute", "--reps", "100", "--out", str(out / "c")]) == 0
    for name in ("report.md", "marl_eval.json"):
        text = [(out / d / name).read_text() for d in "ac"]
        if name == "report.md":  # the time it was written may differ
            text = [t.split("\n", 4)[4] for t in text]
        assert text[0] == text[1], name
    rows = [json.loads((out / d / "report.json").read_text()) for d in "ac"]
    assert rows[0]["rows"] == rows[1]["rows"] and rows[0]["poi"] == rows[1]["poi"]
    assert rows[1]["runs"][0]["run_dir"].endswith("qmix_m1_seed0.json")
    # a run folder and its record given together: counted once
    both, notes = load_runs([sweep, recs / "qmix_m1_seed1.json"], "test_win_rate", 0.95)
    assert len(both) == 7 and len(notes) == 1 and "the same run as" in notes[0]


def test_a_different_record_is_not_overwritten_without_force(tmp_path, capsys):
    recs = tmp_path / "recs"
    first = fake_run(tmp_path / "a", "qmix", "m1", 0, [(0, 0.0), (400, 0.5)])
    other = fake_run(tmp_path / "b", "qmix", "m1", 0, [(0, 0.0), (400, 0.9)])
    path = write_record(record_from_run_dir(first), recs)
    before = path.read_text()
    assert write_record(record_from_run_dir(first), recs) == path and path.read_text() == before  # same: kept
    runs, _ = load_runs([other], "test_win_rate", 0.95)
    with pytest.raises(RecordError, match="already holds a different record of qmix on m1 seed 0") as err:
        save_records(runs, recs)
    assert str(path) in str(err.value) and "they differ in: curves" in str(err.value)
    assert "--force" in str(err.value) and path.read_text() == before
    with pytest.raises(SystemExit) as exc:
        report_main([str(other), "--no-absolute", "--reps", "100", "--save-records", str(recs)])
    assert exc.value.code == 2 and "already holds a different record" in capsys.readouterr().err
    # two runs of one alg/map/seed in one call: nothing written
    with pytest.raises(RecordError, match="would both be written to"):
        save_records(load_runs([tmp_path / "a", tmp_path / "b"], "test_win_rate", 0.95)[0], tmp_path / "new")
    assert not list((tmp_path / "new").iterdir())
    argv = [str(other), "--no-absolute", "--reps", "100", "--save-records", str(recs), "--force"]
    assert report_main([*argv, "--out", str(tmp_path / "out")]) == 0
    assert read_record(path)["curves"]["test_win_rate"][-1] == [400, 0.9]


def test_bad_records_and_a_records_file_are_refused_with_what_is_allowed(tmp_path, capsys):
    recs = tmp_path / "recs"
    good = write_record(
        record_from_run_dir(fake_run(tmp_path, "qmix", "m1", 0, [(0, 0.0), (400, 0.5)])), recs
    )
    data = json.loads(good.read_text())
    cases = {
        "cut.json": (good.read_text()[:100], "does not parse as JSON"),
        "v2.json": (
            json.dumps({**data, "version": 2}),
            f"format version 2; this version of marl reads version {RECORD_VERSION} only",
        ),
        "other.json": (
            json.dumps({"rows": []}),
            'not a run record (a JSON object with "format": "marl-run-record"',
        ),
        "noseed.json": (json.dumps({k: v for k, v in data.items() if k != "seed"}), "malformed fields: seed"),
        "badcurve.json": (json.dumps({**data, "curves": {"test_win_rate": [[0]]}}), "curves.test_win_rate"),
    }
    for name, (text, why) in cases.items():
        bad = tmp_path / "bad" / name
        bad.parent.mkdir(exist_ok=True)
        bad.write_text(text)
        with pytest.raises(RecordError, match=why.replace("(", r"\(")):
            load_runs([recs, bad], "test_win_rate", 0.95)
    # in a folder scan, a file named like a record is read as one: a corrupt one stops the report
    (recs / "qmix_m1_seed1.json").write_text("{")
    with pytest.raises(SystemExit) as exc:
        report_main([str(recs), "--no-absolute", "--reps", "100", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "qmix_m1_seed1.json: the run record does not parse as JSON" in err
    (recs / "qmix_m1_seed1.json").unlink()
    with pytest.raises(RecordError, match="is a file; records go into a folder"):
        write_record(data, good)
    with pytest.raises(SystemExit) as exc:
        report_main([str(recs), "--no-absolute", "--reps", "100", "--save-records", str(good)])
    assert exc.value.code == 2 and "is a file; records go into a folder" in capsys.readouterr().err
    with pytest.raises(RecordError, match="is a file but not a run record"):
        load_runs([tmp_path / "qmix_m1_seed0" / "config.yaml"], "test_win_rate", 0.95)
    with pytest.raises(SystemExit) as exc:
        report_main([str(recs), "--force"])
    assert exc.value.code == 2 and "--force goes with --save-records" in capsys.readouterr().err


def test_a_record_carries_the_runs_provenance(tmp_path):
    run = fake_run(tmp_path / "a", "qmix", "m1", 0, [(0, 0.0), (400, 0.5)])
    first = append_provenance(run, "start")
    (run / PROVENANCE_FILE).open("a").write("{cut short by a crash\n")
    second = append_provenance(run, "resume")
    rec = record_from_run_dir(run)
    assert rec["provenance"] == [first, second]
    assert [p["event"] for p in rec["provenance"]] == ["start", "resume"]
    code = code_version()  # the tests run in a git checkout of this repository
    assert first["commit"] == code["commit"] and len(code["commit"]) == 40 and first["dirty"] == code["dirty"]
    assert first["machine"]["nproc"] >= 1 and first["versions"]["python"].count(".") == 2
    assert read_record(write_record(rec, tmp_path / "recs"))["provenance"] == rec["provenance"]
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**cfg, "results_dir": str(tmp_path / "sweeps" / "s1")}))
    assert record_from_run_dir(run)["config"]["results_dir"] == "s1"  # no machine path in a record
    assert code_version(tmp_path) == {"commit": None}  # not a git checkout: said, not guessed


def test_the_report_names_the_code_of_each_row(tmp_path):
    runs = []
    for seed, lines in enumerate(
        (
            [{"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": True}],
            [{"commit": "a" * 40, "dirty": False}],
        )
    ):
        run = fake_run(tmp_path / f"r{seed}", "qmix", "m1", seed, [(0, 0.0), (400, 0.5)])
        (run / PROVENANCE_FILE).write_text("".join(json.dumps({"event": "start", **p}) + "\n" for p in lines))
        runs.append(load_run(run, "test_win_rate", 0.95))
    assert runs[0].code == ("aaaaaaa", "bbbbbbb+") and runs[1].code == ("aaaaaaa",)
    bare = load_run(fake_run(tmp_path / "r9", "qmix", "m2", 0, [(0, 0.0), (400, 0.5)]), "test_win_rate", 0.95)
    assert bare.code == ()  # no provenance: nothing invented
    result = analyse([*runs, bare], "test_win_rate", 0.95, reps=50)
    assert [r["code"] for r in result["rows"]] == [["aaaaaaa", "bbbbbbb+"], []]
    rows = [line for line in markdown_tables(result).splitlines() if line.startswith("| ")]
    assert rows[0].endswith("| code |")
    assert rows[1].endswith("| aaaaaaa, bbbbbbb+ |") and rows[2].endswith("| — |")
