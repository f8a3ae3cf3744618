"""``scripts/report.py``: the multi-seed report over existing run folders or run records, the records
themselves (``--save-records``), and the generated results tables of the README and docs/ (``--readme``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from marl.report.engines import engines_by_env, mixed_engines
from marl.report.marl_eval import check_marl_eval, to_marl_eval
from marl.report.plots import plot_profiles, plot_sample_efficiency
from marl.report.records import CURVE_KEYS, record_of, write_records
from marl.report.runs import Run, add_absolute, load_runs
from marl.report.summary import analyse, markdown_tables

FILES = ("report.md", "report.json", "marl_eval.json", "profiles.png", "sample_efficiency.png")


def write_report(
    runs: Sequence[Run],
    out: Path,
    metric: str = "test_win_rate",
    target: float = 0.95,
    reps: int = 2_000,
    seed: int = 0,
    title: str = "Report",
    notes: Sequence[str] = (),
) -> dict[str, Path]:
    """Write the report files (``FILES``) into ``out``; returns them by name (a figure that has nothing
    to draw, such as profiles without a map shared by every algorithm, is left out)."""
    if not runs:
        raise ValueError("no run with a logged test phase to report on")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = analyse(runs, metric, target, reps, seed)
    data, left_out = to_marl_eval(runs, metric)
    notes = [*notes, *left_out]
    if mixed_engines(runs):  # only with --allow-mixed-engines: say so beside the tables
        for env, by in engines_by_env(runs).items():
            if len(by) > 1 or any(" -> " in label for label in by):
                shown = ", ".join(f"{len(rs)} on {label}" for label, rs in by.items())
                notes.append(f"{env}: runs of different engines pooled (--allow-mixed-engines): {shown}")
    if data:
        notes += check_marl_eval(data)
        (out / "marl_eval.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    result["notes"] = notes
    result["runs"] = [
        {
            "env": r.env,
            "task": r.task,
            "alg": r.alg,
            "seed": r.seed,
            "budget": r.budget,
            "engine": r.engine,
            "run_dir": _shown(r.run_dir, out),
        }
        for r in runs
    ]
    written = {"report.json": out / "report.json", "report.md": out / "report.md"}
    if data:
        written["marl_eval.json"] = out / "marl_eval.json"
    written["report.json"].write_text(json.dumps(result, indent=1), encoding="utf-8")
    profiles = plot_profiles(runs, out / "profiles.png", metric, min(reps, 2000), seed)
    if profiles:
        written["profiles.png"] = profiles
    written["sample_efficiency.png"] = plot_sample_efficiency(
        runs, out / "sample_efficiency.png", metric, min(reps, 2000), seed
    )
    md = [
        f"# {title}",
        "",
        f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        "`scripts/report.py` from the runs (run folders or run records) listed in `report.json`.",
        "",
        markdown_tables(result),
    ]
    if notes:
        md += ["Notes:", "", *[f"- {n}" for n in notes], ""]
    md += ["Figures: " + ", ".join(f"`{n}`" for n in written if n.endswith(".png")), ""]
    written["report.md"].write_text("\n".join(md), encoding="utf-8")
    return written


def save_records(
    runs: Sequence[Run], folder: Path, metric: str = "test_win_rate", force: bool = False
) -> list[Path]:
    """Write one run record per run into ``folder`` (:func:`~marl.report.records.write_records`: a different
    record already there for the same alg/map/seed is refused without ``force``); returns their paths."""
    return write_records([record_of(r.run_dir, (*CURVE_KEYS, metric)) for r in runs], folder, force)


def _shown(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it lies inside it, else as given."""
    try:
        return str(Path(path).resolve().relative_to(Path(base).resolve()))
    except ValueError:
        return str(path)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "runs",
        nargs="*",
        type=Path,
        help="run folders, run records (<alg>_<map>_seed<k>.json), or folders holding them (a sweep folder)",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="where the report goes (default: the first folder given)"
    )
    p.add_argument("--metric", default="test_win_rate", help="logged test score (default test_win_rate)")
    p.add_argument("--target", type=float, default=0.95, help="'steps to target' threshold (default 0.95)")
    p.add_argument("--reps", type=int, default=2_000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's random seed (default 0)")
    p.add_argument("--title", default="Multi-seed report", help="the report's heading")
    p.add_argument(
        "--no-absolute",
        action="store_true",
        help="do not evaluate best checkpoints for the absolute metric (cached results are still used)",
    )
    p.add_argument("--envs", type=int, default=8, help="envs stepped together in that evaluation (default 8)")
    p.add_argument(
        "--min-steps",
        type=int,
        default=0,
        help="leave out runs whose last test phase is before this many env steps (runs still going)",
    )
    p.add_argument(
        "--save-records",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write one run record per run read into DIR (<alg>_<map>_seed<k>.json: what the report "
        "needs, small enough to commit, e.g. benchmarks/results/runs/<suite>/)",
    )
    p.add_argument(
        "--force", action="store_true", help="with --save-records: replace different records already in DIR"
    )
    p.add_argument(
        "--allow-mixed-engines",
        action="store_true",
        help="pool runs of one environment made on different engine versions or backends (refused by "
        "default; each row then names its engines)",
    )
    p.add_argument("--readme", action="store_true", help="regenerate the results blocks (README, docs/)")
    p.add_argument("--check", action="store_true", help="with --readme: only check, exit 1 when out of date")
    return p


def report_main(argv: Sequence[str] | None = None) -> int:
    """The command line (see :func:`build_parser`); returns the exit code."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.readme:
        from marl.report.readme import update_readme

        return update_readme(Path.cwd(), check=args.check)
    if not args.runs:
        p.error("give run folders (or a sweep folder), or --readme")
    if args.reps < 100 or args.envs < 1:
        p.error("--reps must be >= 100 and --envs >= 1")
    if args.force and args.save_records is None:
        p.error("--force goes with --save-records DIR")
    try:
        runs, skipped = load_runs(list(args.runs), args.metric, args.target, min_steps=args.min_steps)
        refusal = None if args.allow_mixed_engines else mixed_engines(runs)
        if refusal:  # before any evaluation or file is written
            p.error(refusal)
        if not args.no_absolute:
            skipped += add_absolute(runs, args.envs)
        if args.save_records is not None:
            saved = save_records(runs, args.save_records, args.metric, args.force)
            print(f"[report] {len(saved)} run records in {args.save_records}", file=sys.stderr)
        out = args.out or (args.runs[0].parent if args.runs[0].is_file() else args.runs[0])
        written = write_report(runs, out, args.metric, args.target, args.reps, args.seed, args.title, skipped)
    except (FileNotFoundError, ValueError) as err:
        p.error(str(err))
    print(written["report.md"].read_text(encoding="utf-8"))
    print("[report] wrote " + ", ".join(str(f) for f in written.values()), file=sys.stderr)
    return 0
