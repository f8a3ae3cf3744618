"""The README, the manual in docs/ and the benchmarks index: sizes, links, and the site's strict build."""

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`\s]+)`", text))


def test_readme_is_one_screenful_per_question_and_links_the_manual():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for heading in (
        "## Install",
        "## Quickstart",
        "## Algorithms",
        "## Environments",
        "## Results",
        "## Citing",
    ):
        assert heading in text
    assert text.index("docs/getting-started.md") < text.index("## Install")  # the index comes first
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), f"README.md links {link}, which does not exist"


BENCH = ROOT / "benchmarks"
SUITES = ("fidelity", "interop", "learner_step", "learning", "research", "throughput")


def test_benchmarks_are_suite_folders_around_one_shared_harness():
    assert sorted(p.name for p in BENCH.glob("*.py")) == ["__init__.py", "harness.py"]
    packages = sorted(p.name for p in BENCH.iterdir() if (p / "__init__.py").is_file())
    assert tuple(packages) == SUITES
    folders = sorted(p.name for p in BENCH.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted([*SUITES, "data", "results"])
    # the suites stand without the one-off studies: no suite imports research/
    suite_files = [p for p in BENCH.glob("*/*.py") if p.parent.name != "research"]
    assert [p.name for p in suite_files if "benchmarks.research" in p.read_text(encoding="utf-8")] == []


def test_every_benchmark_script_and_result_file_is_in_the_index():
    index = (BENCH / "README.md").read_text(encoding="utf-8")
    names = _backticked(index)
    # every script by its path under benchmarks/: a suite's in the suites' table, a study's in the studies'
    suites_part, studies_part = index.split("## One-off studies")
    scripts = sorted(p.relative_to(BENCH).as_posix() for p in BENCH.glob("*/*.py") if p.name != "__init__.py")
    assert [s for s in scripts if s not in names] == []
    part = {True: _backticked(studies_part), False: _backticked(suites_part)}
    assert [s for s in scripts if s not in part[s.startswith("research/")]] == []
    # no entry names a script or a data file that is not there (a path left behind by a move)
    listed = [n for n in names if re.fullmatch(r"[a-z_]+/\w+\.(py|yaml|json)", n)]
    assert [n for n in listed if not (BENCH / n).is_file()] == []
    assert [p.name for p in (BENCH / "data").iterdir() if p.name not in names] == []
    results = sorted(p.name for p in (BENCH / "results").iterdir() if p.is_file())
    patterns = [n for n in names if "." in n or "*" in n]
    unindexed = [r for r in results if not any(fnmatch.fnmatch(r, p) for p in patterns)]
    assert unindexed == []


def _tracked_text() -> list[Path]:
    """The repository's prose and code, less tests/ and the result files (they keep their commands as run)."""
    files = [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "Makefile",
        ROOT / "mkdocs.yml",
        BENCH / "README.md",
    ]
    files += sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "scripts").glob("*.py"))
    files += sorted((ROOT / "marl").rglob("*.py")) + sorted((ROOT / "marl").rglob("*.yaml"))
    files += sorted((ROOT / "configs").rglob("*.yaml")) + sorted(BENCH.glob("*/*.py"))
    return [f for f in files if f.is_file()]


def test_every_benchmarks_path_the_repository_names_exists():
    stale = []
    for path in _tracked_text():
        text = path.read_text(encoding="utf-8")
        for name in sorted(set(re.findall(r"benchmarks/[\w/]+\.(?:py|yaml|json|md)\b", text))):
            if not (ROOT / name).exists() and not name.startswith("benchmarks/results/"):
                stale.append(f"{path.relative_to(ROOT)}: {name}")
    assert stale == []


def _nav_pages(nav: list) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # mkdocs' !relative tags


def test_every_nav_entry_exists():
    cfg = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    pages = _nav_pages(cfg["nav"])
    assert len(pages) == len(set(pages))
    assert [p for p in pages if not (ROOT / "docs" / p).is_file()] == []


def _strict_build(config: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site_dir`` (no network, no PATH lookups)."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site_dir)]
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": ""}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_the_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    done = _strict_build(ROOT / "mkdocs.yml", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "index.html").is_file() and (tmp_path / "fidelity" / "index.html").is_file()
    # the benchmarks page includes benchmarks/README.md's index
    assert "One-off studies" in (tmp_path / "benchmarks" / "index.html").read_text(encoding="utf-8")


def test_a_broken_link_fails_the_strict_build(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", site / "docs")
    shutil.copytree(
        ROOT / "benchmarks", site / "benchmarks", ignore=shutil.ignore_patterns("results", "*.json")
    )
    shutil.copy(ROOT / "mkdocs.yml", site / "mkdocs.yml")
    page = site / "docs" / "training.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n", encoding="utf-8"
    )
    done = _strict_build(site / "mkdocs.yml", tmp_path / "s")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr
