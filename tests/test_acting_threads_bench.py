"""``benchmarks/research/acting_threads.py`` runs end to end and writes one row per (map, other core)."""

from __future__ import annotations

from benchmarks.research import acting_threads as bench


def test_acting_threads_writes_a_row_per_cell(tmp_path):
    out = tmp_path / "acting.md"
    bench.main(["--maps", "3m", "--reps", "50", "--rounds", "1", "--envs", "2", "--out", str(out)])
    text = out.read_text()
    assert text.startswith("# The NumPy acting step")
    rows = [line for line in text.splitlines() if line.startswith("| 3m |")]
    assert [r.split("|")[3].strip() for r in rows] == ["idle", "spin", "twin"]
    for r in rows:
        cells = [c.strip() for c in r.split("|")[1:-1]]
        assert cells[1] == "6"  # 2 envs x 3 agents
        assert float(cells[3]) > 0 and float(cells[4]) > 0 and cells[5].endswith("x")
