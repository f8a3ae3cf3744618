"""Hand-made maps for scripted scenarios on the embedded engine (tests/ is on ``sys.path`` under pytest)."""

from __future__ import annotations

import numpy as np

from marl.envs.smac.sim.engine import SimEngine
from marl.envs.smac.types import EnemyOrder, MapSpec, UnitGroup

OPEN = np.ones((32, 32), dtype=bool)


NO_ORDER = EnemyOrder("none")


def spec_of(allies, enemies, order=NO_ORDER, grid=OPEN, limit=100) -> MapSpec:
    """A hand-made map: groups given as (unit, count, (x, y))."""
    return MapSpec(
        "test",
        "T",
        "T",
        limit,
        0,
        "marines",
        tuple(UnitGroup(*g) for g in allies),
        tuple(UnitGroup(*g) for g in enemies),
        order,
        grid,
    )


def engine(spec, seed=0):
    eng = SimEngine(spec, seed)
    eng.reset()
    return eng, eng._batch.S[0]  # S: (units, columns) view of env 0 for scripted set-ups


STOP, ATTACK_ENEMY_0 = 1, 6  # SMAC's actions: stop; attack enemy 0


def place(S, unit: int, x: float, y: float = 16.0) -> None:
    """Put ``unit`` of a one-env state ``S`` (unit, column) at (x, y)."""
    from marl.envs.smac.sim.units import S_X, S_Y

    S[unit, S_X], S[unit, S_Y] = x, y
