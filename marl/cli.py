"""Command-line entry points shared by the ``scripts/`` wrappers (train and evaluate)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from marl import registry
from marl.checkpoint import CheckpointError, load, load_latest, warn_nonfinite
from marl.config import config_from_dict
from marl.config.cli import build_arg_parser, config_from_args
from marl.envs.base import EnvInfo
from marl.run_folder import RunFolderError

# Bad input of any kind ends in one usage line (exit 2): config keys and values, names the registry does
# not know, map and Gymnasium ids, run folders, checkpoints that do not fit.
USAGE_ERRORS = (ValueError, KeyError, FileNotFoundError, RunFolderError, CheckpointError)


def _message(err: BaseException) -> str:
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def train_main(prog: str, default_alg: str, description: str, argv: Sequence[str] | None = None) -> Path:
    """Parse the shared training CLI (``--map --alg --seed --resume key=value``) and train.

    Exit codes: 0 done (t_max or the stop file), 2 bad input (nothing written), 130/143 stopped by
    SIGINT/SIGTERM after saving a checkpoint, 1 stopped by a non-finite update (nothing saved).
    """
    from marl.trainer import RunStopped, Trainer

    parser = build_arg_parser(prog, default_alg, description)
    args = parser.parse_intermixed_args(argv)  # key=value may come before and after the flags
    try:  # everything is validated before the run folder is written
        cfg = config_from_args(args)  # with --resume: the run's saved config plus command-line overrides
        trainer = Trainer(cfg, resume=Path(args.resume) if args.resume else None)
    except USAGE_ERRORS as err:  # ConfigError is a ValueError
        parser.error(_message(err))
    try:
        return trainer.run()
    except RunStopped as stop:
        print(f"[run] {stop}", file=sys.stderr)
        raise SystemExit(stop.exit_code) from None


def evaluate_main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Greedy evaluation of a checkpoint; prints and returns the win rate and mean return."""
    from marl.buffers import Scheme
    from marl.runners import RolloutStats
    from marl.trainer import flatten_arrays, make_env_fn
    from marl.trainer_state import check_same_env
    from marl.utils import ms as msu

    p = argparse.ArgumentParser(
        prog="evaluate.py",
        description="Evaluate a checkpoint greedily (no exploration) and print the win rate.",
    )
    p.add_argument(
        "--checkpoint", required=True, help="a checkpoint folder (models/<t>) or a run folder (latest)"
    )
    p.add_argument("--map", dest="map_name", default=None, help="map/scenario (default: the one trained on)")
    p.add_argument("--backend", default=None, help="SMAC engine: sim | sc2 | auto (default: as trained)")
    p.add_argument("--episodes", type=int, default=32, help="number of test episodes (default 32)")
    p.add_argument("--envs", type=int, default=8, help="envs stepped together (default 8)")
    p.add_argument("--seed", type=int, default=12345, help="env seed")
    p.add_argument("--save-replay", action="store_true", help="save a replay of the last episode of env 0")
    args = p.parse_args(argv)
    if args.episodes < 1 or args.envs < 1:
        p.error("--episodes and --envs must be >= 1")

    path = Path(args.checkpoint)
    try:  # a run folder: its newest intact checkpoint; a checkpoint folder: exactly that one
        payload = load_latest(path) if (path / "models").is_dir() else load(path)
    except CheckpointError as err:
        p.error(str(err))
    warn_nonfinite(payload)
    path = Path(payload["_checkpoint"]["path"])
    cfg = config_from_dict(payload["meta"]["config"])
    env_changes = {}
    if args.map_name:
        env_changes["map_name"] = args.map_name
    if args.backend:
        env_changes["backend"] = args.backend
    cfg = replace(cfg, seed=args.seed, env=replace(cfg.env, **env_changes))
    msu.setup(threads=cfg.ms_threads)
    env_fn = make_env_fn(cfg)
    probe = env_fn(0)
    info = probe.env_info()
    probe.close()
    try:
        check_same_env(EnvInfo.from_dict(payload["meta"]["env_info"]), info, f"evaluate {path}")
    except ValueError as err:
        p.error(str(err))

    learner = registry.build("learner", cfg.learner.name, info=info, cfg=cfg)
    learner.load_state_dict(flatten_arrays(payload["arrays"]))
    controller = learner.make_controller(seed=args.seed)
    controller.load_weights(learner.actor_weights())
    n_envs = min(args.envs, args.episodes)
    runner = registry.build(
        "runner",
        "parallel",
        env_fn=env_fn,
        scheme=Scheme(info),
        controller=controller,
        batch_size_run=n_envs,
        batched=not args.save_replay,  # replays come from per-env StarCraft2Envs
    )
    stats = RolloutStats()
    try:
        for _ in range(math.ceil(args.episodes / n_envs)):
            _, s = runner.run(t_env=0, test_mode=True)
            stats.extend(s)
        replay = runner.call(0, "save_replay") if args.save_replay else None
    finally:
        runner.close()
    n = args.episodes
    result = {
        "episodes": n,
        "win_rate": float(sum(stats.won[:n]) / n),
        "return_mean": float(sum(stats.returns[:n]) / n),
        "ep_length_mean": float(sum(stats.lengths[:n]) / n),
    }
    print(f"[evaluate] {path} on {cfg.env.map_name} ({cfg.env.backend}): " + json.dumps(result))
    if replay:
        print(f"[evaluate] replay: {replay}")
    return result
