"""Layered configuration: YAML files and the command line into the frozen dataclasses of
:mod:`marl.config.schema`.

Layers, lowest first::

    configs/default.yaml < configs/envs/<env>.yaml < configs/algs/<alg>.yaml (top level, then its
        ``by_env.<env>`` part) < configs/maps/<map>.yaml (top level, then its ``by_alg.<alg>`` part)
        < command line

Every key is checked against the schema: an unknown key is an error that names the nearest valid key
and where the key came from; every value is coerced to its field's type or rejected with the field
name and the expected type. Command-line keys may be dotted (``learner.lr=5e-4``) or an unambiguous
leaf name (``lr=5e-4``, ``t_max=20000``); dict fields take nested keys (``env.args.reward_sparse=true``).

This module holds the layering and loading; writing a run's config and reading it back is
:mod:`marl.config.saved`. Key resolution and value coercion live in
:mod:`marl.config.keys` (the package re-exports the common names), the argument-parser helpers used by every
training script (:func:`build_arg_parser`, :func:`config_from_args`) in :mod:`marl.config.cli`, which
builds on this module.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from marl.config.keys import (
    DICT_FIELDS,
    LEAVES,
    SECTIONS,
    ConfigError,
    _suggest,
    check_ranges,
    coerce,
    parse_override,
    resolve_key,
)
from marl.config.schema import ALG_SECTIONS, LEARNER_CONFIGS, Config, learner_config_class

CONFIG_ENV = "MARL_CONFIG_DIR"  # another configs folder, for every run of the process


def default_config_dir() -> Path:
    """The configs folder: ``$MARL_CONFIG_DIR`` if set, else the package's ``marl/configs`` (in a checkout a
    link to the top-level ``configs/``; in a wheel a copy of it, so a non-editable install finds it)."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    return Path(__file__).resolve().parents[1] / "configs"


CONFIG_DIR = default_config_dir()
MAP_ALG_SECTION = "by_alg"  # in configs/maps/<map>.yaml: settings that apply to one algorithm only
ALG_ENV_SECTION = "by_env"  # in configs/algs/<alg>.yaml: settings that apply in one environment only
# in configs/algs/<alg>.yaml: ``map_presets: false`` leaves configs/maps/<map>.yaml out (a published
# configuration that ran the same settings on every map, e.g. the SMAC paper's presets)
ALG_MAP_PRESETS = "map_presets"


