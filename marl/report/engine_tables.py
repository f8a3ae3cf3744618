"""The README's results tables for the current engine version (``scripts/report.py --readme``).

* ``engine_results`` (:func:`engine_block`): the SMAC paper's presets (``qmix_smac_paper`` ...), run
  records in ``benchmarks/results/runs/smac_paper/``: per map and algorithm, at 300k and 1M env steps where
  runs reach them, our greedy test win rate beside the game's median [range] over the paper's runs at the
  same step (StarCraft II 4.6.2) and the verdict of :func:`marl.report.paper_runs.verdict`.
* ``engine_suite`` (:func:`suite_block`): QMIX and MAPPO in their default configs on the 17 SMAC maps (the
  SMAC paper's 14 plus 3m, 8m and MMM), 3 seeds, 300k env steps, run records in
  ``benchmarks/results/runs/smac_suite/``; beside them the SMAC paper's QMIX runs at the same step (the
  paper's own settings, not ours) and pymarl2's QMIX with batch 128 (SC2 4.10, after its own budget of
  millions of steps; ``benchmarks/data/published_smac.yaml``).
* ``engine_vd`` (:func:`vd_block`): VDN and IQL in the suite's settings (default configs, 3 seeds, 300k, the
  same records folder), each beside the SMAC paper's runs of the same algorithm on the game.

Only records made on the current engine version (:data:`marl.envs.smac.version.ENGINE_VERSION`, by
:func:`marl.report.runs.engine_of`) count; others are left out, not pooled. A cell gives the IQM and its
95 % CI over seeds from :data:`MIN_SEEDS_CI` seeds on, else each seed's value.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from pathlib import Path

import numpy as np
import yaml

from marl.report.paper_runs import PAPER_PRESETS, Band, band, load_paper_runs, ours_at, verdict
from marl.report.records import read_record
from marl.report.runs import engine_of

PAPER_DATA = Path("benchmarks") / "data" / "smac_paper_runs.json"  # the SMAC paper's runs, beside RESULTS


def md_table(rows: list[list[str]]) -> str:
    """``rows`` (header first) as a Markdown table."""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def paper_data(results: Path) -> Path:
    """:data:`PAPER_DATA` beside the results folder ``results`` (``data/`` next to ``results/``)."""
    return results.parent / PAPER_DATA.parent.name / PAPER_DATA.name


def _current_records(results: Path, folder: Path, algs: Collection[str]) -> dict[tuple[str, str], list[dict]]:
    """``(map, alg) -> records`` of ``results/folder`` made on the current engine, for ``alg`` in ``algs``."""
    from marl.envs.smac.version import ENGINE_VERSION

    label = f"sim {ENGINE_VERSION}"
    groups: dict[tuple[str, str], list[dict]] = {}
    for path in sorted((results / folder).glob("*.json")):
        rec = read_record(path)
        if rec["alg"] in algs and engine_of(rec) == label:
            groups.setdefault((rec["task"], rec["alg"]), []).append(rec)
    return groups


ENGINE_RECORDS = Path("runs") / "smac_paper"
ENGINE_STEPS = (300_000, 1_000_000)
MIN_SEEDS_CI = 3


def win_rate_cell(vals: list[float]) -> str:
    """IQM [95 % CI] over seeds from :data:`MIN_SEEDS_CI` seeds on, else the seeds' values."""
    if len(vals) < MIN_SEEDS_CI:
        return ", ".join(f"{v:.2f}" for v in vals) + f" ({len(vals)} seed{'s' if len(vals) > 1 else ''})"
    from marl.report.stats import iqm_and_mean

    r = iqm_and_mean({"w": np.asarray(vals, dtype=np.float64)[:, None]})["w"]
    return f"{r['iqm']:.2f} [{r['iqm_lo']:.2f}, {r['iqm_hi']:.2f}] ({len(vals)} seeds)"


def band_cell(b: Band | None) -> str:
    """The game's runs at one step as ``median [min, max] (runs)``, ``-`` where none reaches it."""
    return "-" if b is None else f"{b.median:.2f} [{b.lo:.2f}, {b.hi:.2f}] ({b.n})"


