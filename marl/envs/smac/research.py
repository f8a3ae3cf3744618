"""Research only: the embedded engine with candidate rules of the built-in AI that are not the engine's.

``sim/variants.py`` holds candidate targeting and burst rules (e.g. ``"noretaliate+delay32"``) for the
sensitivity studies of ``docs/fidelity.md`` (``benchmarks/research/calibration_probe.py``, ``t0_check.py``,
``fidelity.py --sim-rules``, ``heuristic_sensitivity.py``). They are not part of any engine version, so
they stay out of :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env`'s signature: an env built here
says so in its engine record, and results made with it cannot be pooled with the engine's.
"""

from __future__ import annotations

from typing import Any

from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.sim.variants import parse_rules


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
