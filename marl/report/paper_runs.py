"""The SMAC paper's runs on StarCraft II (Samvelyan et al. 2019): every run's greedy test curve, as published
by the SMAC authors, and the statistics that lay our runs over them.

The data file (``benchmarks/data/smac_paper_runs.json``, written by :func:`convert`) holds, per map, algorithm
and run, the env steps of each test phase, the games won of the phase's 32 test episodes and the mean test
return. Its ``source`` field names where the published file comes from. :func:`band` gives the game's runs'
range and median at a checkpoint, :func:`verdict` whether our runs' median lies inside that range widened
by the sampling error of 32 test episodes (a Wilson score interval for win rates; for returns 1.96 standard
errors of the mean of 32 episodes, from the standard deviation our runs logged).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DATA_FORMAT = "smac-paper-runs"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "smac_paper_runs.json"
TEST_EPISODES = 32  # the paper's test phase (pymarl's sc2.yaml: test_nepisode 32)
# the checkpoints of the calibration table; the first (1k steps) is each run's first test phase, which comes
# after its first episode (every map's limit is at most 400 steps): the untrained network's greedy play
CHECKPOINTS = (1_000, 100_000, 300_000, 500_000, 1_000_000, 2_000_000)
# a run's value at checkpoint T is its last test phase at or before T, if that phase lies within this many
# steps of T (the paper tested every ~10k steps; a run that stopped earlier has no value at T)
MAX_GAP = 15_000
Z95 = 1.959964
SOURCE = (
    "The SMAC authors' data of the runs in the SMAC paper (Samvelyan et al. 2019, arXiv:1902.04043): the "
    "release asset smac_run_data.json of the repository oxwhirl/smac, linked from its README as 'data from "
    "the runs used in the paper'; the same file is committed in mariuslindegaard/6.867_MARL_project at "
    "data/smac_run_data.json (commit aad5078b04ffa1c521a62a238ba7470931f9ae72). Played in pymarl "
    "(oxwhirl/pymarl, the SMAC v1 settings of commit a8f171b) on StarCraft II 4.6.2."
)


@dataclass(frozen=True)
class PaperRun:
    """One published run: test phases at ``t_env`` with ``won`` of 32 games and mean return ``ret``."""

    map_name: str
    alg: str
    run: str
    t_env: np.ndarray
    won: np.ndarray
    ret: np.ndarray

    def at(self, t: int, metric: str) -> float | None:
        """The value (``win_rate`` or ``return``) of the last test at or before ``t`` within
        :data:`MAX_GAP` steps of it; ``None`` when the run has none there."""
        return value_at(self.t_env, self.won / TEST_EPISODES if metric == "win_rate" else self.ret, t)


def value_at(t_env: np.ndarray, values: np.ndarray, t: int) -> float | None:
    """The last of ``values`` whose ``t_env`` is at or before ``t`` and within :data:`MAX_GAP` of it."""
    i = int(np.searchsorted(t_env, t, side="right")) - 1
    if i < 0 or t - int(t_env[i]) > MAX_GAP:
        return None
    return float(values[i])


def convert(published: Mapping[str, Any]) -> dict[str, Any]:
    """The compact data file's content from the published JSON
    (``{map: {alg: {"test_battle_won_mean" | "test_return_mean": {run: [[t_env, value], ...]}}}}``).
    Win rates are stored as games won of 32 (every published value is a multiple of 1/32; checked)."""
    maps: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for map_name in sorted(published):
        for alg in sorted(published[map_name]):
            series = published[map_name][alg]
            runs = []
            for run in sorted(series["test_battle_won_mean"], key=lambda r: int(r.rsplit("_", 1)[-1])):
                won, ret = series["test_battle_won_mean"][run], series["test_return_mean"][run]
                if [p[0] for p in won] != [p[0] for p in ret]:
                    raise ValueError(f"{map_name}/{alg}/{run}: win-rate and return tests at different t_env")
                games = [w * TEST_EPISODES for _, w in won]
                if any(abs(g - round(g)) > 1e-6 for g in games):
                    raise ValueError(f"{map_name}/{alg}/{run}: a win rate that is not a multiple of 1/32")
                runs.append(
                    {
                        "run": run,
                        "t_env": [int(t) for t, _ in won],
                        "won": [int(round(g)) for g in games],
                        "return": [round(float(r), 4) for _, r in ret],
                    }
                )
            maps.setdefault(map_name, {})[alg] = runs
    return {
        "format": DATA_FORMAT,
        "source": SOURCE,
        "game_version": "4.6.2",
        "test_episodes": TEST_EPISODES,
        "maps": maps,
    }


def load_paper_runs(path: Path = DEFAULT_DATA) -> dict[tuple[str, str], list[PaperRun]]:
    """``(map, alg) -> runs`` from the compact data file; a file of another format raises ``ValueError``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != DATA_FORMAT:
        raise ValueError(
            f"{path}: not a {DATA_FORMAT} file "
            "(write it with benchmarks/learning/real_game_curves.py convert)"
        )
    out: dict[tuple[str, str], list[PaperRun]] = {}
    for map_name, algs in data["maps"].items():
        for alg, runs in algs.items():
            out[map_name, alg] = [
                PaperRun(
                    map_name,
                    alg,
                    r["run"],
                    np.asarray(r["t_env"], dtype=np.int64),
                    np.asarray(r["won"], dtype=np.int64),
                    np.asarray(r["return"], dtype=np.float64),
                )
                for r in runs
            ]
    return out


