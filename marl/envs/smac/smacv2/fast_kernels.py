"""SMACv2's per-step rules for E envs in compiled code (Numba): availability, observations with the EPO
bookkeeping, state and reward, each env with its own generated team.

The readable reference is NumPy: :class:`~marl.envs.smac.smacv2.features.V2Observer` (SMACv2's action mask,
observations and EPO tags) plus ``SmacFeatures(compiled=False)`` (SMAC's move block, state and reward).
``tests/test_smacv2_fast.py`` holds these kernels to it element for element over whole episodes. Same
arithmetic in the same order (float64, cast to float32 on store) and the same draws from the env's
observation stream (:func:`~marl.envs.smac.smacv2.features.visiting_order`,
:func:`~marl.envs.smac.smacv2.features.epo_draw`), so the values are identical.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from marl.envs.smac.fast_features import _cell, fill_state, move_block, reward_end_kernel
from marl.envs.smac.sim.physics import rand_int, rand_uniform

FOV_EPS = 1e-7  # smacv2 starcraft2.py EPS (reference.py)


@njit(cache=True)
def _in_cone(px, py, fx, fy, qx, qy, reach, half_angle):
    """reference.in_cone (SMACv2's ``is_position_in_cone``), the same operations in the same order."""
    dx, dy = qx - px, qy - py
    if math.sqrt(dx * dx + dy * dy) > reach:
        return False
    x_diff = max(dx, FOV_EPS) if dx > 0 else min(dx, -FOV_EPS)
    obj_angle = math.atan(dy / x_diff)
    x = max(fx, FOV_EPS) if dx > 0 else min(fx, -FOV_EPS)
    return abs(obj_angle - math.atan(fy / x)) < half_angle


@njit(cache=True)
def _epo_bookkeeping(e, n, health, steps, obs_enemies, tag_owner):
    """V2Observer.new_episode (step 0) or .after_step: drop the tags of enemies whose tagger died (and that
    agent's column) and of dead enemies."""
    m = tag_owner.shape[1]
    if steps[e] == 0:
        obs_enemies[e] = False
        tag_owner[e] = -1
        return
    for i in range(n):
        if health[e, i] > 0:
            continue
        owned = False
        for j in range(m):
            if tag_owner[e, j] == i:
                owned = True
                tag_owner[e, j] = -1
                obs_enemies[e, j] = False
        if owned:
            obs_enemies[e, :, i] = False
    for j in range(m):
        if health[e, n + j] <= 0:
            tag_owner[e, j] = -1
            obs_enemies[e, j] = False


@njit(cache=True)
def _avail_env(
    e, n, pos, health, medivac, shoot, fov, walk_in, pad, dirs, action_mask, n_fov, half, conic, true_avail,
    avail,
):  # fmt: skip
    """Env ``e``'s availability: ``true_avail[e]`` range-checked (SMACv2's ``get_true_avail_agent_actions``)
    and ``avail[e]`` (range-checked only with ``action_mask``)."""
    m = pos.shape[1] - n
    for i in range(n):
        true_avail[e, i] = 0
        if health[e, i] <= 0:
            true_avail[e, i, 0] = 1
            avail[e, i, 0] = 1
            continue
        px, py = pos[e, i, 0], pos[e, i, 1]
        true_avail[e, i, 1] = 1
        avail[e, i, 1] = 1
        for d in range(4):
            x = int(np.trunc(px + dirs[d, 0]))
            y = int(np.trunc(py + dirs[d, 1]))
            true_avail[e, i, 2 + d] = _cell(walk_in, x, y, pad)
            avail[e, i, 2 + d] = true_avail[e, i, 2 + d]
        for d in range(n_fov):  # conic_fov: the field-of-view turns
            true_avail[e, i, 6 + d] = 1
            avail[e, i, 6 + d] = 1
        first = 6 + n_fov
        # a Medivac's action first + j heals ally j (living, not a Medivac); others attack enemy j (living)
        lo, cnt = (0, n) if medivac[e, i] else (n, m)
        for j in range(cnt):
            k = lo + j
            if health[e, k] <= 0 or (medivac[e, i] and medivac[e, k]):
                continue
            if conic:
                fx, fy = fov[e, i, 0], fov[e, i, 1]
                in_range = _in_cone(px, py, fx, fy, pos[e, k, 0], pos[e, k, 1], shoot[e, i], half)
            else:
                dx = pos[e, k, 0] - px
                dy = pos[e, k, 1] - py
                in_range = np.sqrt(dx * dx + dy * dy) <= shoot[e, i]
            true_avail[e, i, first + j] = in_range
            avail[e, i, first + j] = in_range or not action_mask


@njit(cache=True)
def _tag_enemies(e, i, n, seen, prob, obs_enemies, tag_owner, rng):
    """SMACv2's EPO: agent ``i`` tags every enemy it sees that nobody has tagged; each other agent then
    observes that enemy with probability ``prob`` (one draw each, in id order; none when prob is 0 or 1)."""
    m = tag_owner.shape[1]
    for j in range(m):
        if seen[n + j] and tag_owner[e, j] < 0:
            tag_owner[e, j] = i
            obs_enemies[e, j, i] = True
            for a in range(n):
                if a != i and (prob >= 1.0 or (prob > 0.0 and rand_uniform(rng, e) < prob)):
                    obs_enemies[e, j, a] = True


@njit(cache=True)
def _obs_agent(
    e, i, n, pos, health, shield, hmax, last_action, steps, ally_onehot, enemy_onehot, ally_max_shield,
    enemy_max_shield, sight, obs_enemies, tag_owner, rng, fov, walk_out, height, pad, surround, map_x, map_y,
    episode_limit, all_health, own_health, obs_last, obs_path, obs_height, obs_time, s, own_pos, prob,
    fully_obs, n_fov, half, conic, true_avail, dist, dx, dy, seen, o,
):  # fmt: skip
    """The observation ``o`` (O,) of living agent ``i`` of env ``e`` (layout: smacv2/features.py)."""
    U = pos.shape[1]
    m = U - n
    A = true_avail.shape[2]
    b = ally_onehot.shape[2]
    hs = (1 + s) if all_health else 0
    fe = 4 + hs + b
    fa = fe + (A if obs_last else 0)
    px, py = pos[e, i, 0], pos[e, i, 1]
    for k in range(U):
        dx[k] = pos[e, k, 0] - px
        dy[k] = pos[e, k, 1] - py
        dist[k] = np.sqrt(dx[k] * dx[k] + dy[k] * dy[k])
    r = sight[e, i]
    fx, fy = fov[e, i, 0], fov[e, i, 1]
    for k in range(U):  # what agent i perceives: within sight, or with conic_fov inside its cone
        seen[k] = _in_cone(px, py, fx, fy, pos[e, k, 0], pos[e, k, 1], r, half) if conic else dist[k] < r
    move_block(o, true_avail[e, i], px, py, walk_out, height, pad, surround, obs_path, obs_height)
    col = 4 + (8 if obs_path else 0) + (9 if obs_height else 0)
    _tag_enemies(e, i, n, seen, prob, obs_enemies, tag_owner, rng)
    # enemies: SMACv2 blanks the whole block up to the last enemy this agent does not observe
    last_hidden = -1
    for j in range(m):
        if not obs_enemies[e, j, i]:
            last_hidden = j
    for j in range(last_hidden + 1, m):
        k = n + j
        if health[e, k] > 0 and (seen[k] or fully_obs):
            c = col + j * fe
            o[c] = true_avail[e, i, 6 + n_fov + j]
            o[c + 1] = dist[k] / r
            o[c + 2] = dx[k] / r
            o[c + 3] = dy[k] / r
            c += 4
            if all_health:
                o[c] = health[e, k] / hmax[e, k]
                c += 1
                if s:
                    o[c] = shield[e, k] / enemy_max_shield[e, j]
                    c += 1
            for t in range(b):
                o[c + t] = enemy_onehot[e, j, t]
    col += m * fe
    slot = 0  # the other agents in increasing id
    for j in range(n):
        if j == i:
            continue
        if health[e, j] > 0 and (seen[j] or fully_obs):
            c = col + slot * fa
            o[c] = 1.0
            o[c + 1] = dist[j] / r
            o[c + 2] = dx[j] / r
            o[c + 3] = dy[j] / r
            c += 4
            if all_health:
                o[c] = health[e, j] / hmax[e, j]
                c += 1
                if s:
                    o[c] = shield[e, j] / ally_max_shield[e, j]
                    c += 1
            for t in range(b):
                o[c + t] = ally_onehot[e, j, t]
            if obs_last:
                for a in range(A):
                    o[c + b + a] = last_action[e, j, a]
        slot += 1
    col += (n - 1) * fa
    if own_health:
        o[col] = health[e, i] / hmax[e, i]
        col += 1
        if s:
            o[col] = shield[e, i] / ally_max_shield[e, i]
            col += 1
    if own_pos:
        o[col] = px / map_x
        o[col + 1] = py / map_y
        col += 2
    if conic:
        o[col] = fx
        o[col + 1] = fy
        col += 2
    for t in range(b):
        o[col + t] = ally_onehot[e, i, t]
    if obs_time:
        o[col + b] = steps[e] / episode_limit


@njit(cache=True)
def _observe_env(e, n, per_env, shared, true_avail, dist, dx, dy, seen, order, avail, obs, state):
    """Env ``e``: EPO bookkeeping, availability, observations in SMACv2's shuffled visiting order, state."""
    (pos, health, shield, cooldown, energy, hmax, last_action, steps, medivac, ally_onehot, enemy_onehot,
     ally_max_shield, enemy_max_shield, ally_max_cd, sight, shoot, obs_enemies, tag_owner,
     rng, fov) = per_env  # fmt: skip
    (walk_in, walk_out, height, pad, surround, dirs, map_x, map_y, ext_x, ext_y, episode_limit, all_health,
     own_health, obs_last, obs_path, obs_height, obs_time, state_last, state_time, s, own_pos, prob,
     fully_obs, action_mask, n_fov, half, conic) = shared  # fmt: skip
    avail[e] = 0
    obs[e] = 0.0
    _epo_bookkeeping(e, n, health, steps, obs_enemies, tag_owner)
    _avail_env(
        e, n, pos, health, medivac, shoot, fov, walk_in, pad, dirs, action_mask, n_fov, half, conic,
        true_avail, avail,
    )  # fmt: skip
    for k in range(n):  # SMACv2's get_obs shuffles the agents: Fisher-Yates on the observation stream
        order[k] = k
    for k in range(n - 1, 0, -1):
        j = rand_int(rng, e, k + 1)
        order[k], order[j] = order[j], order[k]
    for q in range(n):
        i = order[q]
        if health[e, i] <= 0:
            if obs_time:  # SMACv2 appends the time step to a dead agent's zeros too
                obs[e, i, obs.shape[2] - 1] = steps[e] / episode_limit
            continue
        _obs_agent(
            e, i, n, pos, health, shield, hmax, last_action, steps, ally_onehot, enemy_onehot,
            ally_max_shield, enemy_max_shield, sight, obs_enemies, tag_owner, rng, fov, walk_out, height,
            pad, surround, map_x, map_y, episode_limit, all_health, own_health, obs_last, obs_path,
            obs_height, obs_time, s, own_pos, prob, fully_obs, n_fov, half, conic, true_avail, dist, dx, dy,
            seen, obs[e, i],
        )  # fmt: skip
    if state.shape[1] > 0:
        state[e] = 0.0
        fill_state(
            e, n, pos, health, shield, cooldown, energy, hmax[e], last_action, steps, medivac[e],
            ally_onehot[e], enemy_onehot[e], ally_max_shield[e], enemy_max_shield[e], ally_max_cd[e],
            map_x, map_y, ext_x, ext_y, episode_limit, state_last, state_time, s, s, fov[e], conic, state[e],
        )  # fmt: skip


@njit(cache=True)
def v2_observe_kernel(active, n, per_env, shared, true_avail, avail, obs, state):
    """Availability (E, n, A) int64 (``true_avail`` range-checked, ``avail`` the action mask), observations
    (E, n, O) float32 and state (E, S) float32 (0 columns with obs_instead_of_state) of the envs with
    ``active[e]``, in place; the EPO tags and observation streams in ``per_env`` advance.
    ``per_env``/``shared``: the tuples built by ``V2Features``."""
    U = per_env[0].shape[1]
    dist, dx, dy = np.empty(U), np.empty(U), np.empty(U)
    seen = np.zeros(U, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    for e in range(active.shape[0]):
        if active[e]:
            _observe_env(e, n, per_env, shared, true_avail, dist, dx, dy, seen, order, avail, obs, state)


@njit(cache=True, parallel=True)
def v2_observe_kernel_parallel(active, n, per_env, shared, true_avail, avail, obs, state):
    """:func:`v2_observe_kernel` with the envs spread over Numba's threads (each env owns its stream and
    scratch, so the results are the same)."""
    U = per_env[0].shape[1]
    for p in prange(active.shape[0]):
        e = np.int64(p)  # prange's index is unsigned: the per-env code keeps one type (sim/jit.py)
        if active[e]:
            dist, dx, dy = np.empty(U), np.empty(U), np.empty(U)
            seen = np.zeros(U, dtype=np.bool_)
            order = np.empty(n, dtype=np.int64)
            _observe_env(e, n, per_env, shared, true_avail, dist, dx, dy, seen, order, avail, obs, state)


@njit(cache=True)
def v2_reward_end_kernel(
    n, prev_health, prev_shield, health, shield, dead, mmm, ally_medivac, enemy_medivac, sparse,
    only_positive, death_value, neg_scale, reward, code, dead_allies, dead_enemies,
):  # fmt: skip
    """SMAC's reward/end kernel (:func:`reward_end_kernel`, SMACv2's clip at zero) env by env, each with its
    own Medivac masks ``ally_medivac`` (E, n) / ``enemy_medivac`` (E, m)."""
    for e in range(health.shape[0]):
        reward_end_kernel(
            n, prev_health[e : e + 1], prev_shield[e : e + 1], health[e : e + 1], shield[e : e + 1],
            dead[e : e + 1], mmm, ally_medivac[e], enemy_medivac[e], sparse, only_positive, np.bool_(True),
            death_value, neg_scale, reward[e : e + 1], code[e : e + 1],
            dead_allies[e : e + 1], dead_enemies[e : e + 1],
        )  # fmt: skip
