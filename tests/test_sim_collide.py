"""Collision classes: the colossus stands over the other ground units (X: its ``Collide`` classes are
Colossus, Structure and Flying; every other ground unit on SMAC's maps collides as Ground)."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.sim.contact import push_passes
from marl.envs.smac.sim.engine import SimEngine
from marl.envs.smac.sim.units import (
    ATTACK,
    C_GROUND,
    COLLIDE,
    CONTACT,
    MOVE,
    PROPS,
    RADIUS,
    S_OK,
    S_OX,
    S_OY,
    S_TGT,
    S_WU,
    S_X,
    S_Y,
    SPEED,
    type_ids,
)
from marl.envs.smac.types import EnemyOrder, MapSpec, UnitGroup

OPEN = np.ones((32, 32), dtype=bool)


def _engine(allies):
    spec = MapSpec(
        "test", "P", "T", 100, 0, "colossus",
        tuple(UnitGroup(*g) for g in allies), (UnitGroup("marine", 1, (30.0, 30.0)),),
        EnemyOrder("none"), OPEN,
    )  # fmt: skip
    eng = SimEngine(spec, 0)
    eng.reset()
    return eng, eng._batch.S[0]


def test_collision_classes_follow_the_game_data():
    """Colossus: no class in common with the Ground units; the spine crawler collides as Ground too."""
    col, ling, crawler, stalker = type_ids(("colossus", "zergling", "spine_crawler", "stalker"), enemy=True)
    assert int(PROPS[col, COLLIDE]) & int(PROPS[ling, COLLIDE]) == 0
    assert int(PROPS[col, COLLIDE]) & int(PROPS[col, COLLIDE]) != 0
    assert int(PROPS[crawler, COLLIDE]) & int(PROPS[stalker, COLLIDE]) == C_GROUND


def test_a_zergling_under_a_colossus_is_not_pushed():
    eng, S = _engine([("colossus", 1, (10.0, 10.0)), ("zergling", 1, (14.0, 10.0))])
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y] = 10.0, 10.0, 10.3, 10.0
    tab = eng.step(np.array([1, 1]))  # both stop: 0.3 apart, well inside both radii (1.375)
    assert np.linalg.norm(tab.allies.pos[0] - tab.allies.pos[1]) == pytest.approx(0.3)


def test_two_colossi_touch():
    eng, S = _engine([("colossus", 2, (10.0, 10.0))])
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y] = 10.0, 10.0, 10.5, 10.0
    tab = eng.step(np.array([1, 1]))
    assert np.linalg.norm(tab.allies.pos[0] - tab.allies.pos[1]) == pytest.approx(CONTACT * 2.0)


def test_a_zergling_walks_straight_through_a_colossus():
    eng, S = _engine([("colossus", 1, (10.0, 10.0)), ("zergling", 1, (8.0, 10.0))])
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y] = 10.0, 10.0, 8.0, 10.0
    for _ in range(3):
        tab = eng.step(np.array([1, 4]))  # the colossus stops, the zergling walks east through it
    assert tab.allies.pos[1, 1] == pytest.approx(10.0)  # no slide round it
    assert tab.allies.pos[1, 0] > 11.0
    assert tuple(tab.allies.pos[0]) == (10.0, 10.0)


def _pinned_zealot():
    """Two stalkers firing (wind-up running) 1.3 apart and a walking zealot between them, 0.38 inside each."""
    eng, S = _engine([("stalker", 2, (10.0, 10.0)), ("zealot", 1, (14.0, 10.0))])
    S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y], S[2, S_X], S[2, S_Y] = 10.0, 10.0, 11.3, 10.0, 10.65, 10.0
    S[0, S_WU] = S[1, S_WU] = 5.0  # firing: the push class that does not give way
    S[2, S_OK], S[2, S_OX], S[2, S_OY] = MOVE, 10.65, 20.0  # walking north, across the pair's line
    b = eng._batch
    u = S.shape[0]
    return b, S, np.empty((u, 4)), np.empty(u, dtype=np.int64)


@pytest.mark.parametrize("unpin", [False, True])
def test_a_walker_pinned_between_firing_units_stays_unless_unpinned(unpin):
    """The engine's rule: the walker takes the whole overlap of each firing unit in turn, so between two it
    stays inside both; the candidate ``unpin`` makes such a deep overlap shared, and the pair opens."""
    b, S, buf, idx = _pinned_zealot()
    for _ in range(8):
        push_passes(0, 1, PROPS, b.utype, b.grid, b.S, b.rng, buf, idx, unpin, 0.0)
    gap = min(np.hypot(S[2, S_X] - S[k, S_X], S[2, S_Y] - S[k, S_Y]) for k in (0, 1))
    contact = CONTACT * (PROPS[b.utype[0], RADIUS] + PROPS[b.utype[2], RADIUS])
    if unpin:
        assert S[1, S_X] - S[0, S_X] > 1.3 and gap > contact - PROPS[b.utype[2], SPEED]
    else:
        assert (S[0, S_X], S[1, S_X]) == (10.0, 11.3) and gap < contact - 0.3


@pytest.mark.parametrize("order", ["attack", "move"])
def test_chase_speeds_up_only_a_walker_heading_for_a_unit_and_never_past_its_walk(order):
    """The candidate ``chase<k>``: a walker whose goal is a unit slides round a firing unit by ``k`` x the
    overlap, at most its walk of one loop; a walker with a move order keeps the engine's ``SLIDE``."""
    moved = {}
    for chase in (0.0, 4.0):
        eng, S = _engine(
            [("stalker", 1, (10.0, 10.0)), ("zealot", 1, (9.0, 10.0)), ("zealot", 1, (14.0, 10.0))]
        )
        S[0, S_X], S[0, S_Y], S[1, S_X], S[1, S_Y], S[2, S_X], S[2, S_Y] = 10.0, 10.0, 9.1, 10.0, 14.0, 10.3
        S[0, S_WU] = 5.0  # firing: the walker may not push it
        if order == "attack":
            S[1, S_OK], S[1, S_TGT] = ATTACK, 2  # heading for the far zealot, through the stalker
        else:
            S[1, S_OK], S[1, S_OX], S[1, S_OY] = MOVE, 14.0, 10.3
        b = eng._batch
        u = S.shape[0]
        y0 = S[1, S_Y]
        push_passes(
            0,
            1,
            PROPS,
            b.utype,
            b.grid,
            b.S,
            b.rng,
            np.empty((u, 4)),
            np.empty(u, dtype=np.int64),
            False,
            chase,
        )
        moved[chase] = S[1, S_Y] - y0
    assert moved[0.0] > 0.0  # the engine's slide (the push is along x), toward the goal's side (north)
    if order == "move":
        assert moved[4.0] == moved[0.0]
    else:
        assert moved[0.0] < moved[4.0] <= PROPS[b.utype[1], SPEED] + 1e-12
