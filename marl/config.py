"""Layered configuration: YAML files and the command line into the frozen dataclasses of
:mod:`marl.config_schema`.

Layers, lowest first::

    configs/default.yaml < configs/envs/<env>.yaml < configs/algs/<alg>.yaml
        < configs/maps/<map>.yaml (top level, then its ``by_alg.<alg>`` part) < command line

Every key is checked against the schema: an unknown key is an error that names the nearest valid key
and where the key came from; every value is coerced to its field's type or rejected with the field
name and the expected type. Command-line keys may be dotted (``learner.lr=5e-4``) or an unambiguous
leaf name (``lr=5e-4``, ``t_max=20000``); dict fields take nested keys (``env.args.reward_sparse=true``).
The argument-parser helpers used by every training script (:func:`build_arg_parser`,
:func:`config_from_args`) are at the end of this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from marl.config_schema import Config

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
MAP_ALG_SECTION = "by_alg"  # in configs/maps/<map>.yaml: settings that apply to one algorithm only


class ConfigError(ValueError):
    """A configuration key or value is invalid (the message says what is allowed)."""


# --------------------------------------------------------------------------------------------- schema
def _fields_of(cls: type, prefix: str = "") -> dict[str, Any]:
    """Map every dotted leaf key of dataclass ``cls`` to its type; sections are walked recursively."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        key = prefix + f.name
        if dataclasses.is_dataclass(tp):
            out.update(_fields_of(tp, key + "."))
        else:
            out[key] = tp
    return out


LEAVES: dict[str, Any] = _fields_of(Config)  # "learner.lr" -> float, "env.args" -> dict[str, Any]
SECTIONS: frozenset[str] = frozenset(
    f.name
    for f in dataclasses.fields(Config)
    if dataclasses.is_dataclass(typing.get_type_hints(Config)[f.name])
)
DICT_FIELDS: frozenset[str] = frozenset(k for k, t in LEAVES.items() if typing.get_origin(t) is dict)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _suggest(key: str) -> str:
    """' (did you mean 'x'?)' for the nearest valid key, or a short hint when nothing is close."""
    pool = list(LEAVES) + [k.rsplit(".", 1)[-1] for k in LEAVES] + list(SECTIONS)
    close = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
    if not close and "." in key:
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], pool, n=1, cutoff=0.6)
    if close:
        best = close[0]
        if best not in LEAVES and best not in SECTIONS:
            best = next(k for k in LEAVES if k.rsplit(".", 1)[-1] == best)
        return f" (did you mean {best!r}?)"
    return " (run a training script with --help for the list of valid keys)"


def resolve_key(key: str, source: str) -> str:
    """Turn a dotted key or an unambiguous leaf shortcut into a full dotted key (or a dict-field path)."""
    if key in LEAVES:
        return key
    for d in DICT_FIELDS:
        if key.startswith(d + ".") and len(key) > len(d) + 1:
            return key
    if "." not in key:
        matches = [k for k in LEAVES if k.rsplit(".", 1)[-1] == key]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise ConfigError(f"{source}: key {key!r} is ambiguous; write one of {', '.join(matches)}")
    raise ConfigError(f"{source}: unknown config key {key!r}{_suggest(key)}")


# ------------------------------------------------------------------------------------------- coercion
_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n"}


def coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    """Coerce ``value`` (from YAML or a command-line string) to field type ``tp`` or raise ConfigError."""

    def bad(extra: str = "") -> ConfigError:
        return ConfigError(
            f"{source}: {key} must be of type {_type_name(tp)}, got {value!r} ({type(value).__name__}){extra}"
        )

    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise bad("; use true/false, yes/no or 1/0")
    if tp is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            return value
        num: float | None = None
        if isinstance(value, float):
            num = value
        elif isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                try:
                    num = float(value.strip())
                except ValueError as exc:
                    raise bad() from exc
        if num is not None and num.is_integer():
            return int(num)
        raise bad("; an integer is required (2e4 is accepted, 2.5 is not)")
    if tp is float:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError as exc:
                raise bad() from exc
        raise bad()
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # e.g. a map name written without quotes
        raise bad()
    if typing.get_origin(tp) is dict:
        if isinstance(value, str):
            value = yaml.safe_load(value) if value.strip() else {}
        if isinstance(value, Mapping):
            return {str(k): v for k, v in value.items()}
        raise bad("; write a mapping such as {a: 1} or use nested keys (env.args.a=1)")
    raise ConfigError(f"{source}: field {key} has an unsupported schema type {tp!r}")


