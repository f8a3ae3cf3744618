"""SMAC (StarCraft Multi-Agent Challenge): maps, SMAC semantics and the ``StarCraft2Env`` front end.

``build("env", "sc2", map_name="3m", backend="auto", seed=0, **smac_flags)`` builds a
:class:`StarCraft2Env` on the embedded engine (no StarCraft II needed).
"""

from __future__ import annotations

from typing import Any

from marl.envs.pettingzoo_view import pettingzoo_env
from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.maps import list_maps, load_map
from marl.registry import register

__all__ = ["StarCraft2Env", "list_maps", "load_map", "make_sc2_env", "pettingzoo_env"]


@register("env", "sc2")
def make_sc2_env(
    map_name: str = "3m", backend: str = "auto", seed: int | None = None, **args: Any
) -> StarCraft2Env:
    """Registry factory: a SMAC env for ``map_name`` on ``backend`` (sim | auto | sc2)."""
    return StarCraft2Env(map_name=map_name, backend=backend, seed=seed, **args)