@dataclass(frozen=True)
class Band:
    """The game's runs at one checkpoint: how many have a value there, their min, median and max."""

    n: int
    lo: float
    median: float
    hi: float


def band(runs: Sequence[PaperRun], t: int, metric: str) -> Band | None:
    """The range and median of ``runs`` at checkpoint ``t`` (``None`` when no run reaches it)."""
    vals = [v for v in (r.at(t, metric) for r in runs) if v is not None]
    if not vals:
        return None
    return Band(len(vals), float(np.min(vals)), float(np.median(vals)), float(np.max(vals)))


def wilson(p: float, n: int = TEST_EPISODES, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed in ``n`` trials."""
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def widened(b: Band, metric: str, return_std: float | None = None) -> tuple[float, float]:
    """The game's range at a checkpoint widened by the sampling error of one 32-episode test phase."""
    if metric == "win_rate":
        return wilson(b.lo)[0], wilson(b.hi)[1]
    half = Z95 * (return_std or 0.0) / math.sqrt(TEST_EPISODES)
    return b.lo - half, b.hi + half


# our presets of the paper's settings (configs/algs/*_smac_paper.yaml) -> the algorithm's name in the data
PAPER_PRESETS = {"qmix_smac_paper": "QMIX", "vdn_smac_paper": "VDN", "iql_smac_paper": "IQL"}
# pymarl itself on the engine (benchmarks/interop/pymarl_paper.py): the paper's code, not our learner
PAPER_PRESETS.update(pymarl_qmix="QMIX", pymarl_vdn="VDN", pymarl_iql="IQL", pymarl_coma="COMA")


def learner_label(alg: str) -> str:
    """How a report names the runs of ``alg`` (a key of ``PAPER_PRESETS``): the game's algorithm for our
    presets, with "pymarl" before it for pymarl's own runs, so that the two learners never pool."""
    return f"pymarl {PAPER_PRESETS[alg]}" if alg.startswith("pymarl_") else PAPER_PRESETS[alg]


# a metric of the table -> the curve of a run record (marl.report.records) that holds it
RECORD_CURVES = {"win_rate": "test_win_rate", "return": "test_return_mean"}
RECORD_STD = "test_return_std"


def ours_at(records: Sequence[Mapping[str, Any]], t: int, metric: str) -> tuple[list[float], float | None]:
    """Our runs' values at checkpoint ``t`` (one per run record that reaches it, as :meth:`PaperRun.at`)
    and the median test-return standard deviation they logged there (for :func:`verdict`)."""
    vals, stds = [], []
    for rec in records:
        curve = rec["curves"].get(RECORD_CURVES[metric], [])
        if not curve:
            continue
        v = value_at(np.asarray([p[0] for p in curve]), np.asarray([p[1] for p in curve]), t)
        if v is None:
            continue
        vals.append(v)
        std = rec["curves"].get(RECORD_STD)
        if std:
            s = value_at(np.asarray([p[0] for p in std]), np.asarray([p[1] for p in std]), t)
            stds.append(np.nan if s is None else s)
    std_med = float(np.nanmedian(stds)) if stds and not np.all(np.isnan(stds)) else None
    return vals, std_med


def verdict(ours: float | None, b: Band | None, metric: str, return_std: float | None = None) -> str:
    """``inside`` / ``above`` / ``below`` the widened band, or ``-`` where either side has no value."""
    if ours is None or b is None:
        return "-"
    lo, hi = widened(b, metric, return_std)
    return "inside" if lo <= ours <= hi else ("above" if ours > hi else "below")
