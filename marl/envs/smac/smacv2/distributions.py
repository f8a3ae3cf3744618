"""SMACv2's procedural content (Ellis et al. 2022, arXiv:2212.07489; oxwhirl/smacv2) as our own code.

Every draw takes an explicit seeded ``numpy.random.Generator``, so a seed reproduces the same teams and start
positions (SMACv2 itself draws from unseeded generators and Python's ``random.shuffle``). The rules follow
``smacv2/env/starcraft2/distributions.py`` (classes ``WeightedTeamsDistribution``,
``ReflectPositionDistribution``, ``SurroundedPositionDistribution`` and
``SurroundedAndReflectPositionDistribution``); docs/smacv2.md §2 states each rule with its source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Distance (in map units) of the four near-centre points from the centre, along each diagonal, in SMACv2's
# "surrounded" layout (``offset = 2`` in SurroundedPositionDistribution.generate).
SURROUND_OFFSET = 2.0
# Diagonal k: the map corner (as a fraction of (map_x, map_y)) and the sign of its near-centre offset.
_CORNERS = np.array([(0.0, 0.0), (0.0, 1.0), (1.0, 1.0), (1.0, 0.0)])
_SIGNS = np.array([(-1.0, -1.0), (-1.0, 1.0), (1.0, 1.0), (1.0, -1.0)])
# ReflectPositionDistribution keeps allies 1 unit short of the middle (a buffer of 2 between the sides).
REFLECT_BUFFER = 1.0


@dataclass(frozen=True)
class TeamGen:
    """SMACv2's ``team_gen: {dist_type: weighted_teams, ...}``: i.i.d. unit types with ``weights``; a team
    made only of ``exceptions`` (units that cannot make up a whole team) is redrawn."""

    unit_types: tuple[str, ...]
    weights: tuple[float, ...]
    exceptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.unit_types) == 0 or len(self.unit_types) != len(self.weights):
            raise ValueError(
                f"team_gen needs one weight per unit type, got {len(self.unit_types)} types "
                f"and {len(self.weights)} weights"
            )
        w = np.asarray(self.weights, dtype=float)
        if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError(f"team_gen weights must be >= 0 and sum to 1, got {list(self.weights)}")
        unknown = [u for u in self.exceptions if u not in self.unit_types]
        if unknown:
            raise ValueError(
                f"exception unit types {unknown} are not among unit_types {list(self.unit_types)}"
            )
        drawable = {u for u, p in zip(self.unit_types, self.weights, strict=True) if p > 0}
        if drawable <= set(self.exceptions):  # draw_team would redraw forever: a reset that hangs
            raise ValueError(
                f"every unit type with a positive weight ({sorted(drawable)}) is an exception "
                f"({list(self.exceptions)}): no team could ever be drawn"
            )


def draw_team(rng: np.random.Generator, gen: TeamGen, n: int) -> list[str]:
    """``n`` unit names drawn i.i.d. with ``gen.weights``, redrawn while every member is an exception."""
    probs = np.asarray(gen.weights, dtype=float)
    probs = probs / probs.sum()
    exc = set(gen.exceptions)
    while True:
        idx = rng.choice(len(gen.unit_types), size=n, p=probs)
        team = [gen.unit_types[i] for i in idx]
        if not exc or not all(u in exc for u in team):
            return team


def draw_teams(
    rng: np.random.Generator, gen: TeamGen, n_units: int, n_enemies: int
) -> tuple[list[str], list[str]]:
    """(ally team, enemy team) as SMACv2's weighted_teams: the enemies mirror the allies; with more enemies
    the extra ones are a second team drawn by the same rule; with fewer, the allies' first ``n_enemies``."""
    if n_units < 1 or n_enemies < 1:
        raise ValueError(f"n_units and n_enemies must be >= 1, got {n_units} and {n_enemies}")
    allies = draw_team(rng, gen, n_units)
    enemies = list(allies[:n_enemies])
    if n_enemies > n_units:
        enemies += draw_team(rng, gen, n_enemies - n_units)
    return allies, enemies


def reflect_positions(
    rng: np.random.Generator, n_units: int, n_enemies: int, map_x: float, map_y: float
) -> tuple[np.ndarray, np.ndarray]:
    """(allies (n_units, 2), enemies (n_enemies, 2)): allies uniform in [0, map_x/2 - 1) x [0, map_y); each
    enemy mirrors an ally in the vertical line x = map_x/2; extra enemies uniform in the right half."""
    ally = rng.uniform((0.0, 0.0), (map_x / 2 - REFLECT_BUFFER, map_y), size=(n_units, 2))
    enemy = np.zeros((n_enemies, 2))
    k = min(n_units, n_enemies)
    enemy[:k, 0] = map_x - ally[:k, 0]
    enemy[:k, 1] = ally[:k, 1]
    if n_enemies > n_units:
        enemy[k:] = rng.uniform((map_x / 2, 0.0), (map_x, map_y), size=(n_enemies - n_units, 2))
    return ally, enemy


def surrounded_positions(
    rng: np.random.Generator, n_units: int, n_enemies: int, map_x: float, map_y: float
) -> tuple[np.ndarray, np.ndarray]:
    """(allies, enemies): allies at the map centre; enemies in 1-4 groups (sizes multinomial with equal odds)
    on distinct diagonals, each group at a uniform fraction t of the way from its map corner to the point
    ``SURROUND_OFFSET`` from the centre on that diagonal."""
    size = np.array([map_x, map_y])
    centre = size / 2
    ally = np.tile(centre, (n_units, 1))
    n_groups = int(rng.integers(1, 5))
    members = rng.multinomial(n_enemies, np.full(n_groups, 1.0 / n_groups))
    t = rng.uniform(size=n_groups)
    diagonals = rng.choice(4, size=n_groups, replace=False)
    enemy = np.zeros((n_enemies, 2))
    start = 0
    for g in range(n_groups):
        d = diagonals[g]
        near = centre + SURROUND_OFFSET * _SIGNS[d]
        enemy[start : start + members[g]] = near * t[g] + _CORNERS[d] * size * (1 - t[g])
        start += members[g]
    return ally, enemy


def surrounded_and_reflect(
    rng: np.random.Generator, p: float, n_units: int, n_enemies: int, map_x: float, map_y: float
) -> tuple[np.ndarray, np.ndarray, str]:
    """(allies, enemies, kind): "reflect" with probability ``p``, else "surrounded" (SMACv2 draws u ~ U[0, 1)
    and picks surrounded when u > p). ``p`` 0 or 1 draws nothing (SMACv2's "surrounded" / "reflect")."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"start_positions p must be in [0, 1], got {p}")
    if p == 0.0 or (p < 1.0 and rng.random() > p):
        return (*surrounded_positions(rng, n_units, n_enemies, map_x, map_y), "surrounded")
    return (*reflect_positions(rng, n_units, n_enemies, map_x, map_y), "reflect")
