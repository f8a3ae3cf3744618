"""The results tables of README.md and the docs are generated from benchmarks/ (``scripts/report.py
--readme``): the committed pages must match what the results files generate,
and the generator must follow them."""

import json
import shutil
from pathlib import Path

import pytest

from marl.report.readme import PAPER_DATA, RESULTS, TARGETS, render, update_readme

ROOT = Path(__file__).resolve().parents[1]
HISTORY = "docs/results-history.md"
PERFORMANCE = "docs/performance.md"


@pytest.mark.parametrize("page", sorted(TARGETS))
def test_pages_are_in_sync_with_the_results_files(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert render(text, ROOT / RESULTS, TARGETS[page]) == text, f"{page} is out of date: run `make tables`"


def test_the_readme_holds_the_engine_table_and_the_papers_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert list(TARGETS["README.md"]) == ["engine_results", "engine_suite", "engine_vd", "smac_paper"]
    assert readme.count("<!-- BEGIN ") == 4
    # QMIX's published runs on 2s3z at 2M steps (benchmarks/data/smac_paper_runs.json): median 0.97 of 5 runs
    assert "| 2s3z | 5 | 1.00 [0.97, 1.00] | 0.97 [0.94, 1.00] |" in readme


@pytest.fixture
def repo(tmp_path):
    for page in TARGETS:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    shutil.copytree(ROOT / RESULTS, tmp_path / RESULTS)
    (tmp_path / PAPER_DATA).parent.mkdir(parents=True)
    for name in (PAPER_DATA.name, "published_smac.yaml"):  # the game's figures beside the engine's tables
        shutil.copy(ROOT / PAPER_DATA.parent / name, tmp_path / PAPER_DATA.parent / name)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_generated_blocks_follow_the_results_files(repo, capsys):
    results = repo / RESULTS
    assert update_readme(repo, check=True) == 0
    _edit(results / "learn_mpe.md", "| 600 s | loaded |", "| 601 s | loaded |")  # a learning row
    row64 = next(
        ln for ln in (results / "sim_throughput.md").read_text().splitlines() if ln.startswith("| 3m | 64 |")
    )
    cells = row64.split(" | ")
    _edit(results / "sim_throughput.md", row64, " | ".join([*cells[:2], "222280", *cells[3:]]))  # a data cell
    ci = lambda v, lo, hi: {"iqm": v, "iqm_lo": lo, "iqm_hi": hi, "mean": v, "mean_lo": lo, "mean_hi": hi}  # noqa: E731
    row = {"env": "smac", "task": "3m", "alg": "qmix", "seeds": [0, 1, 2], "reached": 3, "absolute": None}
    row.update(final=ci(0.97, 0.9, 1.0), steps_to=ci(1e5, 9e4, 2e5))
    result = {"metric": "test_win_rate", "target": 0.95, "reps": 2000, "ci": 0.95, "rows": [row], "poi": []}
    (results / "qmix_3m.report.json").write_text(json.dumps(result), encoding="utf-8")
    assert update_readme(repo, check=True) == 1
    assert "out of date" in capsys.readouterr().err
    assert update_readme(repo) == 0
    history = (repo / HISTORY).read_text(encoding="utf-8")
    assert "| 601 s | loaded | `learn_mpe.md` |" in history
    assert "| 3m | 64 | 222,280 |" in (repo / PERFORMANCE).read_text(encoding="utf-8")
    assert (
        "From `qmix_3m.report.json`" in history
        and "| smac | 3m | qmix | 3 (0, 1, 2) | 0.97 [0.90, 1.00] |" in history
    )
    assert "No multi-seed results recorded yet." not in history
    assert (repo / "README.md").read_text(encoding="utf-8") == (ROOT / "README.md").read_text(
        encoding="utf-8"
    )
    assert update_readme(repo, check=True) == 0


def test_the_paper_table_follows_the_paper_data(repo):
    data = repo / PAPER_DATA
    runs = json.loads(data.read_text(encoding="utf-8"))
    for run in runs["maps"]["2s3z"]["QMIX"]:  # every published 2s3z run wins all 32 test games from 1M on
        run["won"] = [32 if t >= 900_000 else w for t, w in zip(run["t_env"], run["won"], strict=True)]
    data.write_text(json.dumps(runs), encoding="utf-8")
    assert update_readme(repo, check=True) == 1
    assert update_readme(repo) == 0
    assert "| 2s3z | 5 | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] |" in (repo / "README.md").read_text(
        encoding="utf-8"
    )


def test_missing_markers_and_tables_are_named(repo):
    _edit(repo / PERFORMANCE, "<!-- END throughput -->", "")
    with pytest.raises(ValueError, match="performance.md: the page lacks the markers of block 'throughput'"):
        update_readme(repo)
    shutil.copy(ROOT / PERFORMANCE, repo / PERFORMANCE)
    _edit(repo / RESULTS / "learn_mpe.md", "<!-- README learning -->\n|", "<!-- README learning -->\ntext\n|")
    with pytest.raises(
        ValueError, match="learn_mpe.md, after <!-- README learning -->: expected a Markdown table"
    ):
        update_readme(repo)


def test_throughput_block_shows_the_compiled_rollout_when_measured(tmp_path):
    from marl.report.readme import throughput_block

    head = (
        "| map | n_envs | ours full sps | ours full 1t sps | ours engine sps | ours rollout sps "
        "| SMAX sps (jit step) | SMAX sps (scan 100) | full/SMAX step | full/SMAX scan | rollout/SMAX scan "
        "| engine/SMAX step | SMAX compile s | load before→after |"
    )
    row = "| 3m | 1 | 20000 | 19000 | 40000 | 100000 | 8000 | 45000 | 2.50 | 0.44 | 2.22 | 5.00 | 8.0 | 0.5 |"
    (tmp_path / "sim_throughput.md").write_text(f"# t\n\n{head}\n|{'---|' * 14}\n{row}\n", encoding="utf-8")
    block = throughput_block(tmp_path)
    assert "ours, compiled 100-step rollout" in block
    assert "| 3m | 1 | 20,000 | 19,000 | 8,000 | 2.50× | 45,000 | 0.44× | 100,000 | 2.22× |" in block


def test_throughput_block_shows_the_stage_by_stage_step_when_measured(tmp_path):
    from marl.report.readme import throughput_block

    head = (
        "| map | n_envs | ours full sps | ours full 1t sps | ours stage by stage sps | ours engine sps "
        "| ours rollout sps | SMAX sps (jit step) | SMAX sps (scan 100) | full/SMAX step | full/SMAX scan "
        "| rollout/SMAX scan | engine/SMAX step | SMAX compile s | load before→after |"
    )
    row = "| 8m | 64 | 90000 | 50000 | 30000 | 40000 | 70000 | 11000 | 15000 | 8.18 | 6.00 | 4.67 | 3.64 "
    row += "| 17 | 1 |"
    (tmp_path / "sim_throughput.md").write_text(f"# t\n\n{head}\n|{'---|' * 15}\n{row}\n", encoding="utf-8")
    block = throughput_block(tmp_path)
    assert "same, stage by stage" in block
    want = "| 8m | 64 | 90,000 | 50,000 | 30,000 | 11,000 | 8.18× | 15,000 | 6.00× | 70,000 | 4.67× |"
    assert want in block


def _paper_records(
    folder: Path,
    wins: dict[int, tuple[str, float]],
    alg: str = "qmix_smac_paper",
    task: str = "2s3z",
    config: dict | None = None,
) -> None:
    """``alg``'s records on ``task``: seed -> (engine version, test win rate at 300k)."""
    from marl.report.records import RECORD_FORMAT, RECORD_VERSION, write_record

    for seed, (version, win) in wins.items():
        curves = {
            "test_win_rate": [[50, 0.0], [300_000, win]],
            "test_return_std": [[50, 1.0], [300_000, 1.0]],
        }
        rec = {"format": RECORD_FORMAT, "version": RECORD_VERSION, "env": "smac", "task": task,
               "alg": alg, "seed": seed, "test_nepisode": 32, "budget": 300_000,
               "curves": curves, "absolute": None, "source": f"run{seed}", "config": config or {},
               "engine": [{"engine_version": version, "backend": "sim"}]}  # fmt: skip
        write_record(rec, folder, force=True)


def test_engine_table_keeps_the_current_engine_and_gives_an_iqm_from_three_seeds(tmp_path):
    from marl.envs.smac.version import ENGINE_VERSION
    from marl.report.engine_tables import ENGINE_RECORDS, engine_block

    results = tmp_path / RESULTS
    results.mkdir(parents=True)
    (tmp_path / PAPER_DATA).parent.mkdir(parents=True)
    shutil.copy(ROOT / PAPER_DATA, tmp_path / PAPER_DATA)
    assert engine_block(results) == f"No run of the paper's presets on engine {ENGINE_VERSION} recorded yet."
    # one seed on this engine, one on an older engine: only the first counts, and its value is listed
    _paper_records(results / ENGINE_RECORDS, {0: (ENGINE_VERSION, 0.75), 1: ("0.0.1", 0.0)})
    row = engine_block(results).splitlines()[2]
    # the game's QMIX on 2s3z at 300k: median 0.66 [0.62, 0.84] over 5 runs
    # (benchmarks/data/smac_paper_runs.json)
    assert row.startswith("| 2s3z | `qmix_smac_paper` | 300k | 0.75 (1 seed) | 0.66 [0.62, 0.84] (5) |")
    assert row.endswith("| inside |")
    _paper_records(results / ENGINE_RECORDS, {1: (ENGINE_VERSION, 0.25), 2: (ENGINE_VERSION, 0.25)})
    row = engine_block(results).splitlines()[2]
    cell = row.split(" | ")[3]
    assert cell.startswith("0.") and cell.endswith("(3 seeds)") and "[0.25, 0.75]" in cell


def test_suite_table_keeps_the_current_engine_and_sets_the_game_s_figures_beside(tmp_path):
    from marl.envs.smac.version import ENGINE_VERSION
    from marl.report.engine_tables import SUITE_RECORDS, suite_block

    results = tmp_path / RESULTS
    results.mkdir(parents=True)
    for name in (PAPER_DATA.name, "published_smac.yaml"):
        (tmp_path / PAPER_DATA.parent).mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / PAPER_DATA.parent / name, tmp_path / PAPER_DATA.parent / name)
    want = f"No run of the default-settings suite on engine {ENGINE_VERSION} recorded yet."
    assert suite_block(results) == want
    folder = results / SUITE_RECORDS
    _paper_records(folder, {0: ("0.0.1", 0.9)}, alg="qmix", task="2c_vs_64zg")  # another engine: left out
    assert suite_block(results) == want
    three = {s: (ENGINE_VERSION, w) for s, w in enumerate((0.5, 0.75, 1.0))}
    _paper_records(folder, three, alg="qmix", task="2c_vs_64zg")
    _paper_records(folder, {0: (ENGINE_VERSION, 0.25)}, alg="mappo", task="3m")
    rows = suite_block(results).splitlines()
    assert rows[0].startswith("| map | QMIX at 300k | MAPPO at 300k | game: SMAC paper's QMIX at 300k")
    assert [r.split(" | ")[0] for r in rows[2:]] == ["| 3m", "| 2c_vs_64zg"]  # the suite's order
    assert rows[2] == "| 3m | - | 0.25 (1 seed) | - | - |"  # neither the paper nor pymarl2 ran 3m
    cells = rows[3].split(" | ")
    assert cells[1].startswith("0.75 [0.50, 1.00]") and cells[1].endswith("(3 seeds)") and cells[2] == "-"
    # the game's QMIX on 2c_vs_64zg at 300k: no win in 9 runs (smac_paper_runs.json); pymarl2's: 100 %
    assert cells[3:] == ["0.00 [0.00, 0.00] (9)", "100 % |"]
    assert "†" not in suite_block(results)


