"""Contact between ground units in the embedded engine: who touches, who gives way, and how a walker goes
round a unit it may not push (one pass per game loop, after every unit has acted; ``stepper``).

Two units touch when closer than ``CONTACT`` x the sum of their radii, and who moves follows their push
class (:func:`_push_class`); sources in ``units`` (``CONTACT``, ``SLIDE``) and ``docs/fidelity.md``,
"Contact and who gives way".
"""

from __future__ import annotations

import math

import numpy as np

from marl.envs.smac.sim.jit import engine_jit, engine_jit_inline
from marl.envs.smac.sim.physics import dist, rand_uniform, reach, try_move
from marl.envs.smac.sim.units import (
    AIR,
    AMOVE,
    ATTACK,
    COLLIDE,
    CONTACT,
    HEAL,
    IDLE,
    MOVE,
    RADIUS,
    RANGE,
    S_HP,
    S_OK,
    S_OX,
    S_OY,
    S_TGT,
    S_WU,
    S_X,
    S_Y,
    SLIDE,
    SPEED,
)

STRUCTURE, FIRING, BUSY, IDLING = 4.0, 3.0, 2.0, 1.0  # push classes: the lower gives way, equals share
PUSH_TOL = 0.01  # push_passes stops once no pair overlaps by more than this fraction of its contact


@engine_jit_inline
def _push_class(e, a, props, utype, S):
    """Unit ``a``'s push class: a structure; a unit firing (its wind-up) or standing to fire at a living
    target within its weapon's reach; any other busy unit (walking); an idle one."""
    if props[utype[a], SPEED] <= 0.0:
        return STRUCTURE
    if S[e, a, S_WU] > 0.0:
        return FIRING
    k = int(S[e, a, S_OK])
    if k == ATTACK or k == AMOVE:
        t = int(S[e, a, S_TGT])
        if t >= 0 and S[e, t, S_HP] > 0.0 and dist(e, a, t, S) <= reach(props, utype, a, t, RANGE):
            return FIRING
    return IDLING if k == IDLE else BUSY


@engine_jit_inline
def _goal(e, a, S):
    """Where unit ``a`` is heading: its target (attack, heal, or an attack-move's auto-target), else its
    order point (move, attack-move); (nan, nan) when idle."""
    k = int(S[e, a, S_OK])
    t = int(S[e, a, S_TGT])
    if (k == ATTACK or k == AMOVE or k == HEAL) and t >= 0:
        return S[e, t, S_X], S[e, t, S_Y]
    if k == MOVE or k == AMOVE:
        return S[e, a, S_OX], S[e, a, S_OY]
    return math.nan, math.nan


@engine_jit_inline
def _slide(e, w, px, py, nx, ny, over, S, rng, props, utype, chase):
    """The sideways step (dx, dy) of walker ``w`` at (px, py), pushed out along (nx, ny) by ``over`` from a
    unit it may not push: ``SLIDE`` x ``over`` along the contact, to the side of its goal (a random side
    when the goal lies straight behind the other), and none when it is not heading into the other.
    ``chase`` > 0 (the candidate rule ``chase<k>`` of ``variants``, research only): a walker heading for a
    unit (its target) slides ``chase`` x ``over`` instead, at most its walk of one loop."""
    gx, gy = _goal(e, w, S)
    if math.isnan(gx):
        return 0.0, 0.0
    gx -= px
    gy -= py
    if gx * nx + gy * ny >= 0.0:
        return 0.0, 0.0
    side = -gx * ny + gy * nx  # the goal's component along the tangent (-ny, nx)
    if side == 0.0:
        side = rand_uniform(rng, e) - 0.5
    size = SLIDE * over
    if chase > 0.0 and _chasing(e, w, S):
        size = min(chase * over, props[utype[w], SPEED])
    step = size if side > 0.0 else -size
    return -ny * step, nx * step


@engine_jit_inline
def _chasing(e, w, S):
    """Whether unit ``w`` walks toward a unit (an attack, a heal, or an attack-move's target)."""
    k = int(S[e, w, S_OK])
    return (k == ATTACK or k == AMOVE or k == HEAL) and int(S[e, w, S_TGT]) >= 0


@engine_jit_inline
def _give_way(e, k, nx, ny, over, mine, theirs, props, utype, grid, S, rng, buf, idx, chase):
    """Move the unit in scratch slot ``k`` (class ``mine``) out of a contact with a unit of class
    ``theirs``: all of ``over`` along (nx, ny), half to its like, plus a slide round a firing unit or a
    structure."""
    share = 0.5 if mine == theirs else 1.0
    sx, sy = 0.0, 0.0
    if theirs >= FIRING and mine < theirs:
        sx, sy = _slide(e, idx[k], buf[k, 0], buf[k, 1], nx, ny, over, S, rng, props, utype, chase)
    a = idx[k]
    try_move(
        e, a, buf[k, 0] + nx * over * share + sx, buf[k, 1] + ny * over * share + sy, S, props, utype, grid
    )
    buf[k, 0] = S[e, a, S_X]
    buf[k, 1] = S[e, a, S_Y]


