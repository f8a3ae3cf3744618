"""NumPy reference pieces of SMACv2's rules beside :class:`~marl.envs.smac.smacv2.features.V2Observer`:
the conic field of view, the global state and the actions the engine runs. Transcriptions of oxwhirl/smacv2
``starcraft2.py`` (``is_position_in_cone``, ``get_agent_action``, ``get_state_dict``); the compiled kernels
(``fast_kernels.py``) are tested against them.

Conic field of view (``conic_fov=True``, ``num_fov_actions`` F, default 12): actions 6 .. 6+F-1 turn an
agent's field of view to direction k, (cos 2πk/F, sin 2πk/F), and send no command to the game; attacks
follow at 6+F+j. An agent sees (and may attack) a unit only inside a cone of angle 2π/F around its direction,
within its sight (attack) range; every agent faces (1, 0) at reset. Agents observe their own direction (after
their position) and the state has each agent's (after its shield).
"""

from __future__ import annotations

import math

import numpy as np

from marl.envs.smac.options import DEFAULT_MAX_COOLDOWN, MAX_COOLDOWN, MAX_SHIELD, SmacOptions

FOV_EPS = 1e-7  # smacv2 starcraft2.py EPS


def fov_directions(n_fov: int) -> np.ndarray:
    """(F, 2) the directions of SMACv2's field-of-view actions (``canonical_fov_directions``)."""
    k = np.arange(n_fov) / n_fov
    return np.stack([np.cos(2 * np.pi * k), np.sin(2 * np.pi * k)], axis=1)


def in_cone(
    px: float, py: float, fx: float, fy: float, qx: float, qy: float, reach: float, half_angle: float
) -> bool:
    """SMACv2's ``is_position_in_cone``: is (qx, qy) within ``reach`` of an agent at (px, py) facing (fx, fy),
    at an angle below ``half_angle`` from its direction? Angles are arctangents of slopes (so a direction and
    its opposite are the same line), each x clamped away from 0 with the sign of the target's x offset, as
    SMACv2 computes them."""
    dx, dy = qx - px, qy - py
    if math.sqrt(dx * dx + dy * dy) > reach:
        return False
    x_diff = max(dx, FOV_EPS) if dx > 0 else min(dx, -FOV_EPS)
    obj_angle = math.atan(dy / x_diff)
    x = max(fx, FOV_EPS) if dx > 0 else min(fx, -FOV_EPS)
    return abs(obj_angle - math.atan(fy / x)) < half_angle


def engine_actions(actions_BN: np.ndarray, true_avail_BNA: np.ndarray, n_fov: int) -> np.ndarray:
    """The actions the engine runs (a copy): SMACv2 sends no command for a field-of-view turn nor for an
    attack/heal its ``get_can_shoot`` refuses (out of range or cone; ``action_mask=False`` lets agents choose
    one): those become the no-op 0 (the unit keeps its order); attack 6+F+j becomes the engine's 6+j."""
    a = np.array(actions_BN, dtype=np.int64)
    ok = np.take_along_axis(true_avail_BNA, a[..., None], axis=-1)[..., 0]
    attack = a >= 6 + n_fov
    out = np.where(attack, a - n_fov, a)
    out[(a >= 6) & ~(attack & (ok == 1))] = 0
    return out


def turn_fov(fov_BN2: np.ndarray, actions_BN: np.ndarray, n_fov: int) -> None:
    """Apply the field-of-view actions 6 .. 6+F-1 to the directions ``fov_BN2`` in place."""
    a = np.asarray(actions_BN)
    turn = (a >= 6) & (a < 6 + n_fov)
    fov_BN2[turn] = fov_directions(n_fov)[a[turn] - 6]


def v2_state(
    pos: np.ndarray,
    health: np.ndarray,
    health_max: np.ndarray,
    shield: np.ndarray,
    cooldown: np.ndarray,
    energy: np.ndarray,
    ally_types: tuple[str, ...],
    enemy_types: tuple[str, ...],
    ally_onehot: np.ndarray,
    enemy_onehot: np.ndarray,
    medivac: np.ndarray,
    fov: np.ndarray | None,
    last_action: np.ndarray,
    step_frac: float,
    map_size: tuple[float, float],
    extent: tuple[float, float],
    shields: bool,
    opts: SmacOptions,
) -> np.ndarray:
    """SMACv2's ``get_state`` of one env (float32): per living ally [health, energy (a healing Medivac) or
    cooldown over the type's maximum, x and y from the map's centre over the playable ``extent``, (shield),
    (field-of-view direction), type bits], per living enemy [health, x, y, (shield), type bits], then the last
    actions and the time step when on. ``pos`` (U, 2) etc. list allies then enemies; ``fov`` (n, 2) or
    None."""
    n, m = len(ally_types), len(enemy_types)
    centre, size = np.asarray(map_size, dtype=float) / 2, np.asarray(extent, dtype=float)
    b = ally_onehot.shape[1]
    s = int(shields)
    nf_al = 4 + s + (2 if fov is not None else 0) + b
    allies, enemies = np.zeros((n, nf_al)), np.zeros((m, 3 + s + b))
    for i in range(n):
        if health[i] <= 0:
            continue
        max_cd = MAX_COOLDOWN.get(ally_types[i], DEFAULT_MAX_COOLDOWN)
        allies[i, 0] = health[i] / health_max[i]
        allies[i, 1] = (energy[i] if medivac[i] else cooldown[i]) / max_cd
        allies[i, 2:4] = (pos[i] - centre) / size
        if s:
            allies[i, 4] = shield[i] / MAX_SHIELD.get(ally_types[i], 1.0)
        if fov is not None:
            allies[i, 4 + s : 6 + s] = fov[i]
        allies[i, nf_al - b :] = ally_onehot[i]
    for j in range(m):
        k = n + j
        if health[k] <= 0:
            continue
        enemies[j, 0] = health[k] / health_max[k]
        enemies[j, 1:3] = (pos[k] - centre) / size
        if s:
            enemies[j, 3] = shield[k] / MAX_SHIELD.get(enemy_types[j], 1.0)
        enemies[j, 3 + s :] = enemy_onehot[j]
    parts = [allies.ravel(), enemies.ravel()]
    if opts.state_last_action:
        parts.append(np.asarray(last_action, dtype=float).ravel())
    if opts.state_timestep_number:
        parts.append(np.array([step_frac]))
    return np.concatenate(parts).astype(np.float32)
