"""The registered batched fast path of the "sc2" env: picks the SMAC or the SMACv2 batched vector env
(a module of its own so that neither batched env imports the other)."""

from __future__ import annotations

from typing import Any

from marl.envs.smac.batched_vector import BatchedSmacVectorEnv
from marl.envs.smac.sc2 import resolve_backend
from marl.envs.smac.sc2.install import resolve_gen_backend
from marl.envs.smac.smacv2.batched import BatchedSMACv2VectorEnv
from marl.envs.smac.smacv2.scenarios import is_scenario
from marl.registry import register


@register("batched_env", "sc2")
def batched_sc2_vector_env(map_name: str, backend: str, n_envs: int, seed: int, **args: Any) -> Any:
    """The "sc2" env's batched fast path when ``backend`` resolves to the embedded engine: a
    :class:`BatchedSmacVectorEnv` of ``n_envs`` rows (row ``r`` equal to ``StarCraft2Env`` seeded
    ``seed + r``), or for a SMACv2 scenario a ``BatchedSMACv2VectorEnv`` (row ``r`` equal to ``SMACv2Env``
    seeded ``seed + r``); None for the real game (:meth:`marl.envs.factory.EnvFactory.batched`)."""
    if args.get("candidate_rules"):  # research only: the built-in AI under candidate rules
        from marl.envs.smac.research import research_vector_env

        return research_vector_env(map_name, backend, n_envs, seed, **args)
    args.pop("candidate_rules", None)  # "": the engine's own rules
    if is_scenario(map_name):
        if resolve_gen_backend(backend)[0] != "sim":
            return None
        return BatchedSMACv2VectorEnv(map_name, n_envs, seed, **args)
    if resolve_backend(backend, map_name)[0] != "sim":
        return None
    return BatchedSmacVectorEnv(map_name, n_envs, seed, **args)
