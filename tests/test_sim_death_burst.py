"""The ``deathburst`` candidate rule (sim/variants.py): a baneling killed by a hit bursts (X, L)."""

from __future__ import annotations

import numpy as np

from marl.envs.smac.sim.engine import SimEngine
from marl.envs.smac.sim.units import S_HP, S_X, S_Y
from marl.envs.smac.sim.variants import R_DEATH_BURST, parse_rules
from marl.envs.smac.types import EnemyOrder, MapSpec, UnitGroup

OPEN = np.ones((32, 32), dtype=bool)


def _play(rules: str) -> np.ndarray:
    """An allied baneling with 1 hit point beside an enemy zergling, a marine shooting it from 3 away;
    the allies stop. Returns the enemies' hit points after two steps."""
    spec = MapSpec(
        "test", "Z", "Z", 100, 0, "bane",
        (UnitGroup("baneling", 1, (10.0, 10.0)),),
        (UnitGroup("marine", 1, (13.0, 10.0)), UnitGroup("zergling", 1, (10.6, 10.0))),
        EnemyOrder("none"), OPEN,
    )  # fmt: skip
    eng = SimEngine(spec, 0, rules=parse_rules(rules) if rules else None)
    eng.reset()
    S = eng._batch.S[0]
    for k, (x, y) in enumerate(((10.0, 10.0), (13.0, 10.0), (10.6, 10.0))):
        S[k, S_X], S[k, S_Y] = x, y
    S[0, S_HP] = 1.0
    for _ in range(2):
        tab = eng.step(np.array([1]))
    assert tab.allies.health[0] == 0.0  # the baneling was killed
    return tab.enemies.health


def test_a_killed_baneling_bursts_only_under_the_rule():
    assert parse_rules("deathburst")[R_DEATH_BURST] == 1
    default, burst = _play(""), _play("deathburst")
    assert default[1] > 30.0  # the zergling beside it keeps its 35 hit points (regeneration aside)
    assert burst[1] == 0.0  # 20 + 15 vs Light: the zergling dies
    assert burst[0] == default[0] == 45.0  # the marine stands beyond 2.2 + its radius
