"""The tier table of tests/conftest.py names real files and tests, and every collected test has one tier."""

from __future__ import annotations

import re
from pathlib import Path

import conftest
import pytest

TESTS = Path(__file__).resolve().parent


def test_every_file_in_the_table_exists() -> None:
    missing = sorted(f for f in conftest.FILE_TIERS if not (TESTS / f).is_file())
    assert not missing, f"FILE_TIERS names files that do not exist: {missing}"
    assert set(conftest.FILE_TIERS.values()) <= set(conftest.TIERS)


def test_every_test_pattern_names_a_test_of_a_listed_file() -> None:
    for pattern, tier in conftest.TEST_TIERS.items():
        file, test = pattern.split("::")
        name = re.match(r"\w+", test).group()
        assert tier in conftest.TIERS, pattern
        assert conftest.FILE_TIERS.get(file) == "unit", f"{pattern}: only unit files need per-test entries"
        assert f"def {name}(" in (TESTS / file).read_text(encoding="utf-8"), f"{pattern}: no such test"


def test_patterns_take_brackets_literally_and_star_as_any_text() -> None:
    assert conftest._matches("f.py::t[True-61-96-64]", "f.py::t[*-61-96-64]")
    assert conftest._matches("f.py::t[qmix-True]", "f.py::t[*-True]")
    assert not conftest._matches("f.py::t[qmix-False]", "f.py::t[*-True]")
    assert not conftest._matches("f.py::tT", "f.py::t[T]")  # not a character class
    assert conftest._matches("f.py::t", "f.py::t") and not conftest._matches("f.py::t2", "f.py::t")


def test_this_test_has_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    tiers = [t for t in conftest.TIERS if request.node.get_closest_marker(t) is not None]
    assert tiers == ["unit"]


def test_no_test_file_imports_another() -> None:
    """Shared helpers and fixtures live in helper modules and conftest.py, never in a test file (an import
    of a test file runs its module-level code and, for a fixture, repeats its scope in the importer)."""
    found = [
        f"{path.name}: {m.group(0).strip()}"
        for path in sorted(TESTS.glob("test_*.py"))
        for m in re.finditer(r"^\s*(?:from|import)\s+test_\w+", path.read_text(encoding="utf-8"), re.M)
    ]
    assert not found, f"test files import other test files: {found}"


def test_under_xdist_the_learning_and_slow_tests_start_first(request: pytest.FixtureRequest) -> None:
    assert conftest._start_rank(request.node) == (True, True, True)  # this test: not learning, not slow, unit
    ranks = [conftest._start_rank(item) for item in request.session.items]
    if hasattr(request.config, "workerinput"):  # a pytest-xdist worker: its collection is in that order
        assert ranks == sorted(ranks)


def test_the_file_groups_name_test_files_and_mark_their_tests(request: pytest.FixtureRequest) -> None:
    for prefix, group in conftest.FILE_GROUPS.items():
        assert sorted(TESTS.glob(f"{prefix}*.py")), f"{prefix}: names no test file"
        for item in request.session.items:
            if item.path.name.startswith(prefix):
                assert item.get_closest_marker("xdist_group").args == (group,), item.nodeid


def test_a_long_call_is_listed_unless_a_marker_says_why() -> None:
    assert conftest.unexplained_long(conftest.LONG_S + 1, {"integration": 1, "test_x": 1})
    assert not conftest.unexplained_long(conftest.LONG_S - 1, {"integration": 1})
    for marker in ("slow", "learning", "benchmarks"):
        assert not conftest.unexplained_long(conftest.LONG_S + 1, {"integration": 1, marker: 1})
