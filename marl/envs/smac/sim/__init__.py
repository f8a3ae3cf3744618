"""Embedded StarCraft-like combat engine (NumPy state, Numba ticks); see ``engine.py``."""

from marl.envs.smac.sim._cache import refresh_numba_cache

refresh_numba_cache()

from marl.envs.smac.sim.engine import BatchedSimEngine, BatchedUnitTable, SimEngine, env_seed  # noqa: E402

__all__ = ["BatchedSimEngine", "BatchedUnitTable", "SimEngine", "env_seed"]
