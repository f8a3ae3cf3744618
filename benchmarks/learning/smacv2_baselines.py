"""SMACv2 baselines: our QMIX and MAPPO runs beside the curves that SMACv2 publishes from the game.

SMACv2's repository ships its baseline training curves
(``smacv2/examples/results/smac2_training_results.pkl``: scenario -> algorithm -> one pandas DataFrame of
``step, mean_test_win_rate, mean_test_return`` per seed; pymarl2's QMIX and the MAPPO of SMACv2's paper,
about 10M steps on StarCraft II). ``extract`` reads that file once into
``benchmarks/data/published_smacv2.yaml`` (per scenario, algorithm and seed: the win rate at a few budgets);
``table`` puts our sweeps beside it.

The win rate "at budget B" of a run, ours or published, is the mean of its greedy test evaluations logged at
env steps in ``(B - WINDOW, B]`` (one test phase is noisy: 32 episodes), then averaged over seeds.

    python benchmarks/learning/smacv2_baselines.py extract \\
        <smacv2>/smacv2/examples/results/smac2_training_results.pkl
    python scripts/sweep.py --alg qmix --maps protoss_5_vs_5 terran_5_vs_5 zerg_5_vs_5 --seeds 3 \\
        t_max=500000 learner.td_lambda=0.4 --out <qmix sweep>
    python scripts/sweep.py --alg mappo --maps protoss_5_vs_5 terran_5_vs_5 zerg_5_vs_5 --seeds 3 \\
        t_max=500000 learner.ppo_clip=0.1 --out <mappo sweep>
    python benchmarks/learning/smacv2_baselines.py table <qmix sweep> <mappo sweep> --budget 500000
"""

from __future__ import annotations

import argparse
import io
import math
import pickle
import sys
import types
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from marl.report.readme import ROW_MARKER, md_table  # noqa: E402
from marl.report.runs import Run, load_runs  # noqa: E402

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published_smacv2.yaml"
WINDOW = 200_000  # env steps before the budget whose test evaluations are averaged
FINISHED_SLACK = 20_000  # a run whose last test phase is this close to the budget has reached it
BUDGETS = (500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000)
ALGS = {"QMIX": "qmix", "MAPPO": "mappo"}  # SMACv2's names -> ours ("open-loop MAPPO" is not compared)
# What the published pickle may reference: pandas frames of NumPy arrays, nothing else is ever loaded.
_ALLOWED_MODULES = {
    "builtins": {"slice"},
    "numpy": {"ndarray", "dtype"},
    "numpy.core.multiarray": {"_reconstruct"},
    "pandas.core.frame": {"DataFrame"},
    "pandas.core.indexes.base": {"_new_Index", "Index"},
    "pandas.core.indexes.numeric": {"Int64Index"},
    "pandas.core.indexes.range": {"RangeIndex"},
    "pandas._libs.internals": {"_unpickle_block"},
    "pandas.core.internals.managers": {"BlockManager"},
}


def at_budget(curve: Sequence[tuple[float, float]], budget: float, window: float = WINDOW) -> float:
    """Mean of the values logged at steps in ``(budget - window, budget]`` (NaN when none were)."""
    vals = [v for t, v in curve if budget - window < t <= budget and math.isfinite(v)]
    return float(np.mean(vals)) if vals else math.nan


class _DataOnlyUnpickler(pickle.Unpickler):
    """Loads only the pandas/NumPy classes of ``_ALLOWED_MODULES`` (a pickle can name any callable)."""

    def find_class(self, module: str, name: str):  # noqa: ANN201 (pickle's signature)
        if name not in _ALLOWED_MODULES.get(module, ()):
            raise pickle.UnpicklingError(f"published results reference {module}.{name}: not data, refused")
        if module == "pandas.core.indexes.numeric":  # pandas 2 dropped Int64Index; Index holds the same
            import pandas as pd

            return pd.Index
        return super().find_class(module, name)


def load_published_pickle(path: str | Path) -> dict:
    """SMACv2's results pickle as ``{scenario: {alg: [DataFrame per seed]}}`` (data classes only)."""
    sys.modules.setdefault("pandas.core.indexes.numeric", types.ModuleType("pandas.core.indexes.numeric"))
    return _DataOnlyUnpickler(io.BytesIO(Path(path).read_bytes())).load()


def extract(path: str | Path, out: Path = PUBLISHED) -> dict:
    """Write ``out``: per scenario, algorithm and seed the published win rate at each of ``BUDGETS``."""
    raw = load_published_pickle(path)
    table: dict = {}
    for scenario in sorted(raw):
        for alg in ALGS:
            seeds = raw[scenario].get(alg, [])
            curves = [
                list(zip(df["step"].tolist(), df["mean_test_win_rate"].tolist(), strict=True)) for df in seeds
            ]
            table.setdefault(scenario, {})[alg] = {
                "seeds": len(curves),
                "last_step": int(max(c[-1][0] for c in curves)),
                "win_rate_at": {b: [round(at_budget(c, b), 3) for c in curves] for b in BUDGETS},
            }
    doc = {
        "source": (
            "SMACv2 (Ellis et al. 2022, arXiv:2212.07489), oxwhirl/smacv2, "
            "smacv2/examples/results/smac2_training_results.pkl (added in commit cc6ad08, 2023-02-15; "
            "read at 577ab5a): baseline training curves on StarCraft II (QMIX: pymarl2, td_lambda 0.4, "
            "epsilon annealed over 100k steps; MAPPO: lr 0.0005, clip 0.1; its RUNNING_EXPERIMENTS.md)"
        ),
        "definition": (
            f"win_rate_at[B]: per seed, the mean of the run's greedy test win rates logged at env steps in "
            f"(B - {WINDOW:,}, B]"
        ),
        "scenarios": table,
    }
    out.write_text(yaml.safe_dump(doc, sort_keys=False, width=110, default_flow_style=None), encoding="utf-8")
    return doc


def ours_at_budget(
    sweeps: Sequence[Path], budget: int, window: float = WINDOW
) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    """``(scenario, alg) -> [(seed, win rate at budget, wall-clock minutes)]`` over the runs of ``sweeps``
    (sweep folders, run folders, run records or folders of them; the win rate: :func:`at_budget` over
    ``window``)."""
    # a run still going (or stopped early) has not reached the budget: left out
    runs, _ = load_runs(list(sweeps), "test_win_rate", 0.95, min_steps=budget - FINISHED_SLACK)
    out: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    for r in runs:
        at = at_budget(r.curve, budget, window)
        out.setdefault((r.task, r.alg), []).append((r.seed, at, _minutes(r)))
    return {k: sorted(v) for k, v in out.items()}


def _minutes(run: Run) -> float:
    """The run's wall-clock in minutes, from the sweep's ``result.json`` or its record (NaN without)."""
    return (run.finished - run.started) / 60


def fmt_seeds(values: Sequence[float]) -> str:
    """The mean in bold, then every value (NaN-free mean; "—" when none is finite)."""
    done = [v for v in values if math.isfinite(v)]
    if not done:
        return "—"
    return f"**{np.mean(done):.2f}** ({' / '.join(f'{v:.2f}' for v in values)})"


def _entries(ours: dict, published: dict):  # noqa: ANN202 (a generator of tuples)
    """``(scenario, SMACv2's algorithm name, our seeds, the published win_rate_at)`` per row, sorted."""
    for (scenario, alg), seeds in sorted(ours.items()):
        name = next(k for k, v in ALGS.items() if v == alg)
        yield scenario, name, seeds, published["scenarios"][scenario][name]["win_rate_at"]


def comparison_rows(ours: dict, published: dict, budget: int) -> list[list[str]]:
    """Rows of scenario, algorithm, ours at ``budget``, SMACv2's at ``budget`` and at 10M."""
    rows = []
    for scenario, name, seeds, pub in _entries(ours, published):
        ours_col = fmt_seeds([v for _, v, _ in seeds])
        seed_ids = ", ".join(str(k) for k, _, _ in seeds)
        rows.append([scenario, name, seed_ids, ours_col, fmt_seeds(pub[budget]), fmt_seeds(pub[10_000_000])])
    return rows


def readme_rows(ours: dict, published: dict, budget: int, conditions: str) -> list[list[str]]:
    """The README learning table's rows (task, target, reached, wall-clock, conditions) per scenario/alg."""
    rows = []
    for scenario, name, seeds, pub in _entries(ours, published):
        ids = ", ".join(str(k) for k, _, _ in seeds)
        minutes = [m for _, _, m in seeds if math.isfinite(m)]
        k = f"{budget / 1e3:g}k"
        rows.append(
            [
                f"{name} {scenario} (SMACv2, {k}-step budget, seed{'s' if len(seeds) > 1 else ''} {ids})",
                f"SMACv2's {name} on the game at {k}: {np.nanmean(pub[budget]):.2f} (at 10M: "
                f"{np.nanmean(pub[10_000_000]):.2f})",
                f"test win rate at {k}: {fmt_seeds([v for _, v, _ in seeds])}",
                _span(minutes),
                conditions,
            ]
        )
    return rows


def _span(minutes: list[float]) -> str:
    if not minutes:
        return "—"
    lo, hi = round(min(minutes)), round(max(minutes))
    return f"{lo} min per run" if lo == hi else f"{lo}–{hi} min per run"


def table(sweeps: Sequence[Path], budget: int, conditions: str | None = None) -> str:
    """The comparison table (Markdown) of our sweeps against the published curves."""
    published = yaml.safe_load(PUBLISHED.read_text(encoding="utf-8"))
    if budget not in published["scenarios"][next(iter(published["scenarios"]))]["QMIX"]["win_rate_at"]:
        raise SystemExit(f"--budget {budget}: the published table has the budgets {list(BUDGETS)}")
    head = [
        "scenario",
        "alg",
        "our seeds",
        f"ours at {budget / 1e6:g}M (mean; per seed)",
        f"SMACv2 at {budget / 1e6:g}M (game)",
        "SMACv2 at 10M (game)",
    ]
    ours = ours_at_budget(sweeps, budget)
    text = md_table([head, *comparison_rows(ours, published, budget)])
    if conditions is not None:  # the rows that README.md's learning table takes from the results file
        readme_head = ["task", "target", "reached at env steps", "wall-clock", "conditions"]
        rows = readme_rows(ours, published, budget, conditions)
        text += "\n\n" + ROW_MARKER + "\n" + md_table([readme_head, *rows])
    return text


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``extract PKL`` or ``table SWEEP [SWEEP ...] --budget B``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="read SMACv2's results pickle into published_smacv2.yaml")
    e.add_argument("pkl")
    t = sub.add_parser("table", help="our sweeps beside the published figures")
    t.add_argument("sweeps", nargs="+", type=Path)
    t.add_argument("--budget", type=int, default=500_000, choices=BUDGETS)
    t.add_argument(
        "--readme-rows", metavar="CONDITIONS", help="also the README learning rows, with this text"
    )
    args = p.parse_args(argv)
    if args.cmd == "extract":
        extract(args.pkl)
        print(f"wrote {PUBLISHED}")
    else:
        print(table(args.sweeps, args.budget, args.readme_rows))


if __name__ == "__main__":
    main()
