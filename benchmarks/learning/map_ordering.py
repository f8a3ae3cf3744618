"""QMIX at one budget across the SMAC maps, beside the order in which the published tables put them.

The fidelity check of ``docs/fidelity.md``: on StarCraft II the maps that pymarl2's README calls Easy are
learned first and the Super Hard ones last (``benchmarks/data/published_smac.yaml``, ``difficulty``). If the
embedded engine plays the same game, QMIX at a fixed budget on it must order the maps the same way. This
script reads a sweep or its run records (one budget, any number of seeds; runs that have not reached the
budget are left out), puts every map's win rate beside its published class and QMIX figures, and states:

- the mean win rate of each class, and whether they fall as published (Easy >= Hard >= Super Hard);
- the pairs (an Easy map, a Super Hard map) in which the Super Hard map scores higher;
- Spearman's rank correlation between the maps' win rates and their class (Easy 0, Hard 1, Super Hard 2),
  which is negative when the order holds.

    python scripts/sweep.py --alg qmix --maps 3m 8m 2s3z ... 27m_vs_30m --seeds 3 t_max=300000 \\
        learner.buffer_max_gib=6 --out <sweep>
    python benchmarks/learning/map_ordering.py <sweep> --budget 300000
    python benchmarks/learning/map_ordering.py <qmix sweep> <mappo sweep> --budget 300000 --alg qmix,mappo
    python benchmarks/learning/map_ordering.py benchmarks/results/runs/<suite> --budget 300000  # records

(``--records benchmarks/results/runs/<suite>`` on the sweep keeps its run records: docs/evaluation.md.)
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from scipy.stats import spearmanr

from benchmarks.learning.smacv2_baselines import FINISHED_SLACK, fmt_seeds, ours_at_budget

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from marl.report.readme import md_table  # noqa: E402

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published_smac.yaml"
CLASSES = ("easy", "hard", "super_hard")
QMIX_COLUMNS = {  # published QMIX figures shown beside ours (all on the game, at their own budgets)
    "qmix_pymarl2_vanilla": "QMIX, pymarl2 (batch 128)",
    "qmix_pymarl2_general": "QMIX, pymarl2 re-evaluation",
    "qmix_pymarl2_finetuned": "QMIX, pymarl2 fine-tuned",
}
WINDOW = 50_000  # env steps before the budget whose test phases are averaged


def class_verdict(win: dict[str, float], classes: dict[str, str]) -> dict:
    """Class means, the Easy/Super Hard inversions and Spearman's rho of ``win`` (map -> win rate)."""
    by_class = {c: [m for m in sorted(win) if classes.get(m) == c] for c in CLASSES}
    means = {c: float(np.mean([win[m] for m in ms])) if ms else math.nan for c, ms in by_class.items()}
    complete = all(by_class[c] for c in CLASSES)
    ordered = complete and means["easy"] >= means["hard"] >= means["super_hard"]
    inversions = [(e, s) for e in by_class["easy"] for s in by_class["super_hard"] if win[s] > win[e]]
    classed = [m for c in CLASSES for m in by_class[c]]
    rho = math.nan
    if len(classed) >= 3 and len({win[m] for m in classed}) > 1:
        rho = float(spearmanr([CLASSES.index(classes[m]) for m in classed], [win[m] for m in classed])[0])
    return {
        "maps": by_class,
        "means": means,
        "complete": complete,
        "ordered": ordered,
        "inversions": inversions,
        "rho": rho,
    }


def _ours(sweeps: Sequence[Path], budget: int, alg: str) -> dict[str, list[tuple[int, float, float]]]:
    """``map -> [(seed, win rate at budget, minutes)]`` of ``alg``'s finished runs in ``sweeps``."""
    ours = {task: seeds for (task, a), seeds in ours_at_budget(sweeps, budget, WINDOW).items() if a == alg}
    if not ours:
        raise SystemExit(f"no {alg} run in {[str(s) for s in sweeps]} has reached {budget:,} steps")
    return ours


def _mean(seeds: list[tuple[int, float, float]]) -> float:
    return float(np.nanmean([v for _, v, _ in seeds]))