def test_suite_table_marks_runs_whose_replay_buffer_was_capped(tmp_path):
    from marl.envs.smac.version import ENGINE_VERSION
    from marl.report.engine_tables import SUITE_RECORDS, suite_block

    results = tmp_path / RESULTS
    (tmp_path / PAPER_DATA.parent).mkdir(parents=True)
    for name in (PAPER_DATA.name, "published_smac.yaml"):
        shutil.copy(ROOT / PAPER_DATA.parent / name, tmp_path / PAPER_DATA.parent / name)
    capped = {"learner": {"name": "q_learner", "buffer_max_gib": 6.0, "buffer_size": 5000}}
    _paper_records(results / SUITE_RECORDS, {0: (ENGINE_VERSION, 0.5)}, "qmix", "bane_vs_bane", capped)
    _paper_records(results / SUITE_RECORDS, {0: (ENGINE_VERSION, 0.25)}, "mappo", "bane_vs_bane")
    # the same cap on 3m holds all 5,000 of its small episodes: the default, not marked
    _paper_records(results / SUITE_RECORDS, {0: (ENGINE_VERSION, 1.0)}, "qmix", "3m", capped)
    table, note = suite_block(results).split("\n\n")
    assert table.splitlines()[2].startswith("| 3m | 1.00 (1 seed) | - | ")
    assert table.splitlines()[3].startswith("| bane_vs_bane | 0.50 (1 seed) † | 0.25 (1 seed) | ")
    assert note.startswith("† replay buffer capped at 6 GiB (`learner.buffer_max_gib`)")
    # the paper presets' table marks them the same way
    from marl.report.engine_tables import ENGINE_RECORDS, engine_block

    _paper_records(results / ENGINE_RECORDS, {0: (ENGINE_VERSION, 0.5)}, task="bane_vs_bane", config=capped)
    _paper_records(results / ENGINE_RECORDS, {0: (ENGINE_VERSION, 0.5)}, task="2s3z", config=capped)
    table, note = engine_block(results).split("\n\n")
    assert "| `qmix_smac_paper` | 300k | 0.50 (1 seed) † |" in table.splitlines()[3]  # bane_vs_bane
    assert "| `qmix_smac_paper` | 300k | 0.50 (1 seed) |" in table.splitlines()[2]  # 2s3z: the cap holds all
    assert note.startswith("† replay buffer capped at 6 GiB")