@engine_jit
def _push(e, props, utype, grid, S, rng, buf, idx):
    """Separate the living ground units of env ``e`` that touch, in one pass over the pairs (the engine's
    rule): the lower :func:`_push_class` takes the whole overlap, units of one class half each, two
    structures stay (:func:`_give_way`); units with no collision class in common (``units.COLLIDE``: a
    colossus and any other ground unit) do not touch.

    D (``benchmarks/fidelity/recorded_movement.py``): the game's allies firing in a walking ally's way moved
    in 2 % of those steps and stopped ones in all of them; the walker went round, losing 3.8 loops of its step
    on average (stuck the whole step in 21 %). ``buf`` (U, 4) and ``idx`` (U,) are scratch: the living
    ground units are gathered first so the O(n^2) pair scan runs over small contiguous arrays.
    """
    n = _gather(e, props, utype, S, buf, idx)
    _push_pass(e, n, props, utype, grid, S, rng, buf, idx, np.bool_(False), 0.0)  # no literal: sim/jit.py


@engine_jit
def push_passes(e, passes, props, utype, grid, S, rng, buf, idx, unpin, chase):
    """:func:`_push` repeated up to ``passes`` times while some pair still overlaps by more than
    :data:`PUSH_TOL` of its contact distance: the candidate rule ``push<k>`` of ``variants`` (research only;
    the engine's rule is one pass, which lets a crowd of dozens walk inside the contact distance).
    ``unpin``: the candidate rule ``unpin`` (see :func:`_push_pass`); ``chase``: ``chase<k>``'s slide factor
    (see :func:`_slide`; 0: the engine's)."""
    n = _gather(e, props, utype, S, buf, idx)
    for _ in range(passes):
        if _push_pass(e, n, props, utype, grid, S, rng, buf, idx, unpin, chase) <= PUSH_TOL:
            break


@engine_jit_inline
def _gather(e, props, utype, S, buf, idx):
    """The living ground units of env ``e`` into the scratch ``buf``/``idx``; returns how many."""
    u = S.shape[1]
    n = np.int64(0)  # not the literal 0, which would compile _push_pass for it too (sim/jit.py)
    for a in range(u):
        ua = utype[a]
        if S[e, a, S_HP] > 0.0 and props[ua, AIR] == 0:
            idx[n] = a
            buf[n, 0] = S[e, a, S_X]
            buf[n, 1] = S[e, a, S_Y]
            buf[n, 2] = props[ua, RADIUS]
            buf[n, 3] = _push_class(e, a, props, utype, S)
            n += 1
    return n


@engine_jit
def _push_pass(e, n, props, utype, grid, S, rng, buf, idx, unpin, chase):
    """One pass over the pairs of the ``n`` gathered units; returns the largest overlap met, as a fraction
    of its pair's contact distance (0 when none touched).

    ``unpin`` (the candidate rule of ``variants``, research only): a walker overlapping a firing unit by more
    than its own walk of one loop did not walk into it this loop (a crowd pressed it there, or the other
    stopped to fire on it), so the two share that overlap as equals instead of the walker taking it all; a
    walker pinned between firing units otherwise stays inside them for as long as they fire."""
    worst = 0.0
    for p in range(n):
        for q in range(p + 1, n):
            rr = (buf[p, 2] + buf[q, 2]) * CONTACT
            dx = buf[q, 0] - buf[p, 0]
            if dx >= rr or dx <= -rr:
                continue
            dy = buf[q, 1] - buf[p, 1]
            if dy >= rr or dy <= -rr:
                continue
            d = math.sqrt(dx * dx + dy * dy)
            if d >= rr:
                continue
            cp, cq = buf[p, 3], buf[q, 3]
            if cp == STRUCTURE and cq == STRUCTURE:
                continue
            if unpin and cp != cq and max(cp, cq) == FIRING:
                w = p if cp < cq else q
                if rr - d > props[utype[idx[w]], SPEED]:
                    cp = cq = FIRING
            if int(props[utype[idx[p]], COLLIDE]) & int(props[utype[idx[q]], COLLIDE]) == 0:
                continue  # no collision class in common: a colossus over a zergling
            if d < 1e-6:
                ang = 2.0 * math.pi * rand_uniform(rng, e)
                dx, dy, d = math.cos(ang), math.sin(ang), 1.0
            worst = max(worst, (rr - d) / rr)
            ux, uy = dx / d, dy / d  # from p to q
            if cp <= cq:
                _give_way(e, p, -ux, -uy, rr - d, cp, cq, props, utype, grid, S, rng, buf, idx, chase)
            if cq <= cp:
                _give_way(e, q, ux, uy, rr - d, cq, cp, props, utype, grid, S, rng, buf, idx, chase)
    return worst
