"""The config schema's keys: dotted-key tables, key resolution with nearest-key suggestions, value
coercion to a field's type, override parsing and range checks.

Everything here reads the dataclasses of :mod:`marl.config.schema` only; the layering that uses it is
:mod:`marl.config` (which re-exports the public names of this module).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from collections.abc import Mapping
from typing import Any

import yaml

from marl.config.schema import ALG_SECTIONS, LEARNER_CONFIGS, Config
from marl.untrusted import check_name

__all__ = [
    "DICT_FIELDS",
    "LEARNER_KEYS",
    "LEAVES",
    "SECTIONS",
    "ConfigError",
    "check_ranges",
    "coerce",
    "parse_override",
    "resolve_key",
]


class ConfigError(ValueError):
    """A configuration key or value is invalid (the message says what is allowed)."""


# --------------------------------------------------------------------------------------------- schema
def section_type(tp: Any) -> Any:
    """The dataclass of a section field typed ``X`` or ``X | None`` (an algorithm-dependent section), else
    ``tp`` unchanged."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) else tp


def _fields_of(cls: type, prefix: str = "") -> dict[str, Any]:
    """Map every dotted leaf key of dataclass ``cls`` to its type; sections are walked recursively."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = section_type(hints[f.name])
        key = prefix + f.name
        if dataclasses.is_dataclass(tp):
            out.update(_fields_of(tp, key + "."))
        else:
            out[key] = tp
    return out


# "learner.lr" -> float, "env.args" -> dict[str, Any]. The learner section holds every family's keys, and
# the algorithm-dependent sections every class a family declares for them (e.g. exploration.noise_start):
# a run keeps only those its learner family reads (marl.config.layers)
LEAVES: dict[str, Any] = _fields_of(Config)
for _family in LEARNER_CONFIGS.values():
    _parts = [("learner", _family), *_family.sections.items()]
    for _section, _cls in _parts:
        if _section not in ("learner", *ALG_SECTIONS):
            raise TypeError(
                f"{_family.__name__}.sections names {_section!r}; allowed: {', '.join(ALG_SECTIONS)}"
            )
        for _key, _tp in _fields_of(_cls, _section + ".").items():
            if LEAVES.setdefault(_key, _tp) != _tp:
                raise TypeError(f"{_key} has two types in the config families")
LEARNER_KEYS: frozenset[str] = frozenset(k for k in LEAVES if k.startswith("learner."))
SECTIONS: frozenset[str] = frozenset(
    f.name
    for f in dataclasses.fields(Config)
    if dataclasses.is_dataclass(section_type(typing.get_type_hints(Config)[f.name]))
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


def parse_override(text: str) -> tuple[str, str]:
    """Split a command-line override ``"a.b=value"`` into ``("a.b", "value")`` (the value stays a string)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} must look like key=value (for example learner.lr=5e-4)")
    return key, value.strip()


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


# --------------------------------------------------------------------------------------------- ranges
def check_ranges(cfg: Config) -> None:
    """Reject values whose type is right but whose range is not (the message names the allowed range)."""
    lc, ex = cfg.learner, cfg.exploration  # exploration: None when the algorithm reads none

    def has(field: str) -> bool:
        return hasattr(lc, field)

    checks = [
        ("t_max", cfg.t_max >= 1, ">= 1"),
        ("learner.batch_size", cfg.learner.batch_size >= 1, ">= 1"),
        ("learner.buffer_size", cfg.learner.buffer_size >= cfg.learner.batch_size, ">= learner.batch_size"),
        ("learner.buffer_max_gib", 0 <= cfg.learner.buffer_max_gib < math.inf, ">= 0 and finite (0: no cap)"),
        ("learner.lr", 0 < cfg.learner.lr < math.inf, "> 0 and finite"),
        ("learner.critic_lr", not has("critic_lr") or 0 < lc.critic_lr < math.inf, "> 0 and finite"),
        ("learner.grad_norm_clip", math.isfinite(cfg.learner.grad_norm_clip), "finite (<= 0: no clipping)"),
        ("learner.on_nonfinite", cfg.learner.on_nonfinite in ("stop", "skip"), "'stop' or 'skip'"),
        ("learner.gamma", 0.0 <= cfg.learner.gamma <= 1.0, "in [0, 1]"),
        ("learner.td_lambda", not has("td_lambda") or 0.0 <= lc.td_lambda <= 1.0, "in [0, 1]"),
        (
            "learner.time_bucket",
            not has("time_bucket") or lc.time_bucket >= 0,
            ">= 0 (0 = train on every slot)",
        ),
        (
            "learner.update_rows",
            not has("update_rows") or lc.update_rows >= 0,
            ">= 0 (0 = the whole batch in one graph)",
        ),
        ("runner.batch_size_run", cfg.runner.batch_size_run >= 1, ">= 1"),
        ("exploration.epsilon_start", not ex or 0.0 <= ex.epsilon_start <= 1.0, "in [0, 1]"),
        ("exploration.epsilon_finish", not ex or 0.0 <= ex.epsilon_finish <= 1.0, "in [0, 1]"),
        ("exploration.epsilon_anneal_time", not ex or ex.epsilon_anneal_time >= 0, ">= 0"),
        ("checkpoint.keep_last", cfg.checkpoint.keep_last >= 1, ">= 1"),
        ("log.test_nepisode", cfg.log.test_nepisode >= 0, ">= 0 (0 = no greedy test phases)"),
        ("log.log_interval", cfg.log.log_interval >= 1, ">= 1 env step"),
        ("log.test_interval", cfg.log.test_interval >= 1, ">= 1 env step"),
        ("log.histogram_interval", cfg.log.histogram_interval >= 1, ">= 1 env step"),
        ("log.plot_interval_s", cfg.log.plot_interval_s >= 0, ">= 0 seconds (0 = at every test)"),
        ("checkpoint.save_interval", cfg.checkpoint.save_interval >= 0, ">= 0 (0 = only at the end)"),
        (
            "learner.target_update_interval",
            not has("target_update_interval") or lc.target_update_interval >= 1,
            ">= 1 episode",
        ),
        ("ms_threads", cfg.ms_threads >= 0, ">= 0 (0 = every core this process may use)"),
        ("ms_device", cfg.ms_device in ("cpu", "gpu", "ascend"), "one of cpu, gpu, ascend"),
    ]
    for key, ok, allowed in checks:
        if not ok:
            raise ConfigError(f"{key} must be {allowed}, got {_get(cfg, key)!r}")
    if cfg.run_name:  # a name that becomes a folder: one path component, checked before anything is written
        try:
            check_name(cfg.run_name, "run_name")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def _get(cfg: Config, key: str) -> Any:
    obj: Any = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj
