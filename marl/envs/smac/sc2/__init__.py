"""The real StarCraft II engine for SMAC, through pysc2 (``pip install -e '.[sc2]'``, game 4.10 + SMAC maps).

Importing this package imports neither pysc2 nor protobuf (see :mod:`.proto`); the game is only looked for
(:func:`find_sc2`, :func:`resolve_backend`) until an :class:`Sc2Engine` is created.
"""

from __future__ import annotations

from marl.envs.smac.sc2.engine import DIFFICULTIES, EpisodeAborted, Pysc2Launcher, Sc2Engine
from marl.envs.smac.sc2.install import (
    INSTALL_HINT,
    SC2_VERSION,
    Sc2Install,
    Sc2Unavailable,
    default_sc2_path,
    find_sc2,
    resolve_backend,
)
from marl.envs.smac.sc2.proto import load_pysc2
from marl.envs.smac.sc2.translate import Sc2MapMismatch

__all__ = [
    "DIFFICULTIES",
    "INSTALL_HINT",
    "SC2_VERSION",
    "EpisodeAborted",
    "Pysc2Launcher",
    "Sc2Engine",
    "Sc2Install",
    "Sc2MapMismatch",
    "Sc2Unavailable",
    "default_sc2_path",
    "find_sc2",
    "load_pysc2",
    "resolve_backend",
]
