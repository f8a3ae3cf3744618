"""The command line shared by every training script: ``--map/--alg/--env/--seed/--resume/--results-dir``
flags plus positional ``key=value`` overrides, resolved through :func:`marl.config.load_config`.

``--help`` lists the SMAC maps, the algorithm and environment configs and every config key with its type
and default. Both functions are also importable from :mod:`marl.config`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from marl.config import (
    CONFIG_DIR,
    _flatten_defaults,
    _Layers,
    _names,
    config_to_dict,
    load_config,
    load_saved_config,
)
from marl.config_keys import LEAVES, ConfigError, _type_name
from marl.config_schema import Config

__all__ = ["build_arg_parser", "config_from_args"]


def _help_epilog(config_dir: Path, default_alg: str) -> str:
    lines = []
    try:  # the SMAC package may be absent or still being written: the help must work regardless
        from marl.envs.smac import list_maps  # type: ignore[attr-defined]

        lines.append("SMAC maps: " + ", ".join(list_maps()))
    except Exception:  # any failure only means the map list is not shown
        lines.append("SMAC maps: (marl.envs.smac.list_maps unavailable)")
    lines.append("algorithms: " + ", ".join(_names(config_dir / "algs")))
    lines.append("environments: " + ", ".join(_names(config_dir / "envs")))
    lines.append("")
    lines.append(
        f"config keys with their {default_alg} defaults (key=value overrides; leaf names such as lr=5e-4 "
        "work when unambiguous; --map may add a preset from configs/maps/):"
    )
    try:
        defaults = _flatten_defaults(config_to_dict(load_config(default_alg, config_dir=config_dir)))
    except ConfigError:
        defaults = _Layers().values
    width = max(len(k) for k in LEAVES)
    for key, tp in LEAVES.items():
        lines.append(f"  {key:<{width}}  {_type_name(tp):<14} default {defaults[key]!r}")
    return "\n".join(lines)


def build_arg_parser(
    prog: str, default_alg: str, description: str = "", config_dir: Path = CONFIG_DIR
) -> argparse.ArgumentParser:
    """The command line shared by the training scripts: flags plus positional ``key=value`` overrides."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=_help_epilog(Path(config_dir), default_alg),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--map", dest="map", default=None, help="SMAC map / MPE scenario / Gymnasium id")
    parser.add_argument("--alg", default=default_alg, help=f"algorithm config (default {default_alg})")
    parser.add_argument("--env", default=None, help="environment config (default: from the alg config)")
    parser.add_argument("--seed", type=int, default=None, help="random seed")
    parser.add_argument(
        "--resume",
        metavar="RUN_DIR",
        default=None,
        help="continue the run in RUN_DIR from its latest checkpoint and saved config",
    )
    parser.add_argument("--results-dir", dest="results_dir", default=None, help="where run folders go")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    parser.set_defaults(config_dir=str(config_dir))
    return parser


def config_from_args(args: argparse.Namespace) -> Config:
    """Resolve the Config for parsed arguments; with ``--resume`` the run folder's config.yaml is the base."""
    overrides = list(args.overrides)
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    if args.results_dir is not None:
        overrides.append(f"results_dir={args.results_dir}")
    config_dir = Path(getattr(args, "config_dir", CONFIG_DIR))
    if args.resume:
        saved = load_saved_config(args.resume)
        for flag, value, have in (
            ("--map", args.map, saved.env.map_name),
            ("--env", args.env, saved.env.name),
        ):
            if value is not None and value != have:
                raise ConfigError(f"{flag} {value} conflicts with the resumed run ({have}); drop {flag}")
        return load_config(overrides=overrides, config_dir=config_dir, base=config_to_dict(saved))
    return load_config(
        alg=args.alg, env=args.env, map_name=args.map, overrides=overrides, config_dir=config_dir
    )
