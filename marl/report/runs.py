"""Run folders as the report sees them: who ran what (``config.yaml``), its greedy test curve (``log.jsonl``)
and its absolute metric (the best checkpoint re-evaluated, cached in ``absolute_metric.json``).

The absolute metric follows Gorsane et al. (2022, sec. 4): the best policy of a run, chosen on the usual
test phases, is evaluated again over ten times their number of episodes, which removes the optimistic bias
of picking the maximum of noisy test scores.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from marl.logging.plots import read_scalars
from marl.run_folder import LOG_FILE

ABSOLUTE_FILE = "absolute_metric.json"
ABSOLUTE_FACTOR = 10  # Gorsane et al. (2022): 10x the test episodes of one evaluation
RETURN_KEY = "test_return_mean"


@dataclass
class RunResult:
    """One (map, seed) run: its curve of ``metric`` and what the summary needs."""

    map_name: str
    seed: int
    run_dir: str
    curve: list[tuple[int, float]] = field(default_factory=list)
    final: float = math.nan  # last logged value of the metric
    steps_to: int | None = None  # first t with metric >= threshold
    error: str = ""  # non-empty when the run failed
    started: float = math.nan  # wall-clock (time.time()) start and end of the run's task
    finished: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize_run(
    map_name: str, seed: int, run_dir: str | Path, metric: str = "test_win_rate", threshold: float = 0.95
) -> RunResult:
    """From ``run_dir/log.jsonl``: the metric curve, its last value, the first t at or over ``threshold``."""
    log = Path(run_dir) / "log.jsonl"
    curve = read_scalars(log).get(metric, [])
    curve = [(t, v) for t, v in curve if math.isfinite(v)]
    res = RunResult(map_name, seed, str(run_dir), curve)
    if curve:
        res.final = curve[-1][1]
        res.steps_to = next((t for t, v in curve if v >= threshold), None)
    else:
        res.error = f"no {metric!r} in {log}"
    return res


@dataclass
class Run:
    """One training run: ``env`` / ``task`` (map) / ``alg`` / ``seed``, and what it logged."""

    env: str
    task: str
    alg: str
    seed: int
    run_dir: Path
    test_nepisode: int
    curve: list[tuple[int, float]]  # (t_env, metric) of every test phase
    final: float  # last value of the metric
    steps_to: int | None  # first t_env at or over the target; None: never reached
    budget: int  # last logged t_env (the steps the run covered)
    extra: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # RETURN_KEY
    absolute: dict[str, Any] | None = None  # the cached ABSOLUTE_FILE, when there is one


def _env_name(cfg: dict[str, Any]) -> str:
    name = str(cfg["env"]["name"])
    if name != "sc2":
        return name
    from marl.envs.smac.smacv2.scenarios import is_scenario  # SMAC and SMACv2 both use the sc2 env

    return "smacv2" if is_scenario(str(cfg["env"]["map_name"])) else "smac"


def is_run_dir(folder: Path) -> bool:
    """Whether ``folder`` holds a run the report can read (``config.yaml`` and ``log.jsonl``)."""
    return (folder / "config.yaml").is_file() and (folder / LOG_FILE).is_file()


def find_run_dirs(roots: list[Path]) -> list[Path]:
    """Every run folder at or below ``roots`` (sorted); a root that does not exist is an error."""
    found: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such folder (give run folders or folders that hold them)")
        if is_run_dir(root):
            found.add(root)
        found.update(p.parent for p in root.rglob("config.yaml") if is_run_dir(p.parent))
    return sorted(found)


def load_run(run_dir: Path, metric: str, target: float) -> Run:
    """Read one run folder (its config, its ``metric`` curve and the cached absolute metric)."""
    run_dir = Path(run_dir)
    with open(run_dir / "config.yaml", encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    res = summarize_run(cfg["env"]["map_name"], int(cfg["seed"]), run_dir, metric, target)
    if res.error:
        raise ValueError(f"{run_dir}: {res.error} (the run logged no test phase yet)")
    scalars = read_scalars(run_dir / LOG_FILE)
    absolute = None
    if (run_dir / ABSOLUTE_FILE).is_file():
        absolute = json.loads((run_dir / ABSOLUTE_FILE).read_text(encoding="utf-8"))
    return Run(
        env=_env_name(cfg),
        task=res.map_name,
        alg=str(cfg["alg"]),
        seed=res.seed,
        run_dir=run_dir,
        test_nepisode=int(cfg["log"]["test_nepisode"]),
        curve=res.curve,
        final=res.final,
        steps_to=res.steps_to,
        budget=res.curve[-1][0],
        extra={k: scalars.get(k, []) for k in (RETURN_KEY,)},
        absolute=absolute,
    )


def compute_absolute(run_dir: Path, n_envs: int = 8, seed: int = 54321) -> dict[str, Any] | None:
    """Evaluate ``models/best`` (else the newest checkpoint) over ``ABSOLUTE_FACTOR x test_nepisode``
    greedy episodes and cache the result in ``run_dir/absolute_metric.json``; ``None`` without checkpoint."""
    from marl.checkpoint import best, latest, load
    from marl.evaluate import evaluate_payload

    run_dir = Path(run_dir)
    chosen = best(run_dir) or latest(run_dir)
    if chosen is None:
        return None
    payload = load(chosen)
    episodes = ABSOLUTE_FACTOR * int(payload["meta"]["config"]["log"]["test_nepisode"])
    result, _ = evaluate_payload(payload, episodes, n_envs=n_envs, seed=seed)
    meta = payload["_checkpoint"]
    out = {
        "checkpoint": Path(chosen).name,
        "checkpoint_t_env": int(payload["meta"]["t_env"]),
        "checkpoint_metric": meta.get("metric"),
        "episodes": episodes,
        "eval_seed": seed,
        **result,
    }
    (run_dir / ABSOLUTE_FILE).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def load_runs(
    roots: list[Path],
    metric: str,
    target: float,
    absolute: bool = False,
    n_envs: int = 8,
    min_steps: int = 0,
) -> tuple[list[Run], list[str]]:
    """Every readable run below ``roots`` and a list of notes on the folders skipped. With ``absolute``,
    runs without a cached absolute metric are evaluated now (MindSpore, the env: minutes on SMAC).
    ``min_steps`` leaves out runs whose last test phase came before it (runs still going, or cut short)."""
    runs, skipped = [], []
    for d in find_run_dirs(roots):
        try:
            run = load_run(d, metric, target)
        except (ValueError, KeyError, OSError) as err:
            skipped.append(f"{d}: {err}")
            continue
        if run.budget < min_steps:
            skipped.append(f"{d}: left out, its last test phase is at {run.budget:,} steps (< {min_steps:,})")
            continue
        if absolute and run.absolute is None:
            run.absolute = compute_absolute(d, n_envs=n_envs)
            if run.absolute is None:
                skipped.append(f"{d}: no checkpoint, so no absolute metric")
        runs.append(run)
    return runs, skipped
