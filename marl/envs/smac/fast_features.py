"""One compiled pass for availability, observations and state of E envs (the hot path of every env step).

Why it exists: at one env, the NumPy implementation in ``features.py`` is ~70 small NumPy calls per step
(~1 µs each), which is most of a full env step and made the full step only ~1.2x JaxMARL's SMAX
(``benchmarks/results/sim_throughput.md``). This kernel computes the same numbers in one call. The NumPy
methods (``SmacFeatures.batch_avail/batch_obs/batch_state``) stay the reference: the tests compare the two
element for element on every map type and flag combination. Same arithmetic, same order (float64, cast
to float32 on store), so the values are identical; an invisible/dead entry may be +0.0 here where
NumPy's masking multiply leaves -0.0.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from marl.envs.smac.sim.jit import engine_jit


@engine_jit
def _cell(padded, x, y, pad):
    """Value of a padded grid at the integer cell (x, y); indices clamped into the padding."""
    ix = min(max(x + pad, 0), padded.shape[0] - 1)
    iy = min(max(y + pad, 0), padded.shape[1] - 1)
    return padded[ix, iy]


@engine_jit
def move_block(o, avail_row, px, py, walk_out, height, pad, surround, obs_path, obs_height):
    """SMAC's move block of an observation ``o`` at (px, py): the 4 move flags (``avail_row[2:6]``), then the
    surrounding pathing (8) and heights (8 + own cell) when on."""
    for d in range(4):
        o[d] = avail_row[2 + d]
    col = 4
    cx, cy = int(np.trunc(px)), int(np.trunc(py))
    if obs_path:
        for s in range(8):
            o[col + s] = _cell(walk_out, cx + surround[s, 0], cy + surround[s, 1], pad)
        col += 8
    if obs_height:
        for s in range(8):
            o[col + s] = _cell(height, cx + surround[s, 0], cy + surround[s, 1], pad)
        o[col + 8] = _cell(height, cx, cy, pad)


@njit(cache=True)
def observe_scratch(u):
    """Work arrays of :func:`observe_rows` for ``u`` units: dist, dx, dy (u,) and a zero field of view
    (u, 2)."""
    return np.empty(u), np.empty(u), np.empty(u), np.zeros((u, 2))


@njit(cache=True)
def observe_kernel(n, pos, *rest):
    """:func:`observe_rows` with its work arrays allocated here (the same arguments, less ``tmp``)."""
    return observe_rows(observe_scratch(pos.shape[1]), n, pos, *rest)


@engine_jit
def observe_rows(
    tmp,
    n,
    pos,
    health,
    shield,
    cooldown,
    energy,
    hmax,
    last_action,
    steps,  # noqa: C901
    medivac,
    ally_onehot,
    enemy_onehot,
    ally_max_shield,
    enemy_max_shield,
    ally_max_cd,
    walk_in,
    walk_out,
    height,
    pad,
    surround,
    dirs,
    map_x,
    map_y,
    ext_x,
    ext_y,
    episode_limit,
    all_health,
    own_health,
    obs_last,
    obs_path,
    obs_height,
    obs_time,
    state_last,
    state_time,
    s_a,
    s_e,
    sight,
    shoot,
    avail,
    obs,
    state,
):
    """Fill ``avail`` (E, n, A) int64, ``obs`` (E, n, O) float32 and ``state`` (E, S) float32 (all zeroed
    by the caller; ``state`` may have 0 columns when obs_instead_of_state). Layout as features.py.
    ``tmp``: :func:`observe_scratch` (it allocates nothing, so it is built without Numba's reference
    counts: :mod:`marl.envs.smac.sim.jit`)."""
    E, U = pos.shape[0], pos.shape[1]
    m = U - n
    per_env_max = hmax.shape[0] > 1  # hmax: (E, U) or (1, U)
    A = avail.shape[2]
    b = ally_onehot.shape[1]
    fe = 4 + b + (1 + s_e if all_health else 0)
    fa = 4 + b + (1 + s_a if all_health else 0) + (A if obs_last else 0)
    move = 4 + (8 if obs_path else 0) + (9 if obs_height else 0)
    dist, dx, dy, no_fov = tmp  # no_fov: SMAC has no field of view (fill_state's conic=False)
    for e in range(E):
        h = hmax[e] if per_env_max else hmax[0]
        for i in range(n):
            if health[e, i] <= 0:
                avail[e, i, 0] = 1
                continue
            px, py = pos[e, i, 0], pos[e, i, 1]
            for k in range(U):
                dx[k] = pos[e, k, 0] - px
                dy[k] = pos[e, k, 1] - py
                dist[k] = np.sqrt(dx[k] * dx[k] + dy[k] * dy[k])
            # availability
            avail[e, i, 1] = 1
            for d in range(4):
                x = int(np.trunc(px + dirs[d, 0]))
                y = int(np.trunc(py + dirs[d, 1]))
                avail[e, i, 2 + d] = _cell(walk_in, x, y, pad)
            if medivac[i]:
                for j in range(n):
                    if dist[j] <= shoot and health[e, j] > 0 and not medivac[j]:
                        avail[e, i, 6 + j] = 1
            else:
                for j in range(m):
                    if dist[n + j] <= shoot and health[e, n + j] > 0:
                        avail[e, i, 6 + j] = 1
            # observation: move block
            o = obs[e, i]
            move_block(o, avail[e, i], px, py, walk_out, height, pad, surround, obs_path, obs_height)
            col = move
            # enemy block
            for j in range(m):
                k = n + j
                if dist[k] < sight and health[e, k] > 0:
                    base = col + j * fe
                    o[base] = avail[e, i, 6 + j]
                    o[base + 1] = dist[k] / sight
                    o[base + 2] = dx[k] / sight
                    o[base + 3] = dy[k] / sight
                    c = base + 4
                    if all_health:
                        o[c] = health[e, k] / h[k]
                        c += 1
                        if s_e:
                            o[c] = shield[e, k] / enemy_max_shield[j]
                            c += 1
                    for t in range(b):
                        o[c + t] = enemy_onehot[j, t]
            col += m * fe
            # ally block: the other agents in increasing id
            slot = 0
            for j in range(n):
                if j == i:
                    continue
                if dist[j] < sight and health[e, j] > 0:
                    base = col + slot * fa
                    o[base] = 1.0
                    o[base + 1] = dist[j] / sight
                    o[base + 2] = dx[j] / sight
                    o[base + 3] = dy[j] / sight
                    c = base + 4
                    if all_health:
                        o[c] = health[e, j] / h[j]
                        c += 1
                        if s_a:
                            o[c] = shield[e, j] / ally_max_shield[j]
                            c += 1
                    for t in range(b):
                        o[c + t] = ally_onehot[j, t]
                    if obs_last:
                        for a in range(A):
                            o[c + b + a] = last_action[e, j, a]
                slot += 1
            col += (n - 1) * fa
            # own block
            if own_health:
                o[col] = health[e, i] / h[i]
                col += 1
                if s_a:
                    o[col] = shield[e, i] / ally_max_shield[i]
                    col += 1
            for t in range(b):
                o[col + t] = ally_onehot[i, t]
            if obs_time:
                o[col + b] = steps[e] / episode_limit
        if state.shape[1] > 0:
            fill_state(
                e, n, pos, health, shield, cooldown, energy, h, last_action, steps, medivac, ally_onehot,
                enemy_onehot, ally_max_shield, enemy_max_shield, ally_max_cd, map_x, map_y, ext_x, ext_y,
                episode_limit, state_last, state_time, s_a, s_e, no_fov, np.bool_(False), state[e],
            )  # fmt: skip


@engine_jit
def fill_state(
    e,
    n,
    pos,
    health,
    shield,
    cooldown,
    energy,
    h,
    last_action,
    steps,
    medivac,
    ally_onehot,
    enemy_onehot,
    ally_max_shield,
    enemy_max_shield,
    ally_max_cd,
    map_x,
    map_y,
    ext_x,
    ext_y,
    episode_limit,
    state_last,
    state_time,
    s_a,
    s_e,
    fov,
    conic,
    st,
):
    """SMAC's state of env ``e`` into ``st`` (S,), zeroed by the caller (layout as features.py); ``h`` (U,)
    health maxima, the per-unit arrays are this env's. Positions are taken from the map's centre
    (``map_x / 2``, ``map_y / 2``) and divided by the playable area's width and height ``ext_x``, ``ext_y``
    (SMAC's ``max_distance_x``/``_y``). With ``conic`` (SMACv2's conic_fov) each agent's row
    also holds its field-of-view direction ``fov`` (n, 2) after its shield."""
    m = pos.shape[1] - n
    A = last_action.shape[2]
    b = ally_onehot.shape[1]
    c2 = 2 if conic else 0
    fsa = 4 + s_a + c2 + b
    fse = 3 + s_e + b
    cx, cy = map_x / 2, map_y / 2
    for i in range(n):
        if health[e, i] > 0:
            base = i * fsa
            st[base] = health[e, i] / h[i]
            st[base + 1] = (energy[e, i] if medivac[i] else cooldown[e, i]) / ally_max_cd[i]
            st[base + 2] = (pos[e, i, 0] - cx) / ext_x
            st[base + 3] = (pos[e, i, 1] - cy) / ext_y
            if s_a:
                st[base + 4] = shield[e, i] / ally_max_shield[i]
            if conic:
                st[base + 4 + s_a] = fov[i, 0]
                st[base + 5 + s_a] = fov[i, 1]
            for t in range(b):
                st[base + 4 + s_a + c2 + t] = ally_onehot[i, t]
    off = n * fsa
    for j in range(m):
        k = n + j
        if health[e, k] > 0:
            base = off + j * fse
            st[base] = health[e, k] / h[k]
            st[base + 1] = (pos[e, k, 0] - cx) / ext_x
            st[base + 2] = (pos[e, k, 1] - cy) / ext_y
            if s_e:
                st[base + 3] = shield[e, k] / enemy_max_shield[j]
            for t in range(b):
                st[base + 3 + s_e + t] = enemy_onehot[j, t]
    off += m * fse
    if state_last:
        for i in range(n):
            for a in range(A):
                st[off + i * A + a] = last_action[e, i, a]
    if state_time:
        st[st.shape[0] - 1] = steps[e] / episode_limit


@engine_jit
def reward_end_kernel(
    n,
    prev_health,
    prev_shield,
    health,
    shield,
    dead,
    mmm,
    ally_medivac,
    enemy_medivac,
    sparse,
    only_positive,
    clip_at_zero,
    death_value,
    neg_scale,
    reward,
    code,
    dead_allies,
    dead_enemies,
):
    """SMAC's dense reward (before the end bonus), end code and dead counts of E envs (added to
    ``dead_allies``/``dead_enemies``, each (E,)), updating the death tracker ``dead`` (E, U) in place; the
    compiled twin of ``batch_reward`` + ``batch_end_code`` (damage summed unit by unit, so it may differ from
    NumPy's pairwise sums in the last bit)."""
    E, U = health.shape[0], health.shape[1]
    for e in range(E):
        dmg_a = dmg_e = 0.0
        died_a = died_e = alive_a = alive_e = 0
        fighter_a = fighter_e = 0  # living non-Medivacs (MMM end rules)
        for k in range(U):
            now_dead = health[e, k] <= 0
            if not sparse and not dead[e, k]:  # SMAC leaves the trackers alone with sparse rewards
                prev_hp = prev_health[e, k] + prev_shield[e, k]
                if now_dead:
                    d = prev_hp
                    dead[e, k] = True
                else:
                    d = prev_hp - health[e, k] - shield[e, k]
                if k < n:
                    dmg_a += d
                    died_a += now_dead
                else:
                    dmg_e += d
                    died_e += now_dead
            if k < n:
                alive_a += not now_dead
                fighter_a += (not now_dead) and not ally_medivac[k]
                dead_allies[e] += now_dead
            else:
                alive_e += not now_dead
                fighter_e += (not now_dead) and not enemy_medivac[k - n]
                dead_enemies[e] += now_dead
        if sparse:
            reward[e] = 0.0
        elif only_positive:
            gain = dmg_e + death_value * died_e
            reward[e] = max(gain, 0.0) if clip_at_zero else abs(gain)
        else:
            reward[e] = dmg_e + (death_value * died_e - death_value * neg_scale * died_a) - neg_scale * dmg_a
        loss = (alive_a == 0 and alive_e > 0) or (mmm and fighter_a == 0)
        win = (alive_a > 0 and alive_e == 0) or (mmm and alive_e == 1 and fighter_e == 0)
        if loss:
            code[e] = -1
        elif win:
            code[e] = 1
        elif alive_a == 0 and alive_e == 0:
            code[e] = 0
        else:
            code[e] = 2


@njit(cache=True, parallel=True)
def observe_kernel_parallel(
    chunks, n, pos, health, shield, cooldown, energy, hmax, last_action, steps, shared, avail, obs, state
):
    """:func:`observe_kernel` with the envs split into ``chunks`` contiguous chunks run on Numba's threads;
    ``shared`` is the tuple of map/option arguments (``SmacFeatures._kernel_args``). Same numbers as the
    serial call."""
    E = pos.shape[0]
    for c in prange(chunks):
        lo, hi = c * E // chunks, (c + 1) * E // chunks
        h = hmax[lo:hi] if hmax.shape[0] > 1 else hmax
        observe_rows(  # not observe_kernel: its *rest would make a second compile of it (sim/jit.py)
            observe_scratch(pos.shape[1]),
            n,
            pos[lo:hi],
            health[lo:hi],
            shield[lo:hi],
            cooldown[lo:hi],
            energy[lo:hi],
            h,
            last_action[lo:hi],
            steps[lo:hi],
            *shared,
            avail[lo:hi],
            obs[lo:hi],
            state[lo:hi],
        )