def engine_block(results: Path) -> str:
    """The paper's presets on the current engine beside the game's runs at the same steps (see above)."""
    from marl.envs.smac.version import ENGINE_VERSION

    paper = load_paper_runs(paper_data(results))
    groups = _current_records(results, ENGINE_RECORDS, PAPER_PRESETS)
    head = [
        "map",
        "preset",
        "steps",
        f"engine {ENGINE_VERSION}: test win rate",
        "game: median [range] (runs)",
    ]
    out = [[*head, "verdict"]]
    caps: set[float] = set()
    for (map_name, alg), recs in sorted(groups.items(), key=lambda kv: (kv[0][0].lower(), kv[0][1])):
        game = paper.get((map_name, PAPER_PRESETS[alg]), [])
        cap = _caps(recs)
        for t in ENGINE_STEPS:
            vals, std = ours_at(recs, t, "win_rate")
            if not vals:
                continue
            caps |= cap
            b = band(game, t, "win_rate")
            mark = verdict(float(np.median(vals)), b, "win_rate", std)
            out.append([map_name, f"`{alg}`", f"{t // 1000}k", _cell(vals, cap), band_cell(b), mark])
    if len(out) == 1:
        return f"No run of the paper's presets on engine {ENGINE_VERSION} recorded yet."
    return md_table(out) + _cap_note(caps)


SUITE_RECORDS = Path("runs") / "smac_suite"
SUITE_BUDGET = 300_000
SUITE_ALGS = ("qmix", "mappo")
SUITE_MAPS = (  # the SMAC paper's 14 maps plus 3m, 8m and MMM, roughly from easy to super hard
    "3m", "8m", "MMM", "2s_vs_1sc", "2s3z", "3s5z", "1c3s5z", "10m_vs_11m", "2c_vs_64zg", "bane_vs_bane",
    "5m_vs_6m", "3s_vs_5z", "3s5z_vs_3s6z", "6h_vs_8z", "27m_vs_30m", "MMM2", "corridor",
)  # fmt: skip
PYMARL2_COLUMN = "qmix_pymarl2_vanilla"  # published_smac.yaml's entry shown beside ours


def _published(results: Path) -> dict[str, float]:
    """pymarl2's QMIX (batch 128) win rate per map, in percent (``data/published_smac.yaml``)."""
    data = yaml.safe_load((results.parent / "data" / "published_smac.yaml").read_text(encoding="utf-8"))
    return dict(data[PYMARL2_COLUMN]["win_rate"])


def suite_block(results: Path) -> str:
    """QMIX and MAPPO's default-settings suite on the current engine beside the game's QMIX (see above)."""
    from marl.envs.smac.version import ENGINE_VERSION

    groups = _current_records(results, SUITE_RECORDS, SUITE_ALGS)
    maps = [m for m in SUITE_MAPS if any((m, a) in groups for a in SUITE_ALGS)]
    if not maps:
        return f"No run of the default-settings suite on engine {ENGINE_VERSION} recorded yet."
    paper, pymarl2 = load_paper_runs(paper_data(results)), _published(results)
    k = f"{SUITE_BUDGET // 1000}k"
    head = ["map", *(f"{a.upper()} at {k}" for a in SUITE_ALGS)]
    out = [[*head, f"game: SMAC paper's QMIX at {k}, median [range] (runs)", "game: pymarl2's QMIX"]]
    cells, caps = _suite_cells(groups, maps, SUITE_ALGS)
    for m in maps:
        b = band(paper.get((m, "QMIX"), []), SUITE_BUDGET, "win_rate")
        published = f"{pymarl2[m]:.0f} %" if m in pymarl2 else "-"
        out.append([m, *(cells[m, a] for a in SUITE_ALGS), band_cell(b), published])
    return md_table(out) + _cap_note(caps)


VD_ALGS = {"vdn": "VDN", "iql": "IQL"}  # ours -> the SMAC paper's name for the same algorithm