# ----------------------------------------------------------------------------------------- the layers
class _Layers:
    """A flat, validated ``dotted key -> value`` view that YAML layers and CLI overrides are merged into."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        for k, v in _flatten_defaults(dataclasses.asdict(Config())).items():
            self.values[k] = v
        self.sources: dict[str, str] = {k: "schema default" for k in self.values}

    def set(self, key: str, raw: Any, source: str, *, from_cli: bool = False) -> None:
        """Set one (already resolved) key; nested dict-field keys update that dict."""
        for d in DICT_FIELDS:
            if key.startswith(d + "."):
                sub = key[len(d) + 1 :]
                val = yaml.safe_load(raw) if from_cli and isinstance(raw, str) else raw
                merged = dict(self.values[d])
                _deep_set(merged, sub.split("."), val)
                self.values[d] = merged
                self.sources[d] = source
                return
        value = coerce(raw, LEAVES[key], key, source)
        if key in DICT_FIELDS:
            value = _deep_merge(self.values[key], value)
        self.values[key] = value
        self.sources[key] = source

    def apply_mapping(self, data: Mapping[str, Any], source: str, prefix: str = "") -> None:
        """Merge a nested mapping (a YAML file's content); keys must be full names, not shortcuts."""
        for k, v in data.items():
            key = prefix + str(k)
            if key in SECTIONS:
                if not isinstance(v, Mapping):
                    raise ConfigError(f"{source}: {key} is a section and needs a mapping, got {v!r}")
                self.apply_mapping(v, source, key + ".")
            elif key in LEAVES:
                self.set(key, v, source)
            else:
                raise ConfigError(f"{source}: unknown config key {key!r}{_suggest(key)}")

    def build(self) -> Config:
        """The frozen, typed Config."""
        return _build(self.values)


def _flatten_defaults(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = prefix + k
        if key in SECTIONS:
            out.update(_flatten_defaults(v, key + "."))
        else:
            out[key] = v
    return out


def _deep_set(d: dict[str, Any], path: list[str], value: Any) -> None:
    for p in path[:-1]:
        nxt = d.get(p)
        d[p] = dict(nxt) if isinstance(nxt, Mapping) else {}
        d = d[p]
    d[path[-1]] = value


def _deep_merge(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in new.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _build(flat: Mapping[str, Any]) -> Config:
    hints = typing.get_type_hints(Config)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(Config):
        if f.name in SECTIONS:
            sub = {k.split(".", 1)[1]: v for k, v in flat.items() if k.startswith(f.name + ".")}
            kwargs[f.name] = hints[f.name](**sub)
        else:
            kwargs[f.name] = flat[f.name]
    cfg = Config(**kwargs)
    _check_ranges(cfg)
    return cfg


def _check_ranges(cfg: Config) -> None:
    """Reject values whose type is right but whose range is not (the message names the allowed range)."""
    checks = [
        ("t_max", cfg.t_max >= 1, ">= 1"),
        ("learner.batch_size", cfg.learner.batch_size >= 1, ">= 1"),
        ("learner.buffer_size", cfg.learner.buffer_size >= cfg.learner.batch_size, ">= learner.batch_size"),
        ("learner.lr", cfg.learner.lr > 0, "> 0"),
        ("learner.gamma", 0.0 <= cfg.learner.gamma <= 1.0, "in [0, 1]"),
        ("learner.td_lambda", 0.0 <= cfg.learner.td_lambda <= 1.0, "in [0, 1]"),
        ("runner.batch_size_run", cfg.runner.batch_size_run >= 1, ">= 1"),
        ("exploration.epsilon_start", 0.0 <= cfg.exploration.epsilon_start <= 1.0, "in [0, 1]"),
        ("exploration.epsilon_finish", 0.0 <= cfg.exploration.epsilon_finish <= 1.0, "in [0, 1]"),
        ("exploration.epsilon_anneal_time", cfg.exploration.epsilon_anneal_time >= 0, ">= 0"),
        ("checkpoint.keep_last", cfg.checkpoint.keep_last >= 1, ">= 1"),
        ("log.test_nepisode", cfg.log.test_nepisode >= 0, ">= 0"),
        ("ms_threads", cfg.ms_threads >= 1, ">= 1"),
    ]
    for key, ok, allowed in checks:
        if not ok:
            raise ConfigError(f"{key} must be {allowed}, got {_get(cfg, key)!r}")


def _get(cfg: Config, key: str) -> Any:
    obj: Any = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


# -------------------------------------------------------------------------------------------- loading
def parse_override(text: str) -> tuple[str, str]:
    """Split a command-line override ``"a.b=value"`` into ``("a.b", "value")`` (the value stays a string)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} must look like key=value (for example learner.lr=5e-4)")
    return key, value.strip()


def _read_yaml(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: a config file must hold a mapping, got {type(data).__name__}")
    return dict(data)


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _layer_file(config_dir: Path, kind: str, name: str, required: bool) -> Path | None:
    path = config_dir / kind / f"{name}.yaml"
    if path.is_file():
        return path
    if required:
        known = _names(config_dir / kind)
        near = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"unknown {kind[:-1]} {name!r}{hint}; available: {', '.join(known) or 'none'}")
    return None


def _is_gym_id(name: str) -> bool:
    """Whether ``name`` is a registered Gymnasium environment id."""
    try:
        import gymnasium
    except ImportError:
        return False
    return name in gymnasium.registry


def load_config(
    alg: str = "qmix",
    env: str | None = None,
    map_name: str | None = None,
    overrides: Sequence[str] = (),
    config_dir: Path = CONFIG_DIR,
    base: Mapping[str, Any] | None = None,
) -> Config:
    """Resolve the layered configuration into a frozen :class:`Config`.

    ``alg`` picks ``configs/algs/<alg>.yaml``; ``env`` picks ``configs/envs/<env>.yaml`` (default: the
    ``env.name`` that the command line, the alg file or default.yaml give, in that order); ``map_name``
    picks the optional preset ``configs/maps/<map>.yaml``; ``overrides`` are ``key=value`` strings.
    ``base`` (a saved run's config dict, for ``--resume``) replaces the YAML layers entirely.
    A Gymnasium id given as ``env`` (``--env CartPole-v1``) means ``env="gym", map_name=<id>``.
    """
    config_dir = Path(config_dir)
    if env and map_name is None and not (config_dir / "envs" / f"{env}.yaml").is_file() and _is_gym_id(env):
        env, map_name = "gym", env
    cli = [
        (resolve_key(k, f"command line {k}={v}"), v, f"command line {k}={v}")
        for k, v in map(parse_override, overrides)
    ]
    cli_alg = next((v for k, v, _ in reversed(cli) if k == "alg"), None)
    cli_env = next((v for k, v, _ in reversed(cli) if k == "env.name"), None)
    cli_map = next((v for k, v, _ in reversed(cli) if k == "env.map_name"), None)
    layers = _Layers()
    if base is not None:
        layers.apply_mapping(base, "saved config")
    else:
        alg = cli_alg or alg
        default_path = config_dir / "default.yaml"
        default = _read_yaml(default_path) if default_path.is_file() else {}
        alg_path = _layer_file(config_dir, "algs", alg, required=True)
        assert alg_path is not None
        alg_data = _read_yaml(alg_path)
        env_name = env or cli_env or _nested(alg_data, "env", "name") or _nested(default, "env", "name")
        env_name = env_name or layers.values["env.name"]
        env_path = _layer_file(config_dir, "envs", str(env_name), required=True)
        assert env_path is not None
        layers.apply_mapping(default, str(default_path))
        layers.apply_mapping(_read_yaml(env_path), str(env_path))
        layers.apply_mapping(alg_data, str(alg_path))
        layers.set("alg", alg, str(alg_path))
        layers.set("env.name", env_name, "env selection")
        chosen_map = map_name or cli_map or layers.values["env.map_name"]
        map_path = _layer_file(config_dir, "maps", str(chosen_map), required=False)
        if map_path is not None:
            preset = _read_yaml(map_path)
            per_alg = preset.pop(MAP_ALG_SECTION, None) or {}
            if not isinstance(per_alg, Mapping):
                raise ConfigError(f"{map_path}: {MAP_ALG_SECTION} must map algorithm names to settings")
            layers.apply_mapping(preset, str(map_path))
            if alg in per_alg:
                layers.apply_mapping(per_alg[alg], f"{map_path} ({MAP_ALG_SECTION}.{alg})")
        layers.set("env.map_name", chosen_map, "map selection")
    for key, value, source in cli:
        layers.set(key, value, source, from_cli=True)
    if base is None and map_name is not None:
        layers.set("env.map_name", map_name, "--map")
    return layers.build()


def _nested(d: Mapping[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(d, Mapping) or p not in d:
            return None
        d = d[p]
    return d


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """Nested plain-Python dict of ``cfg`` (what :func:`dump_config` writes)."""
    return dataclasses.asdict(cfg)


def config_from_dict(data: Mapping[str, Any], source: str = "config dict") -> Config:
    """Rebuild a Config from a nested dict (missing keys take schema defaults; unknown keys are errors)."""
    layers = _Layers()
    layers.apply_mapping(data, source)
    return layers.build()


def dump_config(cfg: Config, path: str | Path | None = None) -> str:
    """The resolved config as YAML text; with ``path`` also write it there (a folder gets ``config.yaml``)."""
    text = yaml.safe_dump(config_to_dict(cfg), sort_keys=False, default_flow_style=False)
    if path is not None:
        path = config_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)  # never leave a half-written config.yaml behind
    return text


def config_path(path: str | Path) -> Path:
    """Where :func:`dump_config` writes for ``path``: the path itself, or ``config.yaml`` in a folder."""
    path = Path(path)
    return path / "config.yaml" if path.is_dir() or path.suffix == "" else path


def load_saved_config(path: str | Path) -> Config:
    """Read a config written by :func:`dump_config` (a file or a run folder holding ``config.yaml``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"no saved config at {path}; a run folder holds config.yaml")
    return config_from_dict(_read_yaml(path), str(path))


# ------------------------------------------------------------------------------------ command line
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
