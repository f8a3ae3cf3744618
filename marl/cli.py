"""Command-line entry points shared by the ``scripts/`` wrappers (train and evaluate)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marl.checkpoint import CheckpointError, load, load_latest, warn_nonfinite
from marl.config.cli import build_arg_parser, config_from_args
from marl.run_folder import RunFolderError

# Bad input of any kind ends in one usage line (exit 2): config keys and values, names the registry does
# not know, map and Gymnasium ids, run folders, checkpoints that do not fit.
USAGE_ERRORS = (ValueError, KeyError, FileNotFoundError, RunFolderError, CheckpointError)


def _message(err: BaseException) -> str:
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def train_main(prog: str, default_alg: str, description: str, argv: Sequence[str] | None = None) -> Path:
    """Parse the shared training CLI (``--map --alg --seed --resume key=value``) and train.

    Exit codes: 0 done (t_max or the stop file), 2 bad input (nothing written), 130/143 stopped by
    SIGINT/SIGTERM after saving a checkpoint, 1 stopped by a non-finite update or, after the first update,
    by a replay buffer that would outgrow the memory (no checkpoint written at the stop).
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


def evaluate_main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Greedy evaluation of a checkpoint; prints and returns the win rate and mean return."""
    from marl.evaluate import evaluate_payload

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
    try:
        full, replay = evaluate_payload(
            payload, args.episodes, args.envs, args.seed, args.map_name, args.backend, args.save_replay
        )
    except ValueError as err:  # the environment does not fit the checkpoint
        p.error(str(err))
    keys = ("episodes", "win_rate", "return_mean", "ep_length_mean", "engine")  # engine: version, backend
    result = {k: full[k] for k in keys if k in full}
    cfg = payload["meta"]["config"]["env"]
    where = f"{args.map_name or cfg['map_name']} ({args.backend or cfg['backend']})"
    print(f"[evaluate] {payload['_checkpoint']['path']} on {where}: " + json.dumps(result))
    if replay:
        print(f"[evaluate] replay: {replay}")
    return result
