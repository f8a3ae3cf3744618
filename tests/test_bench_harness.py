"""benchmarks/harness.py: the header every benchmark result file starts with."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from benchmarks import harness
from marl.envs.smac import ENGINE_VERSION


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
    script = harness.ROOT / "benchmarks" / "fidelity" / "fidelity.py"
    assert harness.command(script, [], python="python") == "python benchmarks/fidelity/fidelity.py"


def test_command_names_a_script_by_its_suite_folder_and_one_elsewhere_by_its_name():
    # a script's __file__ inside the repository: its path from the root, suite folder included
    for script in sorted((harness.ROOT / "benchmarks").glob("*/*.py")):
        suite = script.parent.name
        assert harness.script_path(script) == f"benchmarks/{suite}/{script.name}"
    # a copy outside the repository, or a bare name: no path beyond the name
    assert harness.script_path("/elsewhere/benchmarks/learning/x.py") == "benchmarks/x.py"
    assert harness.script_path("x.py") == "benchmarks/x.py"


def test_command_shows_no_path_outside_the_repository():
    inside = str(harness.ROOT / "benchmarks" / "results" / "x.md")
    args = ["--out", inside, "/elsewhere/data/log_0.tfrecord", "--note", "a b", "results_dir=/elsewhere/r"]
    shown = harness.command(harness.ROOT / "benchmarks" / "fidelity" / "fidelity.py", args)
    assert shown == (
        ".venv/bin/python benchmarks/fidelity/fidelity.py --out benchmarks/results/x.md "
        "'<outside>/log_0.tfrecord' --note 'a b' 'results_dir=<outside>/r'"
    )


def test_header_line_is_the_header_on_one_line():
    line = harness.header_line(
        harness.start(),
        harness.ROOT / "benchmarks/learning/learn_baselines.py",
        ["--map", "3m"],
        python="python",
    )
    assert line.startswith("`python benchmarks/learning/learn_baselines.py --map 3m`: date ")
    assert "; code commit " in line or "; code not a git checkout" in line
    assert "; versions python " in line and "; machine " in line and "\n" not in line


def _spin(cpu_s: float) -> None:
    """Keep this thread busy for ``cpu_s`` CPU seconds."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < cpu_s:
        pass


def test_alternate_runs_a_b_a_b_and_the_costlier_side_has_the_larger_median():
    cheap = lambda: time.sleep(0.005) or {"rate": 2.0}  # noqa: E731  (waits: no CPU)
    dear = lambda: _spin(0.05) or {"rate": 1.0}  # noqa: E731  (works: 50 ms CPU)
    alt = harness.alternate(cheap, dear, reps=3, names=("cheap", "dear"), warmup=1)
    assert [(r.index, r.side) for r in alt.rounds] == [(i, s) for i in range(3) for s in ("cheap", "dear")]
    assert alt.ratio() > 2  # dear / cheap, wall-clock medians
    assert alt.median("dear", "cpu_s") > 0.045 > 0.02 > alt.median("cheap", "cpu_s")
    assert alt.median("cheap", "rate") == 2.0 and alt.ratio("rate") == 0.5  # a measure the call returned
    rows = alt.round_lines("3m")
    assert len(rows) == 6 and "CPU s" in harness.ROUND_HEAD[0] and "CPU / wall" in harness.ROUND_HEAD[0]
    cells = [c.strip() for c in rows[1].strip("|").split("|")]
    assert cells[:3] == ["3m", "1", "dear"] and float(cells[4]) > 0.045 and float(cells[5]) > 0.3


def test_alternate_times_commands_by_their_children_cpu_time():
    idle = [sys.executable, "-c", "print(1)"]
    busy = [sys.executable, "-c", "print(sum(range(3 * 10**7)))"]
    alt = harness.alternate(idle, busy, reps=1, names=("idle", "busy"))
    assert alt.rounds[0].value.strip() == "1"  # a command's value is its standard output
    assert alt.median("busy", "cpu_s") > alt.median("idle", "cpu_s") + 0.1  # the child's CPU is counted
    assert alt.ratio("cpu_s") > 1


def test_alternate_refuses_bad_input_and_reports_a_failing_command():
    with pytest.raises(ValueError, match="reps must be >= 1"):
        harness.alternate(time.time, time.time, reps=0)
    with pytest.raises(ValueError, match="two different side names"):
        harness.alternate(time.time, time.time, reps=1, names=("x", "x"))
    with pytest.raises(RuntimeError, match="exited 3"):
        harness.alternate([sys.executable, "-c", "exit(3)"], time.time, reps=1)
    with pytest.raises(ValueError, match="no side 'c'"):
        harness.alternate(time.time, time.time, reps=1).median("c")


# real_game_curves.py still writes its own command and date lines (it is another change's to move)
_OWN_HEADER: set[str] = set()


def test_no_benchmark_writes_its_own_command_line():
    bench = Path(harness.__file__).parent
    for script in sorted(bench.glob("*.py")):
        text = script.read_text(encoding="utf-8")
        if script.name == "harness.py" or script.name in _OWN_HEADER:
            continue
        own = '"- command:' in text or "'- command:" in text
        assert not own, f"{script.name} writes its own command line; use harness.header_lines"


def test_alternate_all_keeps_the_order_of_any_number_of_sides_and_in_turn_cycles_items():
    seen: list[str] = []
    sides = {name: harness.in_turn(seen.append, [f"{name}1", f"{name}2"]) for name in ("x", "y", "z")}
    alt = harness.alternate_all(sides, reps=3)
    assert alt.sides == ("x", "y", "z")
    assert seen == ["x1", "y1", "z1", "x2", "y2", "z2", "x1", "y1", "z1"]  # rounds in order, items in turn
    assert len(alt.measures("z")) == 3
    slow = harness.alternate_all({"a": time.time, "b": time.time, "c": lambda: _spin(0.03)}, reps=1)
    assert slow.ratio(b="c", a="b") > 1  # any two sides compared by name (wall-clock)
    with pytest.raises(ValueError, match="at least two sides"):
        harness.alternate_all({"a": time.time}, reps=1)


def test_mirror_runs_every_second_round_in_reverse_and_by_round_groups_the_values():
    order: list[str] = []
    sides = {n: (lambda n=n: order.append(n) or n.upper()) for n in ("a", "b", "c")}
    alt = harness.alternate_all(sides, reps=3, mirror=True)
    assert order == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    rounds = alt.by_round()
    assert [list(r) for r in rounds] == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"]]  # as they ran
    assert rounds[1] == {"c": "C", "b": "B", "a": "A"}
