#!/usr/bin/env python
"""Our engine's learning curves over the SMAC paper's runs on StarCraft II (the calibration benchmark).

    # once: the published file into the compact data file (benchmarks/data/smac_paper_runs.json)
    python benchmarks/learning/real_game_curves.py convert smac_run_data.json
    # the paper's presets on the engine (one run per core; resumable; records written as runs finish)
    python scripts/sweep.py --alg qmix_smac_paper --maps 2s3z 3s5z --seeds 3 --num-cpus 2 \\
        --records benchmarks/results/runs/smac_paper t_max=1000000 log.progress=false
    # or record plain run folders (train_qmix.py --alg qmix_smac_paper ...)
    python benchmarks/learning/real_game_curves.py record results/qmix_smac_paper_2s3z_seed0_* --out DIR
    # per map: a picture (the game's runs as a band with its median, ours as lines) and the table
    python benchmarks/learning/real_game_curves.py report --records benchmarks/results/runs/smac_paper \\
        --out benchmarks/results/real_game_curves

The table gives, per map and checkpoint (the first test, 100k, 300k, 500k, 1M, 2M steps), the game's median
and range of test win rate and return beside our median, and a verdict: ``inside`` when our median lies
within the game's range there widened by the sampling error of 32 test episodes (``marl.report.paper_runs``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from marl.report.paper_runs import (  # noqa: E402
    CHECKPOINTS,
    DEFAULT_DATA,
    PAPER_PRESETS,
    RECORD_CURVES,
    RECORD_STD,
    band,
    convert,
    learner_label,
    load_paper_runs,
    ours_at,
    verdict,
)
from marl.report.records import CURVE_KEYS, read_record, record_from_run_dir, write_record  # noqa: E402
from marl.report.runs import engine_of  # noqa: E402

METRICS = RECORD_CURVES


def ours_median(records: list[dict], t: int, metric: str) -> tuple[float | None, int, float | None]:
    """Our runs' median at checkpoint ``t``, how many runs reach it, and the median logged return std."""
    vals, std = ours_at(records, t, metric)
    return (float(np.median(vals)) if vals else None), len(vals), std


def fmt(v: float | None, metric: str) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if metric == "win_rate" else f"{v:.1f}"


def _file(label: str) -> str:
    """A learner label as a picture's file-name part ("pymarl QMIX" -> "pymarl_qmix")."""
    return label.lower().replace(" ", "_")


def table_rows(map_name: str, alg: str, records: list[dict], game: list) -> list[str]:
    """One markdown row per checkpoint: the game's median [range] (runs) beside ours (runs) and verdicts."""
    rows = []
    for t in CHECKPOINTS:
        cells, marks = [], []
        for metric in METRICS:
            b = band(game, t, metric)
            mine, n_ours, std = ours_median(records, t, metric)
            g = (
                "-"
                if b is None
                else f"{fmt(b.median, metric)} [{fmt(b.lo, metric)}, {fmt(b.hi, metric)}] ({b.n})"
            )
            cells += [g, "-" if mine is None else f"{fmt(mine, metric)} ({n_ours})"]
            marks.append(verdict(mine, b, metric, std))
        rows.append(
            f"| {map_name} | {alg} | {'start' if t < 10_000 else f'{t // 1000}k'} | "
            + " | ".join(cells)
            + f" | {marks[0]} | {marks[1]} |"
        )
    return rows


