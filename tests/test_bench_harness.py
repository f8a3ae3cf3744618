"""benchmarks/harness.py: the header every benchmark result file starts with."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import harness  # noqa: E402

from marl.envs.smac import ENGINE_VERSION  # noqa: E402


def test_header_names_command_date_code_engine_versions_machine_and_load():
    run = harness.start()
    lines = harness.header_lines(run, "/somewhere/benchmarks/x.py", ["--maps", "3m"], date_note="seed 3")
    keys = [line.split(":", 1)[0] for line in lines]
    assert keys == ["- command", "- date", "- code", "- versions", "- machine"]
    assert lines[0] == "- command: `.venv/bin/python benchmarks/x.py --maps 3m`"  # repository-relative
    assert re.fullmatch(r"- date: \d{4}-\d\d-\d\d \d\d:\d\d UTC; seed 3", lines[1])
    assert lines[2].endswith(f"SMAC engine {ENGINE_VERSION}")
    assert re.match(r"- code: (commit [0-9a-f]{7}|not a git checkout)", lines[2])
    assert "python " in lines[3] and "numpy " in lines[3]
    assert re.search(r"nproc \d+, load at start \d+\.\d\d, at end \d+\.\d\d; wall-clock \d+ s$", lines[4])


def test_command_keeps_the_python_it_is_given():
    assert harness.command("a/b/fidelity.py", [], python="python") == "python benchmarks/fidelity.py"


def test_command_shows_no_path_outside_the_repository():
    inside = str(harness.ROOT / "benchmarks" / "results" / "x.md")
    args = ["--out", inside, "/elsewhere/data/log_0.tfrecord", "--note", "a b", "results_dir=/elsewhere/r"]
    shown = harness.command("fidelity.py", args)
    assert shown == (
        ".venv/bin/python benchmarks/fidelity.py --out benchmarks/results/x.md "
        "'<outside>/log_0.tfrecord' --note 'a b' 'results_dir=<outside>/r'"
    )
