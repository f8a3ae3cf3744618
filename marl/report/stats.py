"""Aggregate statistics through ``rliable`` (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
Precipice"): interquartile mean (IQM) and mean with 95 % stratified bootstrap confidence intervals,
probability of improvement, performance profiles and IQM curves over env steps.

Score arrays follow rliable's layout: ``scores_RK`` is (runs, tasks); curves are (runs, tasks, points).
Every function takes ``reps`` (bootstrap replications) and ``seed`` (the bootstrap's random state), so a
report is reproducible.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

CI_SIZE = 0.95


def _rly():
    """rliable's modules (imported on first use: it pulls in arch, pandas and seaborn)."""
    from rliable import library, metrics

    return library, metrics


def _state(seed: int) -> np.random.RandomState:
    return np.random.RandomState(seed)


def _estimates(rly, scores, func, reps: int, seed: int):
    """``rliable.library.get_interval_estimates`` (percentile CIs), seeded: rliable 1.2's stratified
    bootstraps draw their indices from NumPy's global generator whatever ``random_state`` says, so it is
    seeded here and restored afterwards. arch 7's warning that ``random_state`` is deprecated is muted."""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="random_state is deprecated", category=FutureWarning)
            return rly.get_interval_estimates(
                scores, func, reps=reps, confidence_interval_size=CI_SIZE, random_state=_state(seed)
            )
    finally:
        np.random.set_state(saved)


def _rows(
    scores: Mapping[str, np.ndarray], names: Sequence[str], func, reps: int, seed: int
) -> dict[str, dict[str, float]]:
    """Per key of ``scores`` ((runs, tasks) arrays): each of ``func``'s statistics (``names``, in order)
    with its 95 % stratified bootstrap CI (``<name>``, ``<name>_lo``, ``<name>_hi``), and ``n_runs``."""
    rly, _ = _rly()
    out = {}
    for key, arr in scores.items():
        arr = np.asarray(arr, dtype=np.float64)
        point, (lo, hi) = (v[key] for v in _estimates(rly, {key: arr}, func, reps, seed))
        row: dict[str, float] = {}
        for i, name in enumerate(names):
            row.update({name: float(point[i]), f"{name}_lo": float(lo[i]), f"{name}_hi": float(hi[i])})
        out[key] = {**row, "n_runs": int(arr.shape[0])}
    return out


def iqm_and_mean(
    scores: Mapping[str, np.ndarray], reps: int = 2_000, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Per key of ``scores`` ((runs, tasks) arrays): ``iqm``, ``iqm_lo``, ``iqm_hi``, ``mean``, ``mean_lo``,
    ``mean_hi`` (95 % stratified bootstrap CIs over runs, within each task) and ``n_runs``.

    All replicates at once: the same numbers as :func:`iqm_and_mean_rliable` (the reference, which calls
    rliable's metrics once per replicate: 0.42 s against 1.2 ms for three runs at 2,000 replicates, load 8;
    ``tests/test_report.py`` holds them equal). rliable's stratified bootstrap draws each replicate's run
    indices within each task from NumPy's legacy generator seeded with ``seed``; one draw of every
    replicate reads the same stream."""
    from scipy.stats import trim_mean

    alpha = (1.0 - CI_SIZE) / 2
    q = [100 * alpha, 100 * (1.0 - alpha)]  # arch's percentile interval, as rliable asks for it
    out = {}
    for key, arr in scores.items():
        s_RK = np.asarray(arr, dtype=np.float64)
        n_runs, n_tasks = s_RK.shape
        idx_BRK = np.random.RandomState(seed).choice(n_runs, (reps, n_runs, n_tasks), replace=True)
        boot_BRK = s_RK[idx_BRK, np.arange(n_tasks)]
        row: dict[str, float] = {}
        for name, point, boot_B in (
            ("iqm", trim_mean(s_RK, 0.25, axis=None), trim_mean(boot_BRK.reshape(reps, -1), 0.25, axis=1)),
            ("mean", np.mean(np.mean(s_RK, axis=0)), np.mean(np.mean(boot_BRK, axis=1), axis=1)),
        ):
            lo, hi = np.percentile(boot_B, q)
            row.update({name: float(point), f"{name}_lo": float(lo), f"{name}_hi": float(hi)})
        out[key] = {**row, "n_runs": n_runs}
    return out


def iqm_and_mean_rliable(
    scores: Mapping[str, np.ndarray], reps: int = 2_000, seed: int = 0
) -> dict[str, dict[str, float]]:
    """:func:`iqm_and_mean` through rliable itself (``aggregate_iqm``, ``aggregate_mean``,
    ``get_interval_estimates``): the reference the vectorised version is tested against."""
    _, metrics = _rly()

    def both(s: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(s), metrics.aggregate_mean(s)])

    return _rows(scores, ("iqm", "mean"), both, reps, seed)


AGGREGATES = ("iqm", "median", "mean", "optimality_gap")


def aggregates(
    scores: Mapping[str, np.ndarray], reps: int = 2_000, seed: int = 0, gamma: float = 1.0
) -> dict[str, dict[str, float]]:
    """rliable's four aggregate metrics of each key's (runs, tasks) array: IQM over every (run, task)
    score, median and mean of the per-task means, and optimality gap (the mean shortfall below ``gamma``),
    each with its 95 % CI from a bootstrap stratified by task (Agarwal et al. 2021), and ``n_runs``."""
    _, metrics = _rly()

    def four(s: np.ndarray) -> np.ndarray:
        return np.array(
            [
                metrics.aggregate_iqm(s),
                metrics.aggregate_median(s),
                metrics.aggregate_mean(s),
                metrics.aggregate_optimality_gap(s, gamma),
            ]
        )

    return _rows(scores, AGGREGATES, four, reps, seed)


def probability_of_improvement(
    x_RK: np.ndarray, y_RK: np.ndarray, reps: int = 2_000, seed: int = 0
) -> dict[str, float]:
    """P(X > Y) averaged over tasks (ties count one half: the Mann-Whitney U statistic over
    ``runs_x * runs_y``), with its 95 % CI from independent stratified bootstraps of X and Y."""
    rly, metrics = _rly()

    def poi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.array([metrics.probability_of_improvement(a, b)])

    pair = [np.asarray(x_RK, dtype=np.float64), np.asarray(y_RK, dtype=np.float64)]
    point, ci = _estimates(rly, {"x_y": pair}, poi, reps, seed)
    return {"p": float(point["x_y"][0]), "lo": float(ci["x_y"][0][0]), "hi": float(ci["x_y"][1][0])}


def performance_profiles(
    scores: Mapping[str, np.ndarray], taus: Sequence[float], reps: int = 2_000, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Score distributions: per key, the fraction of (run, task) scores above each tau, and its 95 % CI
    ((2, len(taus)): lower row, upper row)."""
    rly, _ = _rly()
    taus = np.asarray(taus, dtype=np.float64)

    def profile(s: np.ndarray) -> np.ndarray:
        return rly.score_distributions(s, taus)

    return _estimates(
        rly, {k: np.asarray(v, dtype=np.float64) for k, v in scores.items()}, profile, reps, seed
    )


def iqm_curves(
    curves: Mapping[str, np.ndarray], reps: int = 2_000, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """IQM over runs and tasks at every point of (runs, tasks, points) ``curves``, with 95 % CIs."""
    rly, metrics = _rly()

    def per_point(s: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(s[..., j]) for j in range(s.shape[-1])])

    return _estimates(
        rly, {k: np.asarray(v, dtype=np.float64) for k, v in curves.items()}, per_point, reps, seed
    )