def plot_map(map_name: str, alg: str, records: list[dict], game: list, png: Path) -> None:
    """Win rate and return: the game's runs as a min-max band with its median, ours as lines."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    grid = np.arange(0, 2_050_001, 10_000)
    for ax, metric in zip(axes, METRICS, strict=True):
        vals = np.array([[r.at(int(t), metric) for t in grid] for r in game], dtype=float)
        have = ~np.all(np.isnan(vals), axis=0)
        if have.any():
            g = grid[have] / 1e6
            ax.fill_between(
                g, np.nanmin(vals[:, have], 0), np.nanmax(vals[:, have], 0), alpha=0.25, color="C0"
            )
            ax.plot(
                g,
                np.nanmedian(vals[:, have], 0),
                color="C0",
                label=f"game {PAPER_PRESETS[records[0]['alg']]} median ({len(game)} runs)",
            )
        for rec in records:
            curve = rec["curves"].get(METRICS[metric], [])
            if curve:
                lab = f"engine seed {rec['seed']}" + (" (pymarl)" if rec["alg"].startswith("pymarl_") else "")
                ax.plot(
                    [p[0] / 1e6 for p in curve], [p[1] for p in curve], color="C3", alpha=0.8, lw=1, label=lab
                )
        ax.set_xlabel("env steps (M)")
        ax.set_ylabel(f"test {metric.replace('_', ' ')}")
        ax.set_title(f"{map_name}: {alg}", fontsize="medium")
        if metric == "win_rate":
            ax.set_ylim(-0.03, 1.03)
            ax.legend(fontsize="x-small", loc="upper left")
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def assign_engine(record: dict, version: str, note: str) -> dict:
    """``record`` with the embedded engine ``version`` it ran on, for a run made before runs recorded their
    engine; refuses (SystemExit) when the run records one of its own."""
    if engine_of(record) != "unknown":
        raise SystemExit(f"{record['task']}: the run records its engine ({engine_of(record)}); drop --engine")
    return {
        **record,
        "engine": [{"engine_version": version, "backend": "sim", "assigned": note or "by hand"}],
    }


def mixed(groups: dict[tuple[str, str], list[dict]]) -> str | None:
    """The refusal when the runs of one map and algorithm come from different engines, else None."""
    parts = []
    for (map_name, alg), recs in sorted(groups.items()):
        labels = sorted({engine_of(r) for r in recs})
        if len(labels) > 1 or any(" -> " in label for label in labels):
            parts.append(f"{alg} {map_name}: " + ", ".join(labels))
    if not parts:
        return None
    return (
        "refusing to pool runs of different engines: "
        + "; ".join(parts)
        + " (--allow-mixed-engines pools them)"
    )


def made_on(groups: dict[tuple[str, str], list[dict]]) -> str:
    """Where the runs were made, from their provenance: commits, library versions and core counts."""
    starts = [
        e
        for recs in groups.values()
        for r in recs
        for e in r.get("provenance") or ()
        if e.get("event") == "start"
    ]
    commits = sorted({str(e.get("commit", "?"))[:7] for e in starts})
    versions = sorted({", ".join(f"{k} {v}" for k, v in (e.get("versions") or {}).items()) for e in starts})
    nprocs = sorted({str((e.get("machine") or {}).get("nproc", "?")) for e in starts})
    return (
        f"commit {', '.join(commits) or '?'}; {'; '.join(versions) or '?'}; nproc {', '.join(nprocs) or '?'}"
    )


def report(records_dir: Path, out: Path, data: Path, allow_mixed: bool = False) -> str:
    """Write ``<out>.md`` and ``<out>/<alg>_<map>.png`` for every (alg, map) of the records."""
    paper = load_paper_runs(data)
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in sorted(records_dir.glob("*.json")):
        rec = read_record(path)
        if rec["alg"] in PAPER_PRESETS:
            groups[rec["task"], learner_label(rec["alg"])].append(rec)
    refusal = mixed(groups)
    if refusal and not allow_mixed:
        raise SystemExit(refusal)
    engines = sorted({engine_of(r) for recs in groups.values() for r in recs})
    out.mkdir(parents=True, exist_ok=True)
    head = [
        "| map | alg | steps | game win rate: median [range] (runs) | engine (runs) | game return | engine "
        "| win rate | return |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows, counts = [], defaultdict(lambda: [0, 0])
    for (map_name, alg), recs in sorted(groups.items()):
        game = paper.get((map_name, PAPER_PRESETS[recs[0]["alg"]]), [])
        rows += table_rows(map_name, alg, recs, game)
        plot_map(map_name, alg, recs, game, out / f"{_file(alg)}_{map_name}.png")
        for t in (300_000, 1_000_000):
            mine = ours_median(recs, t, "win_rate")[0]
            v = verdict(mine, band(game, t, "win_rate"), "win_rate")
            if v != "-":
                counts[alg, t][0] += v == "inside"
                counts[alg, t][1] += 1
    version = json.loads(data.read_text(encoding="utf-8"))["game_version"]
    rd = records_dir.resolve()
    where = rd.relative_to(ROOT) if rd.is_relative_to(ROOT) else rd.name
    lines = [
        f"# The engine's learning curves over the SMAC paper's runs on StarCraft II {version}",
        "",
        *harness.header_lines(harness.start(), __file__, sys.argv[1:]),
        f"- the runs: {made_on(groups)}",
        "",
        f"Engine: {', '.join(engines)}. Records: `{where}`; "
        "the game's runs: `benchmarks/data/smac_paper_runs.json` (source in the file). A checkpoint's value "
        "is a "
        "run's last test at or before it (within 15k steps). Verdict: our median inside the game's range "
        "widened by the sampling error of 32 test episodes (Wilson 95 % for win rates; 1.96 standard errors "
        "of the mean of 32 returns, from our logged return std, for returns).",
        "",
        *[
            f"- {alg} at {t // 1000}k: inside on {k} of {n} maps"
            for (alg, t), (k, n) in sorted(counts.items())
        ],
        "",
        *[
            f"- {alg} {m}: {len(recs)} run(s) on engine {', '.join(sorted({engine_of(r) for r in recs}))}"
            for (m, alg), recs in sorted(groups.items())
        ],
        "",
        *head,
        *rows,
        "",
        *[f"![{a} {m}]({out.name}/{_file(a)}_{m}.png)" for m, a in sorted(groups)],
        "",
    ]
    text = "\n".join(lines)
    out.with_suffix(".md").write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="the published smac_run_data.json into the compact data file")
    c.add_argument("source", type=Path)
    c.add_argument("--out", type=Path, default=DEFAULT_DATA)
    r = sub.add_parser("record", help="write the records of run folders (with the return std curve)")
    r.add_argument("run_dirs", type=Path, nargs="+")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--force", action="store_true", help="replace records that differ")
    r.add_argument(
        "--engine",
        help="for runs made before engine versions were recorded: the sim engine version they ran "
        "(e.g. 0.9.1); refused when the run records an engine of its own",
    )
    r.add_argument("--engine-note", default="", help="why --engine is that version (kept in the record)")
    s = sub.add_parser("report", help="pictures and the checkpoint table")
    s.add_argument("--records", type=Path, required=True)
    s.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "real_game_curves")
    s.add_argument("--data", type=Path, default=DEFAULT_DATA)
    s.add_argument(
        "--allow-mixed-engines",
        action="store_true",
        help="pool the runs of one map and algorithm even when they come from different engines",
    )
    args = p.parse_args(argv)
    if args.cmd == "convert":
        content = convert(json.loads(args.source.read_text(encoding="utf-8")))
        args.out.write_text(json.dumps(content, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"{args.out}: {sum(len(v) for a in content['maps'].values() for v in a.values())} runs")
    elif args.cmd == "record":
        for d in args.run_dirs:
            rec = record_from_run_dir(d, (*CURVE_KEYS, RECORD_STD))
            if args.engine:
                rec = assign_engine(rec, args.engine, args.engine_note)
            print(write_record(rec, args.out, args.force))
    else:
        print(report(args.records, args.out, args.data, args.allow_mixed_engines))


if __name__ == "__main__":
    main()