def vd_block(results: Path) -> str:
    """VDN and IQL's default-settings runs (the suite's settings: 3 seeds, 300k) on the current engine,
    each beside the SMAC paper's runs of the same algorithm on the game at the same step."""
    from marl.envs.smac.version import ENGINE_VERSION

    groups = _current_records(results, SUITE_RECORDS, VD_ALGS)
    maps = [m for m in SUITE_MAPS if any((m, a) in groups for a in VD_ALGS)]
    if not maps:
        return f"No run of VDN or IQL in the default-settings suite on engine {ENGINE_VERSION} recorded yet."
    paper = load_paper_runs(paper_data(results))
    k = f"{SUITE_BUDGET // 1000}k"
    head = ["map"]
    for name in VD_ALGS.values():
        head += [f"{name} at {k}", f"game: SMAC paper's {name} at {k}, median [range] (runs)"]
    out = [head]
    cells, caps = _suite_cells(groups, maps, tuple(VD_ALGS))
    for m in maps:
        row = [m]
        for alg, name in VD_ALGS.items():
            row += [cells[m, alg], band_cell(band(paper.get((m, name), []), SUITE_BUDGET, "win_rate"))]
        out.append(row)
    return md_table(out) + _cap_note(caps)


def _suite_cells(
    groups: dict[tuple[str, str], list[dict]], maps: list[str], algs: tuple[str, ...]
) -> tuple[dict[tuple[str, str], str], set[float]]:
    """``(map, alg) -> cell`` at :data:`SUITE_BUDGET` (``†`` where the replay buffer was capped) and the
    caps met."""
    cells, caps = {}, set()
    for m in maps:
        for alg in algs:
            recs = groups.get((m, alg), [])
            vals = ours_at(recs, SUITE_BUDGET, "win_rate")[0]
            cap = _caps(recs)
            caps |= cap
            cells[m, alg] = _cell(vals, cap) if vals else "-"
    return cells, caps


def _cell(vals: list[float], caps: set[float]) -> str:
    """:func:`win_rate_cell`, marked ``†`` where the runs' replay buffer was capped."""
    return win_rate_cell(vals) + " †" * bool(caps)


def _caps(recs: list[dict]) -> set[float]:
    """The replay-buffer caps that held fewer episodes than the default in ``recs`` (:func:`_buffer_cap`)."""
    return {_buffer_cap(r) for r in recs} - {0.0}


def _cap_note(caps: set[float]) -> str:
    """The note under a table with capped replay buffers (``""`` when none was)."""
    if not caps:
        return ""
    gib = " or ".join(f"{c:g}" for c in sorted(caps))
    return (
        f"\n\n† replay buffer capped at {gib} GiB (`learner.buffer_max_gib`), which on this map holds fewer "
        "than the default 5,000 padded episodes (they need up to 40 GiB on the largest maps, "
        "docs/run-guarantees.md; the cap lets runs share a 23 GB machine, docs/ray.md)."
    )


def _buffer_cap(rec: dict) -> float:
    """The record's ``learner.buffer_max_gib`` where it held fewer episodes than ``learner.buffer_size``
    (the run's map has large padded episodes), else 0: a cap that did not bind left the default."""
    learner = (rec.get("config") or {}).get("learner", {})
    cap, size = float(learner.get("buffer_max_gib") or 0.0), int(learner.get("buffer_size") or 0)
    if cap <= 0 or learner.get("name") != "q_learner":  # the tables' only learner with a replay buffer
        return 0.0
    from marl.buffers.replay import episodes_in

    return cap if episodes_in(cap, _episode_bytes(rec["task"])) < size else 0.0


@functools.cache
def _episode_bytes(map_name: str) -> int:
    """One padded episode's bytes in the replay buffer on the SMAC map ``map_name`` (embedded engine)."""
    from marl.buffers.episode import Scheme
    from marl.config import load_config
    from marl.envs.factory import probe_env_info

    cfg = load_config("qmix", map_name=map_name, overrides=["env.backend=sim"])
    return Scheme(probe_env_info(cfg)).bytes_per_episode()
