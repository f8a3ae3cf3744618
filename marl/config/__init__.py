"""Configuration: the schema, layered YAML + command-line loading, and the training scripts' arguments.

* :mod:`marl.config.schema` -- the frozen dataclasses of an experiment (:class:`Config` and its sections).
* :mod:`marl.config.keys` -- dotted keys, shortcuts with nearest-key suggestions, value coercion, ranges.
* :mod:`marl.config.layers` -- the layers (default < env < alg < map < command line) and loading.
* :mod:`marl.config.saved` -- a run's ``config.yaml``: writing it and reading it back.
* :mod:`marl.config.cli` -- the argument parser every training script shares (imported on its own: it
  lists SMAC maps, so this package does not import it).

The common names are re-exported here: ``from marl.config import Config, load_config``.
"""

from marl.config.keys import ConfigError, coerce, parse_override, resolve_key
from marl.config.layers import CONFIG_DIR, load_config
from marl.config.saved import config_from_dict, config_path, config_to_dict, dump_config, load_saved_config
from marl.config.schema import Config

__all__ = [
    "CONFIG_DIR",
    "Config",
    "ConfigError",
    "coerce",
    "config_from_dict",
    "config_path",
    "config_to_dict",
    "dump_config",
    "load_config",
    "load_saved_config",
    "parse_override",
    "resolve_key",
]
