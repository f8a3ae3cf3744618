"""SMAC's scripted allies (``heuristic_ai``), for E envs; used through ``SmacFeatures.batch_heuristic``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from marl.envs.smac.options import N_ACTIONS_NO_ATTACK

if TYPE_CHECKING:
    from marl.envs.smac.features import Geometry, SmacFeatures, Units


def heuristic_actions(
    f: SmacFeatures, u: Units, targets: list[list[int | None]], avail: np.ndarray, rest: bool, geo: Geometry
) -> np.ndarray:
    """SMAC's ``heuristic_ai`` for E envs: attack the closest living enemy; a Medivac heals the
    closest wounded ally.

    ``targets[e][i]`` (updated in place) keeps a target until it dies (or, for a heal target, is back
    at full health). With ``rest``, an unavailable attack/heal becomes a move towards it. A plain
    per-agent loop: scripted allies are a debugging aid, not a hot path.
    """
    n = f.n_agents
    no_target = float(np.hypot(f.ext_x, f.ext_y))  # SMAC: hypot(max_distance_x, max_distance_y)
    actions = np.zeros((u.n_envs, n), dtype=np.int64)
    marauder = np.array([t == "marauder" for t in f.spec.ally_types])
    hmax = np.broadcast_to(u.health_max, u.health.shape)
    dist = geo.dist
    for e in range(u.n_envs):
        alive, hp, hm = u.health[e] > 0, u.health[e], hmax[e]
        for i in range(n):
            if not alive[i]:
                continue
            tgt = targets[e][i]
            if f.ally_medivac[i]:  # unit index = ally index
                if tgt is None or not alive[tgt] or hp[tgt] == hm[tgt]:
                    ok = alive[:n] & ~f.ally_medivac & (hp[:n] != hm[:n])
                    d = np.where(ok, dist[e, i, :n], np.inf)
                    tgt = int(np.argmin(d)) if d.min() < no_target else None
                unit = tgt
            else:  # enemy index; its unit index is n + tgt
                if tgt is None or not alive[n + tgt]:
                    ok = alive[n:] & ~(f.enemy_medivac & marauder[i])
                    d = np.where(ok, dist[e, i, n:], np.inf)
                    tgt = int(np.argmin(d)) if d.min() < no_target else None
                unit = None if tgt is None else n + tgt
            targets[e][i] = tgt
            if tgt is None:
                continue
            action = N_ACTIONS_NO_ATTACK + tgt
            if rest and not avail[e, i, action]:
                dx, dy = geo.g[1:, e, i, unit]
                action = (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)
            actions[e, i] = action
    return actions
