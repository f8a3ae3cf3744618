"""The command line shared by every training script: ``--map/--alg/--env/--seed/--resume/--results-dir``
flags plus positional ``key=value`` overrides, resolved through :func:`marl.config.load_config`.

``--help`` lists the SMAC maps, the algorithm and environment configs and every config key with its type
and default. Both functions are also importable from :mod:`marl.config`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from marl.config.keys import LEAVES, ConfigError, _type_name, parse_override, resolve_key
from marl.config.layers import CONFIG_DIR, _flatten_defaults, _Layers, _names, load_config
from marl.config.saved import config_to_dict, load_saved_config
from marl.config.schema import Config

__all__ = ["build_arg_parser", "config_from_args"]


def _help_epilog(config_dir: Path, default_alg: str) -> str:
    lines = []
    from marl.envs.smac.maps import list_maps

    lines.append("SMAC maps: " + ", ".join(list_maps()))
    from marl.envs.smac.smacv2.scenarios import list_scenarios

    lines.append("SMACv2 scenarios (embedded engine): " + ", ".join(list_scenarios()))
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
        if key in defaults:  # the keys the default algorithm's learner family reads
            lines.append(f"  {key:<{width}}  {_type_name(tp):<14} default {defaults[key]!r}")
    others = sorted(k for k in LEAVES if k not in defaults)
    if others:
        lines.append(
            f"keys {default_alg} does not read (valid with the algorithms whose learner reads them): "
            + ", ".join(others)
        )
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
    parser.add_argument("--alg", default=None, help=f"algorithm config (default {default_alg})")
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
    parser.set_defaults(config_dir=str(config_dir), default_alg=default_alg)
    return parser


# Each flag and the config key it sets. A flag and a ``key=value`` naming the same setting must agree.
FLAG_KEYS = {
    "--map": "env.map_name",
    "--alg": "alg",
    "--env": "env.name",
    "--seed": "seed",
    "--results-dir": "results_dir",
}


def _flag_values(args: argparse.Namespace) -> dict[str, str]:
    given = {
        "--map": args.map,
        "--alg": args.alg,
        "--env": args.env,
        "--seed": args.seed,
        "--results-dir": args.results_dir,
    }
    return {flag: str(v) for flag, v in given.items() if v is not None}


def _check_flag_conflicts(flags: dict[str, str], overrides: list[str]) -> None:
    """One rule: a flag and a ``key=value`` for the same setting must give the same value, else an error."""
    for raw in overrides:
        key, value = parse_override(raw)
        resolved = resolve_key(key, f"command line {raw}")
        for flag, flag_key in FLAG_KEYS.items():
            if resolved == flag_key and flag in flags and str(value) != flags[flag]:
                raise ConfigError(
                    f"{flag} {flags[flag]} conflicts with {raw}; give the setting once (either form)"
                )


def config_from_args(args: argparse.Namespace) -> Config:
    """Resolve the Config for parsed arguments; with ``--resume`` the run folder's config.yaml is the base.

    A flag and a ``key=value`` for the same setting must agree. With ``--resume``, the flags that pick
    the experiment (``--map --alg --env --seed --results-dir``) must match the resumed run (or be left
    out), and so must those keys; settings such as ``t_max`` or ``lr`` may change.
    """
    overrides = list(args.overrides)
    flags = _flag_values(args)
    _check_flag_conflicts(flags, overrides)
    config_dir = Path(getattr(args, "config_dir", CONFIG_DIR))
    if args.resume:
        saved = load_saved_config(args.resume)
        fixed = {
            "env.map_name": saved.env.map_name,
            "alg": saved.alg,
            "env.name": saved.env.name,
            "seed": saved.seed,
            "run_name": saved.run_name,
        }
        named = [(f"{flag} {v}", FLAG_KEYS[flag], v) for flag, v in flags.items()]
        named += [
            (raw, resolve_key(k, f"command line {raw}"), v)
            for raw in overrides
            for k, v in [parse_override(raw)]
        ]
        for what, key, value in named:
            if key == "results_dir":
                raise ConfigError(f"--resume {args.resume}: {what} cannot move a run (its folder is fixed)")
            if key in fixed and str(value) != str(fixed[key]):
                raise ConfigError(
                    f"--resume {args.resume}: {what} differs from the resumed run ({key}={fixed[key]}); "
                    f"a resumed run keeps its {key}: drop it, or start a new run"
                )
        return load_config(overrides=overrides, config_dir=config_dir, base=config_to_dict(saved))
    overrides += [f"{FLAG_KEYS[f]}={v}" for f, v in flags.items() if f in ("--seed", "--results-dir")]
    alg = args.alg or getattr(args, "default_alg", "qmix")
    return load_config(alg=alg, env=args.env, map_name=args.map, overrides=overrides, config_dir=config_dir)
