"""A run's configuration on disk: the resolved :class:`~marl.config.schema.Config` as YAML (``config.yaml`` in
the run folder) and back. Only the sections the run's algorithm reads are written; reading back is lenient
about keys the algorithm does not read, so run folders written by older versions (every learner field, a
mixer and an exploration section in every run) still load and resume.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from marl.config.keys import ConfigError
from marl.config.layers import _Layers, _read_yaml
from marl.config.schema import ALG_SECTIONS, Config

__all__ = ["config_from_dict", "config_path", "config_to_dict", "dump_config", "load_saved_config"]


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """Nested plain-Python dict of ``cfg`` (what :func:`dump_config` writes); a section the algorithm does not
    read (``None``) is left out."""
    d = dataclasses.asdict(cfg)
    return {k: v for k, v in d.items() if not (k in ALG_SECTIONS and v is None)}


def config_from_dict(data: Mapping[str, Any], source: str = "config dict") -> Config:
    """Rebuild a Config from a nested dict (missing keys take schema defaults; unknown keys are errors;
    keys the learner family does not read are dropped, as run folders of older versions saved them all:
    every learner field, a mixer and an exploration section)."""
    layers = _Layers()
    layers.lenient.add(source)
    layers.apply_mapping(_without_new_coma_floor(data), source)
    return layers.build()


def _without_new_coma_floor(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A COMA run saved before COMA read its exploration section (pymarl's epsilon floor) acted without a
    floor: resume it without one. Such folders are told apart by ``noise_start`` in that section, which
    every run of those versions wrote and no COMA run writes now."""
    learner, explore = data.get("learner"), data.get("exploration")
    if not (isinstance(learner, Mapping) and learner.get("name") == "coma" and isinstance(explore, Mapping)):
        return data
    if "noise_start" not in explore:
        return data
    return {**data, "exploration": {**explore, "epsilon_start": 0.0, "epsilon_finish": 0.0}}


def dump_config(cfg: Config, path: str | Path | None = None) -> str:
    """The resolved config as YAML text; with ``path`` also write it there (a folder gets ``config.yaml``)."""
    text = yaml.safe_dump(config_to_dict(cfg), sort_keys=False, default_flow_style=False)
    if path is not None:
        path = config_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)  # never leave a half-written config.yaml behind
        except BaseException:
            tmp.unlink(missing_ok=True)  # nor its temp file (a full disk, Ctrl-C)
            raise
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
