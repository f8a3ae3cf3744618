"""Per (environment, map, algorithm): IQM and mean of the final greedy test score, of the env steps to the
target and of the absolute metric, with 95 % CIs; probability of improvement between algorithms; and the
Markdown tables of a report. Every table says how many seeds it used (the protocol asks for 10)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from marl.report import stats
from marl.report.runs import Run

PROTOCOL_SEEDS = 10  # Gorsane et al. (2022) and Agarwal et al. (2021) ask for at least 10 runs


def groups(runs: Sequence[Run]) -> dict[tuple[str, str, str], list[Run]]:
    """Runs by (env, task, alg), each list sorted by seed, in sorted key order."""
    out: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for r in runs:
        out[(r.env, r.task, r.alg)].append(r)
    return {k: sorted(v, key=lambda r: r.seed) for k, v in sorted(out.items())}


def steps_to_target(runs: Sequence[Run]) -> tuple[np.ndarray, int]:
    """Env steps to the target per run; a run that never reached it counts its budget (a lower bound).
    Returns the values and how many runs were censored so."""
    values = [r.steps_to if r.steps_to is not None else r.budget for r in runs]
    return np.asarray(values, dtype=np.float64), sum(r.steps_to is None for r in runs)


def shared_tasks(runs: Sequence[Run]) -> dict[str, tuple[list[str], dict[str, dict[str, list[Run]]]]]:
    """Per env: the maps an aggregate over maps uses (sorted), and its runs by algorithm and map.

    A map counts when every algorithm of the env ran it with at least ``n`` seeds, where ``n`` is chosen
    to keep the most runs (``n`` times the maps that have it; a tie goes to more seeds): a suite still
    under way then aggregates its finished maps at full seeds instead of every map at one seed."""
    by_env: dict[str, dict[str, dict[str, list[Run]]]] = defaultdict(lambda: defaultdict(dict))
    for (env, task, alg), rs in groups(runs).items():
        by_env[env][alg][task] = rs
    out = {}
    for env, algs in by_env.items():
        common = set.intersection(*(set(t) for t in algs.values()))
        fewest = {t: min(len(algs[a][t]) for a in algs) for t in common}
        best = max(
            set(fewest.values()), key=lambda n: (n * sum(f >= n for f in fewest.values()), n), default=0
        )
        out[env] = (sorted(t for t, f in fewest.items() if f >= best), algs)
    return out


def _matrices(tasks: list[str], algs: dict[str, dict[str, list[Run]]]) -> dict[str, np.ndarray]:
    """Per algorithm, the (runs, tasks) matrix of final scores, each task cut to the fewest seeds any
    (task, algorithm) has (rliable needs a matrix)."""
    n = min(len(algs[a][t]) for a in algs for t in tasks)
    return {a: np.array([[algs[a][t][i].final for t in tasks] for i in range(n)]) for a in sorted(algs)}


def score_matrices(runs: Sequence[Run]) -> dict[str, dict[str, np.ndarray]]:
    """Per env: per algorithm, a (runs, tasks) matrix of final scores over the maps every algorithm of
    that env ran with enough seeds (:func:`shared_tasks`), each cut to the fewest seeds any has."""
    return {env: _matrices(tasks, algs) for env, (tasks, algs) in shared_tasks(runs).items() if tasks}


def aggregate(runs: Sequence[Run], reps: int = 2_000, seed: int = 0) -> list[dict[str, Any]]:
    """Per environment whose algorithms share two or more maps: rliable's aggregate metrics of every
    algorithm over those maps (:func:`shared_tasks`; the first ``n`` seeds of each, ``n`` the fewest any
    of those maps and algorithms has) and the probability of improvement between each pair of algorithms,
    averaged over the maps."""
    out = []
    for env, (tasks, algs) in shared_tasks(runs).items():
        if len(tasks) < 2:
            continue
        mats = _matrices(tasks, algs)
        poi = [
            {"x": x, "y": y, **stats.probability_of_improvement(mats[x], mats[y], reps, seed)}
            for x, y in itertools.permutations(sorted(mats), 2)
        ]
        out.append(
            {
                "env": env,
                "tasks": tasks,
                "seeds_per_task": int(next(iter(mats.values())).shape[0]),
                "algs": stats.aggregates(mats, reps, seed),
                "poi": poi,
            }
        )
    return out


def analyse(
    runs: Sequence[Run], metric: str, target: float, reps: int = 2_000, seed: int = 0
) -> dict[str, Any]:
    """Everything a report shows, as plain data (written as ``report.json``)."""
    rows, poi = [], []
    by_group = groups(runs)
    for (env, task, alg), rs in by_group.items():
        final = np.array([[r.final] for r in rs])
        steps, censored = steps_to_target(rs)
        row: dict[str, Any] = {
            "env": env,
            "task": task,
            "alg": alg,
            "seeds": [r.seed for r in rs],
            "final": stats.iqm_and_mean({"x": final}, reps, seed)["x"],
            "steps_to": stats.iqm_and_mean({"x": steps[:, None]}, reps, seed)["x"],
            "reached": len(rs) - censored,
            "budget_min": min(r.budget for r in rs),
            "code": sorted({c for r in rs for c in r.code}),
            "engine": sorted({r.engine for r in rs}),
        }
        absolute = [r.absolute for r in rs if r.absolute is not None]
        row["absolute"] = None
        if len(absolute) == len(rs):  # only over every run: a subset would be a biased sample
            score = "win_rate" if metric == "test_win_rate" else "return_mean"
            vals = np.array([[a[score]] for a in absolute])
            row["absolute"] = {
                **stats.iqm_and_mean({"x": vals}, reps, seed)["x"],
                "episodes": absolute[0]["episodes"],
            }
        rows.append(row)
    tasks: dict[tuple[str, str], dict[str, list[Run]]] = defaultdict(dict)
    for (env, task, alg), rs in by_group.items():
        tasks[(env, task)][alg] = rs
    for (env, task), algs in sorted(tasks.items()):
        for x, y in itertools.permutations(sorted(algs), 2):
            fx = np.array([[r.final] for r in algs[x]])
            fy = np.array([[r.final] for r in algs[y]])
            poi.append(
                {
                    "env": env,
                    "task": task,
                    "x": x,
                    "y": y,
                    "n_x": len(fx),
                    "n_y": len(fy),
                    **stats.probability_of_improvement(fx, fy, reps, seed),
                }
            )
    return {
        "metric": metric,
        "target": target,
        "reps": reps,
        "ci": stats.CI_SIZE,
        "bootstrap_seed": seed,
        "rows": rows,
        "poi": poi,
        "aggregate": aggregate(runs, reps, seed),
        "engines": {
            env: sorted({r.engine for r in runs if r.env == env}) for env in sorted({r.env for r in runs})
        },
    }


def _ci(d: dict[str, float], key: str, fmt: str) -> str:
    return f"{d[key]:{fmt}} [{d[key + '_lo']:{fmt}}, {d[key + '_hi']:{fmt}}]"


def _seeds(seeds: Sequence[int]) -> str:
    return f"{len(seeds)} ({', '.join(map(str, seeds))})" if len(seeds) <= 5 else str(len(seeds))


def _engines(result: dict[str, Any]) -> tuple[str, bool]:
    """The engines named in the tables' headings (`` — smac on engine sim 0.9.0``), and whether some
    environment mixes engines (then each row names its own); nothing for reports written before engine
    versions."""
    engines = result.get("engines") or {}
    if not engines:
        return "", False
    text = "; ".join(f"{env} on engine {' + '.join(labels)}" for env, labels in engines.items())
    return f" — {text}", any(len(labels) > 1 for labels in engines.values())


def markdown_tables(result: dict[str, Any], heading: str = "###") -> str:
    """The report's tables: per group, then probability of improvement (when two algorithms share a map).
    Every heading names the runs' engines (reports written since engine versions)."""
    metric, target = result["metric"], result["target"]
    on, mixed = _engines(result)
    all_n = sorted({len(r["seeds"]) for r in result["rows"]})
    n_text = " or ".join(map(str, all_n))
    lines = [
        f"{heading} Final {metric} (greedy test phases) and env steps to {target:g}{on}",
        "",
        f"IQM and mean over {n_text} seed{'' if all_n == [1] else 's'} per row (the protocol asks for "
        f"{PROTOCOL_SEEDS}{'; a one-seed CI is that seed' if 1 in all_n else ''}), each with its "
        f"95 % stratified bootstrap CI ({result['reps']:,} resamples, rliable). Steps to the target: a run "
        "that never reached it counts its whole budget, so such a cell (marked ≥) is a lower bound. "
        "Absolute: the best checkpoint re-evaluated over 10× the test episodes. Code: the commits the "
        "runs were launched from (their provenance; + where files differed from the commit).",
        "",
        "| env | map | alg | seeds | final IQM | final mean | steps to target IQM | steps mean | reached "
        "| absolute IQM | absolute mean | code |" + (" engine |" if mixed else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if mixed else ""),
    ]
    for r in result["rows"]:
        censored = r["reached"] < len(r["seeds"])
        ge = "≥ " if censored else ""
        a = r["absolute"]
        abs_iqm = _ci(a, "iqm", ".2f") + f" ({a['episodes']} ep.)" if a else "—"
        abs_mean = _ci(a, "mean", ".2f") if a else "—"
        cells = [
            r["env"],
            r["task"],
            r["alg"],
            _seeds(r["seeds"]),
            _ci(r["final"], "iqm", ".2f"),
            _ci(r["final"], "mean", ".2f"),
            ge + _ci(r["steps_to"], "iqm", ",.0f"),
            ge + _ci(r["steps_to"], "mean", ",.0f"),
            f"{r['reached']}/{len(r['seeds'])}",
            abs_iqm,
            abs_mean,
            ", ".join(r.get("code") or ()) or "—",  # reports written before provenance have none
            *([" + ".join(r.get("engine") or ["unknown"])] if mixed else []),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if result["poi"]:
        lines += [
            "",
            f"{heading} Probability of improvement (final {metric}){on}",
            "",
            "P(X > Y): the chance that a run of X ends above a run of Y on the same map (ties count one "
            "half), with its 95 % CI from independent stratified bootstraps; seeds per side as listed.",
            "",
            "| env | map | X | Y | seeds X / Y | P(X > Y) |",
            "|---|---|---|---|---|---|",
        ]
        for p in result["poi"]:
            lines.append(
                f"| {p['env']} | {p['task']} | {p['x']} | {p['y']} | {p['n_x']} / {p['n_y']} | "
                f"{p['p']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}] |"
            )
    lines += _aggregate_lines(result.get("aggregate") or [], metric, heading, on)  # absent in older reports
    return "\n".join(lines) + "\n"


def _aggregate_lines(agg: list[dict[str, Any]], metric: str, heading: str, on: str = "") -> list[str]:
    """The aggregate-over-maps section of :func:`markdown_tables` (nothing when no env has one)."""
    if not agg:
        return []
    lines = [
        "",
        f"{heading} Aggregate over maps (final {metric}){on}",
        "",
        "rliable's aggregate metrics over the maps that all of an environment's algorithms ran with n or "
        "more seeds, the first n of each (n chosen to keep the most runs; maps and n listed below the "
        "table): IQM of all (run, map) scores, median and mean of the per-map means, optimality gap (mean "
        "shortfall below 1), each with its 95 % bootstrap CI stratified by map; P(X > Y) averaged over the "
        "maps.",
        "",
        "| env | alg | maps | IQM | median | mean | optimality gap |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in agg:
        for alg, m in a["algs"].items():
            cells = [_ci(m, k, ".2f") for k in stats.AGGREGATES]
            lines.append(f"| {a['env']} | {alg} | {len(a['tasks'])} | " + " | ".join(cells) + " |")
    lines += ["", "| env | X | Y | P(X > Y) over maps |", "|---|---|---|---|"]
    for a in agg:
        for p in a["poi"]:
            lines.append(
                f"| {a['env']} | {p['x']} | {p['y']} | {p['p']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}] |"
            )
    lines.append("")
    for a in agg:
        n = a["seeds_per_task"]
        seeds = f"{n} seed{'s' if n != 1 else ''}"
        lines.append(f"- {a['env']}: {len(a['tasks'])} maps, {seeds} each: {', '.join(a['tasks'])}")
    return lines