# ----------------------------------------------------------------------------------------- the layers
class _Layers:
    """A flat, validated ``dotted key -> value`` view that YAML layers and CLI overrides are merged into."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        for k, v in _flatten_defaults(dataclasses.asdict(Config())).items():
            self.values[k] = v
        for family in LEARNER_CONFIGS.values():  # every family's keys (one default per key)
            for section, cls in [("learner", family), *family.sections.items()]:
                for k, v in dataclasses.asdict(cls()).items():
                    self.values.setdefault(f"{section}.{k}", v)
        self.sources: dict[str, str] = {k: "schema default" for k in self.values}
        # sources whose keys the run's learner family does not read are dropped, not errors: a map preset's
        # top level (it serves every algorithm) and saved configs (run folders written before the families
        # existed hold every learner field, a mixer and an exploration section)
        self.lenient: set[str] = {"schema default"}

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
        """The frozen, typed Config; its learner section is the family of ``learner.name``."""
        return _build(self.values, self.sources, self.lenient)


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


def _family_section(
    section: str, cls: type | None, flat: Mapping[str, Any], sources: Mapping[str, str], lenient: set[str]
) -> dict[str, Any]:
    """The keys of ``section`` that dataclass ``cls`` holds (``None``: the learner reads no such section);
    another key set by a strict source is an error naming the keys the learner reads."""
    name = flat["learner.name"]
    allowed = {f.name for f in dataclasses.fields(cls)} if cls is not None else set()
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if not key.startswith(section + "."):
            continue
        sub = key.split(".", 1)[1]
        if sub in allowed:
            out[sub] = value
        elif sources[key] not in lenient:
            if cls is None:
                raise ConfigError(
                    f"{sources[key]}: {key} is not read by learner {name!r}: it reads no {section} section"
                )
            raise ConfigError(
                f"{sources[key]}: {key} is not read by learner {name!r}; its keys are "
                f"{', '.join(section + '.' + k for k in sorted(allowed))}"
            )
    return out


def _build(flat: Mapping[str, Any], sources: Mapping[str, str], lenient: set[str]) -> Config:
    hints = typing.get_type_hints(Config)
    family = learner_config_class(flat["learner.name"])
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(Config):
        if f.name == "learner":
            kwargs[f.name] = family(**_family_section("learner", family, flat, sources, lenient))
        elif f.name in ALG_SECTIONS:  # the family's class for this section, or None if it reads none
            cls = family.sections.get(f.name)
            sub = _family_section(f.name, cls, flat, sources, lenient)
            kwargs[f.name] = cls(**sub) if cls is not None else None
        elif f.name in SECTIONS:
            sub = {k.split(".", 1)[1]: v for k, v in flat.items() if k.startswith(f.name + ".")}
            kwargs[f.name] = hints[f.name](**sub)
        else:
            kwargs[f.name] = flat[f.name]
    cfg = Config(**kwargs)
    check_ranges(cfg)
    return cfg


# -------------------------------------------------------------------------------------------- loading
def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except yaml.YAMLError as exc:  # one line: where and what, not a traceback
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise ConfigError(f"{path}:{where} is not valid YAML ({problem})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
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
    picks the optional preset ``configs/maps/<map>.yaml`` (unless the alg file says ``map_presets: false``);
    ``overrides`` are ``key=value`` strings.
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
        layers.lenient.add("saved config")
        layers.apply_mapping(base, "saved config")
    else:
        alg = cli_alg or alg
        default_path = config_dir / "default.yaml"
        default = _read_yaml(default_path) if default_path.is_file() else {}
        alg_path = _layer_file(config_dir, "algs", alg, required=True)
        assert alg_path is not None
        alg_data = _read_yaml(alg_path)
        per_env = _pop_section(alg_data, ALG_ENV_SECTION, alg_path)
        map_presets = alg_data.pop(ALG_MAP_PRESETS, True)
        if not isinstance(map_presets, bool):
            raise ConfigError(f"{alg_path}: {ALG_MAP_PRESETS} must be true or false, not {map_presets!r}")
        env_name = env or cli_env or _nested(alg_data, "env", "name") or _nested(default, "env", "name")
        env_name = env_name or layers.values["env.name"]
        env_path = _layer_file(config_dir, "envs", str(env_name), required=True)
        assert env_path is not None
        layers.apply_mapping(default, str(default_path))
        layers.apply_mapping(_read_yaml(env_path), str(env_path))
        layers.apply_mapping(alg_data, str(alg_path))
        if env_name in per_env:
            layers.apply_mapping(per_env[env_name], f"{alg_path} ({ALG_ENV_SECTION}.{env_name})")
        layers.set("alg", alg, str(alg_path))
        layers.set("env.name", env_name, "env selection")
        chosen_map = map_name or cli_map or layers.values["env.map_name"]
        map_path = _layer_file(config_dir, "maps", str(chosen_map), required=False) if map_presets else None
        if map_path is not None:
            preset = _read_yaml(map_path)
            per_alg = _pop_section(preset, MAP_ALG_SECTION, map_path)
            layers.lenient.add(str(map_path))
            layers.apply_mapping(preset, str(map_path))
            if alg in per_alg:
                layers.apply_mapping(per_alg[alg], f"{map_path} ({MAP_ALG_SECTION}.{alg})")
        layers.set("env.map_name", chosen_map, "map selection")
    for key, value, source in cli:
        layers.set(key, value, source, from_cli=True)
    if base is None and map_name is not None:
        layers.set("env.map_name", map_name, "--map")
    return layers.build()


def _pop_section(data: dict[str, Any], section: str, path: Path) -> Mapping[str, Any]:
    """Remove and return a layer file's ``by_alg`` / ``by_env`` part (name -> settings; empty if absent)."""
    part = data.pop(section, None) or {}
    what = "algorithm" if section == MAP_ALG_SECTION else "environment"
    if not isinstance(part, Mapping) or not all(isinstance(v, Mapping) for v in part.values()):
        raise ConfigError(f"{path}: {section} must map {what} names to settings")
    return part


def _nested(d: Mapping[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(d, Mapping) or p not in d:
            return None
        d = d[p]
    return d