def test_vd_table_sets_each_algorithm_beside_the_game_s_runs_of_the_same_algorithm(tmp_path):
    from marl.envs.smac.version import ENGINE_VERSION
    from marl.report.engine_tables import SUITE_RECORDS, vd_block

    results = tmp_path / RESULTS
    (tmp_path / PAPER_DATA.parent).mkdir(parents=True)
    shutil.copy(ROOT / PAPER_DATA, tmp_path / PAPER_DATA)
    assert vd_block(results).startswith("No run of VDN or IQL")
    _paper_records(results / SUITE_RECORDS, {0: (ENGINE_VERSION, 0.5)}, "qmix", "2s_vs_1sc")  # not VD's
    assert vd_block(results).startswith("No run of VDN or IQL")
    three = {s: (ENGINE_VERSION, w) for s, w in enumerate((0.75, 1.0, 1.0))}
    _paper_records(results / SUITE_RECORDS, three, "vdn", "2s_vs_1sc")
    head, _, row = vd_block(results).splitlines()
    assert head.startswith("| map | VDN at 300k | game: SMAC paper's VDN at 300k")
    cells = row.split(" | ")
    # the game's VDN on 2s_vs_1sc at 300k: 1.00 [0.56, 1.00] over 5 runs, its IQL 0.38 [0.31, 0.69]
    # (benchmarks/data/smac_paper_runs.json); no IQL record here
    assert cells[0] == "| 2s_vs_1sc" and cells[1].endswith("(3 seeds)")
    assert cells[2:] == ["1.00 [0.56, 1.00] (5)", "-", "0.38 [0.31, 0.69] (5) |"]
