"""SMAC (StarCraft Multi-Agent Challenge): maps, SMAC semantics and the ``StarCraft2Env`` front end.

``build("env", "sc2", map_name="3m", backend="auto", seed=0, **smac_flags)`` builds a
:class:`StarCraft2Env` on the embedded engine (no StarCraft II needed); a SMACv2 scenario name
(``protoss_5_vs_5``, docs/smacv2.md) builds a :class:`SMACv2Env`.
"""

from __future__ import annotations

from typing import Any

from marl.envs.pettingzoo_view import pettingzoo_env
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.maps import list_maps, load_map
from marl.envs.smac.smacv2.env import SMACv2Env
from marl.envs.smac.smacv2.scenarios import is_scenario, list_scenarios
from marl.envs.smac.version import ENGINE_VERSION, SMACV2_GENERATOR_VERSION
from marl.registry import register

__all__ = [
    "ENGINE_VERSION",
    "SMACV2_GENERATOR_VERSION",
    "BatchedStarCraft2Env",
    "SMACv2Env",
    "StarCraft2Env",
    "list_maps",
    "list_scenarios",
    "load_map",
    "make_sc2_env",
    "pettingzoo_env",
]


@register("env", "sc2")
def make_sc2_env(
    map_name: str = "3m", backend: str = "auto", seed: int | None = None, **args: Any
) -> StarCraft2Env:
    """Registry factory: a SMAC env for ``map_name`` on ``backend`` (sim | auto | sc2); a SMACv2 scenario name
    (``protoss_5_vs_5`` ...) gives a :class:`SMACv2Env` (sc2: the game with SMACv2's map 32x32_flat)."""
    if args.get("candidate_rules"):  # research only: the built-in AI under candidate rules
        from marl.envs.smac.research import ResearchStarCraft2Env

        return ResearchStarCraft2Env(map_name=map_name, backend=backend, seed=seed, **args)
    args.pop("candidate_rules", None)  # "": the engine's own rules
    if is_scenario(map_name):
        return SMACv2Env(map_name=map_name, backend=backend, seed=seed, **args)
    return StarCraft2Env(map_name=map_name, backend=backend, seed=seed, **args)
