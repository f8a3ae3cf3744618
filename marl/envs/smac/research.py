"""Research only: the embedded engine with candidate rules of the built-in AI that are not the engine's.

``sim/variants.py`` holds candidate targeting and burst rules (e.g. ``"noretaliate+delay32"``) for the
sensitivity studies of ``docs/fidelity.md`` (``benchmarks/research/calibration_probe.py``, ``t0_check.py``,
``fidelity.py --sim-rules``, ``heuristic_sensitivity.py``). They are not part of any engine version, so
they stay out of :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env`'s signature: an env built here
says so in its engine record, and results made with it cannot be pooled with the engine's.

Training under candidate rules (a sensitivity run, e.g. whether a map's learning curve moves into the game's
band without retaliation) gives the ``sc2`` env the argument ``candidate_rules``; its factories
(``marl.envs.smac.make_sc2_env`` and the batched fast path) then build this module's envs::

    python scripts/train_qmix.py --alg qmix_smac_paper --map 3s5z env.args.candidate_rules=noretaliate
"""

from __future__ import annotations

from typing import Any

from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.batched_vector import BatchedSmacVectorEnv
from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.env_fused import FusedSingle
from marl.envs.smac.sim.variants import parse_rules
from marl.envs.smac.smacv2.scenarios import is_scenario


def variant_env(
    map_name: str, n_envs: int, seed: int | None, rules: str, **kwargs: Any
) -> BatchedStarCraft2Env:
    """A :class:`BatchedStarCraft2Env` whose built-in AI plays the candidate ``rules`` (``""``: the engine's
    own, and then the plain env). ``kwargs`` as the env's (``fused``, ``threads``, SMAC's flags); candidate
    rules step stage by stage. Raises ``ValueError`` naming the rule for an unknown one."""
    # "" or "default" is the plain env; an unknown rule fails here, before the engine is built
    if not parse_rules(rules).any():
        return BatchedStarCraft2Env(map_name, n_envs, seed, **kwargs)

    class VariantEnv(BatchedStarCraft2Env):
        _candidate_rules = rules

        def engine_info(self) -> dict[str, Any]:
            """The engine's record, naming the candidate rules (so no report pools it with the engine's)."""
            return {**super().engine_info(), "candidate_rules": rules}

    return VariantEnv(map_name, n_envs, seed, **kwargs)


def _check(map_name: str, backend: str, rules: str) -> None:
    if backend not in ("sim", "auto"):
        raise ValueError(f"candidate rules run on the embedded engine only (backend 'sim'), got {backend!r}")
    if is_scenario(map_name):
        raise ValueError(f"candidate rules apply to SMAC's maps, not the SMACv2 scenario {map_name!r}")
    parse_rules(rules)  # an unknown rule fails here, naming the known ones


class ResearchStarCraft2Env(StarCraft2Env):
    """``StarCraft2Env`` on the embedded engine, its built-in AI under ``candidate_rules`` (research only)."""

    def __init__(
        self, map_name: str = "3m", backend: str = "sim", seed: int | None = None, candidate_rules: str = "",
        **args: Any,
    ) -> None:  # fmt: skip
        _check(map_name, backend, candidate_rules)
        super().__init__(map_name, backend="sim", seed=seed, **args)
        if not self._fused_ok:
            raise ValueError("candidate rules need the embedded engine's fused path (no heuristic_ai)")
        self.candidate_rules = candidate_rules

    def _new_fused(self) -> FusedSingle:
        env = variant_env(self.map_name, 1, self._seed, self.candidate_rules, threads=1, **self._smac_flags)
        return FusedSingle(self.map_name, self._seed, self._smac_flags, env=env)

    def engine_info(self) -> dict[str, Any]:
        """The engine's record, naming the candidate rules (none: the engine's own record)."""
        info = super().engine_info()
        return (
            {**info, "candidate_rules": self.candidate_rules}
            if parse_rules(self.candidate_rules).any()
            else info
        )


class ResearchVectorEnv(BatchedSmacVectorEnv):
    """The batched fast path under ``candidate_rules``: every row's built-in AI plays them."""

    def __init__(
        self, map_name: str, n_envs: int, seed: int | None = None, candidate_rules: str = "", **args: Any
    ) -> None:
        self.candidate_rules = candidate_rules
        super().__init__(map_name, n_envs, seed, **args)

    def _make(self, map_name: str, n_envs: int, seed: int | None, **smac_flags: Any) -> BatchedStarCraft2Env:
        return variant_env(map_name, n_envs, seed, self.candidate_rules, **smac_flags)


def research_vector_env(
    map_name: str, backend: str, n_envs: int, seed: int, candidate_rules: str, **args: Any
) -> ResearchVectorEnv:
    """The batched fast path of the ``sc2`` env given ``candidate_rules`` (checked first)."""
    _check(map_name, backend, candidate_rules)
    return ResearchVectorEnv(map_name, n_envs, seed, candidate_rules, **args)