def verdict_lines(win: dict[str, float], classes: dict[str, str], who: str = "") -> list[str]:
    """The class verdict of ``win`` as Markdown bullets (``who`` names the algorithm, if several)."""
    v = class_verdict(win, classes)
    counts = {c: f"{len(ms)} map" + ("" if len(ms) == 1 else "s") for c, ms in v["maps"].items()}
    mean_text = ", ".join(f"{c.replace('_', ' ')} {v['means'][c]:.2f} ({counts[c]})" for c in CLASSES)
    if not v["complete"]:
        missing = [c.replace("_", " ") for c in CLASSES if not v["maps"][c]]
        verdict = f"**incomplete**: no finished map in {', '.join(missing)}"
    else:
        verdict = "**yes**" if v["ordered"] else "**no**"
    inv = ", ".join(f"{s} > {e}" for e, s in v["inversions"]) or "none"
    n = sum(len(x) for x in v["maps"].values())
    rho = "—" if math.isnan(v["rho"]) else f"{v['rho']:.2f}"
    pre = f"{who}: " if who else ""
    return [
        f"- {pre}class means: {mean_text}",
        f"- {pre}ordered as published (Easy >= Hard >= Super Hard): {verdict}",
        f"- {pre}Super Hard maps above an Easy map: {inv}",
        f"- {pre}Spearman's rho (class rank vs win rate, {n} maps): {rho}",
    ]


def _notes(budget: int) -> list[str]:
    k = f"{budget / 1e3:g}k"
    return [
        f"- win rate at {k}: the mean of each run's test phases in ({budget - WINDOW:,}, {budget:,}], then "
        f"over seeds; runs whose last test phase is before {budget - FINISHED_SLACK:,} are left out",
        "- published columns: QMIX on StarCraft II 4.10 after millions of env steps (pymarl2's README, which "
        "does not state each budget); the class column is that README's",
    ]


def table(sweeps: Sequence[Path], budget: int, alg: str = "qmix") -> str:
    """The per-map table and the verdict lines (Markdown)."""
    published = yaml.safe_load(PUBLISHED.read_text(encoding="utf-8"))
    classes = published["difficulty"]["classes"]
    ours = _ours(sweeps, budget, alg)
    win = {task: _mean(seeds) for task, seeds in ours.items()}
    order = sorted(ours, key=lambda m: (CLASSES.index(classes[m]) if m in classes else -1, -win[m], m))
    k = f"{budget / 1e3:g}k"
    head = ["map", "class (pymarl2)", "seeds", f"ours at {k} (mean; per seed)", *QMIX_COLUMNS.values()]
    rows = [head]
    for m in order:
        pub = [published[key]["win_rate"].get(m) for key in QMIX_COLUMNS]
        rows.append(
            [
                m,
                classes.get(m, "—").replace("_", " "),
                ", ".join(str(s) for s, _, _ in ours[m]),
                fmt_seeds([v for _, v, _ in ours[m]]),
                *("—" if v is None else f"{v} %" for v in pub),
            ]
        )
    return "\n".join([md_table(rows), "", *_notes(budget), *verdict_lines(win, classes)])


def side_by_side(sweeps: Sequence[Path], budget: int, algs: Sequence[str]) -> str:
    """One row per map with every algorithm of ``algs`` beside the others and the published figures, and
    each algorithm's class verdict (Markdown). A map that an algorithm has not finished reads "—"."""
    published = yaml.safe_load(PUBLISHED.read_text(encoding="utf-8"))
    classes = published["difficulty"]["classes"]
    ours = {a: _ours(sweeps, budget, a) for a in algs}
    wins = {a: {m: _mean(seeds) for m, seeds in o.items()} for a, o in ours.items()}
    first = wins[algs[0]]
    maps = sorted(
        {m for o in ours.values() for m in o},
        key=lambda m: (CLASSES.index(classes[m]) if m in classes else -1, -first.get(m, -1.0), m),
    )
    k = f"{budget / 1e3:g}k"
    head = ["map", "class (pymarl2)"]
    for a in algs:
        head += [f"{a.upper()} seeds", f"{a.upper()} at {k} (mean; per seed)"]
    rows = [[*head, *QMIX_COLUMNS.values()]]
    for m in maps:
        row = [m, classes.get(m, "—").replace("_", " ")]
        for a in algs:
            seeds = ours[a].get(m, [])
            row += [", ".join(str(s) for s, _, _ in seeds) or "—", fmt_seeds([v for _, v, _ in seeds])]
        pub = [published[key]["win_rate"].get(m) for key in QMIX_COLUMNS]
        rows.append([*row, *("—" if v is None else f"{v} %" for v in pub)])
    lines = [md_table(rows), "", *_notes(budget)]
    for a in algs:
        lines += verdict_lines(wins[a], classes, a.upper())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``map_ordering.py SWEEP [SWEEP ...] --budget B [--alg qmix]``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "sweeps", nargs="+", type=Path, help="sweep folders, run folders, run records or folders of them"
    )
    p.add_argument("--budget", type=int, required=True, help="env steps every counted run has reached")
    p.add_argument("--alg", default="qmix", help="an algorithm, or several comma-separated side by side")
    args = p.parse_args(argv)
    algs = [a for a in args.alg.split(",") if a]
    one = len(algs) == 1
    print(table(args.sweeps, args.budget, algs[0]) if one else side_by_side(args.sweeps, args.budget, algs))


if __name__ == "__main__":
    main()
