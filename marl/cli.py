"""Command-line entry points shared by the ``scripts/`` wrappers (train and evaluate)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from marl import registry
from marl.config import build_arg_parser, config_from_args, config_from_dict
from marl.envs.base import EnvInfo


def train_main(prog: str, default_alg: str, description: str, argv: Sequence[str] | None = None) -> Path:
    """Parse the shared training CLI (``--map --alg --seed --resume key=value``) and train."""
    from marl.trainer import Trainer

    parser = build_arg_parser(prog, default_alg, description)
    args = parser.parse_args(argv)
    try:  # bad input (keys, values, map names, settings a learner rejects) ends with one clear line
        cfg = config_from_args(args)  # with --resume: the run's saved config plus command-line overrides
        trainer = Trainer(cfg, resume=Path(args.resume) if args.resume else None)
    except (ValueError, FileNotFoundError) as err:  # ConfigError is a ValueError
        parser.error(str(err))
    return trainer.run()


def _check_compatible(trained: EnvInfo, now: EnvInfo) -> None:
    keys = ("n_agents", "n_actions", "obs_shape", "state_shape")
    bad = [
        f"{k}: trained {getattr(trained, k)}, now {getattr(now, k)}"
        for k in keys
        if getattr(trained, k) != getattr(now, k)
    ]
    if bad:
        raise SystemExit("the checkpoint does not fit this environment (" + "; ".join(bad) + ")")


def evaluate_main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Greedy evaluation of a checkpoint; prints and returns the win rate and mean return."""
    from marl.buffers import Scheme
    from marl.checkpoint import latest, load
    from marl.runners import RolloutStats
    from marl.trainer import flatten_arrays, make_env_fn
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
    if (path / "models").is_dir():
        found = latest(path)
        if found is None:
            p.error(f"no checkpoint under {path / 'models'}")
        path = found
    payload = load(path)
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
    _check_compatible(EnvInfo.from_dict(payload["meta"]["env_info"]), info)

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
