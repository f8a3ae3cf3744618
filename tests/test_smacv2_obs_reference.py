"""Parity of ``V2Observer`` (marl/envs/smac/smacv2/features.py) with a literal, loop-by-loop reading of
smacv2's ``get_obs_agent`` and the EPO bookkeeping of its ``step`` (prob_obs_enemy 0 or 1, so that the only
randomness is the agents' visiting order, which both take from the same stream)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marl.envs.smac.options import MAX_SHIELD, SmacOptions
from marl.envs.smac.smacv2.features import V2Flags, visiting_order
from marl.envs.smac.smacv2.observer import V2Observer

ORDER = {"P": ("stalker", "zealot", "colossus"), "T": ("marine", "marauder", "medivac")}


def reference_obs(
    ob, types, etypes, pos, health, hmax, shield, move, true_avail, last, frac, order, obs_en, tags
):
    """smacv2 get_obs_agent for the agents in ``order``, updating obs_en (m, n) and tags (m,) as it does."""
    n, m, o, f = ob.n, ob.m, ob.opts, ob.flags
    out = np.zeros((n, ob.sizes["obs"]), dtype=np.float32)
    bits, sh = 3, int(ob.shield)
    for i in order:
        if health[i] <= 0:
            if o.obs_timestep_number:
                out[i, -1] = frac
            continue
        x, y = pos[i]
        sight = ob.sight[i]
        nf_e = 4 + bits + (1 + sh) * o.obs_all_health
        enemy = np.zeros((m, nf_e), dtype=np.float32)
        for e in range(m):
            ex, ey = pos[n + e]
            d = math.hypot(ex - x, ey - y)
            visible = d < sight
            if visible and tags[e] is None:
                obs_en[e, i] = 1
                tags[e] = i
                for a in range(n):
                    if a != i and f.prob_obs_enemy >= 1.0:
                        obs_en[e, a] = 1
            if obs_en[e, i] == 0:
                visible = False
            if (visible and health[n + e] > 0) or (health[n + e] > 0 and f.fully_observable):
                enemy[e, 0] = true_avail[i, 6 + e]
                enemy[e, 1], enemy[e, 2], enemy[e, 3] = d / sight, (ex - x) / sight, (ey - y) / sight
                ind = 4
                if o.obs_all_health:
                    enemy[e, ind] = health[n + e] / hmax[n + e]
                    ind += 1
                    if sh:
                        enemy[e, ind] = shield[n + e] / MAX_SHIELD[etypes[e]]
                        ind += 1
                enemy[e, ind + ORDER[ob.race][:3].index(etypes[e])] = 1
            if obs_en[e, i] == 0:
                enemy = np.zeros((m, nf_e), dtype=np.float32)
        nf_a = 4 + bits + (1 + sh) * o.obs_all_health + ob.sizes["n_actions"] * o.obs_last_action
        ally = np.zeros((n - 1, nf_a), dtype=np.float32)
        for k, j in enumerate([j for j in range(n) if j != i]):
            ax, ay = pos[j]
            d = math.hypot(ax - x, ay - y)
            if (d < sight and health[j] > 0) or (health[j] > 0 and f.fully_observable):
                ally[k, 0] = 1
                ally[k, 1], ally[k, 2], ally[k, 3] = d / sight, (ax - x) / sight, (ay - y) / sight
                ind = 4
                if o.obs_all_health:
                    ally[k, ind] = health[j] / hmax[j]
                    ind += 1
                    if sh:
                        ally[k, ind] = shield[j] / MAX_SHIELD[types[j]]
                        ind += 1
                ally[k, ind + ORDER[ob.race].index(types[j])] = 1
                ind += bits
                if o.obs_last_action:
                    ally[k, ind:] = last[j]
        own = [health[i] / hmax[i]] + ([shield[i] / MAX_SHIELD[types[i]]] if sh else [])
        own += [x / 32.0, y / 32.0] if f.obs_own_pos else []
        own += list(np.eye(3)[ORDER[ob.race].index(types[i])])
        row = np.concatenate([move[i], enemy.ravel(), ally.ravel(), np.array(own, dtype=np.float32)])
        if o.obs_timestep_number:
            row = np.append(row, frac)
        out[i] = row
    return out


def reference_after_step(n, health, obs_en, tags):
    """smacv2 step: drop the tags of enemies tagged by dead agents, and of dead enemies."""
    for a in range(n):
        if health[a] <= 0:
            for e in range(len(tags)):
                if tags[e] == a:
                    tags[e] = None
                    obs_en[e, :] = 0
                    obs_en[:, a] = 0
    for e in range(len(tags)):
        if health[n + e] <= 0:
            tags[e] = None
            obs_en[e, :] = 0


CASES = [
    ("P", {}, V2Flags()),
    ("T", {"obs_last_action": True, "obs_timestep_number": True}, V2Flags(prob_obs_enemy=0.0)),
    ("P", {}, V2Flags(fully_observable=True, use_unit_ranges=False)),
    ("T", {"obs_all_health": False, "obs_own_health": True}, V2Flags(obs_own_pos=False, prob_obs_enemy=0.0)),
]


@pytest.mark.parametrize(("race", "opt", "flags"), CASES)
def test_observer_matches_the_smacv2_loops(race: str, opt: dict, flags: V2Flags) -> None:
    rng = np.random.default_rng(7)
    opts = SmacOptions(**opt)
    for _trial in range(4):
        n = int(rng.integers(2, 7))
        m = int(rng.integers(n, 8))  # terran: a Medivac's heal of ally j is action 6 + j
        types = tuple(rng.choice(ORDER[race], size=n))
        etypes = tuple(rng.choice(ORDER[race], size=m))
        onehot = lambda ts: np.eye(3)[[ORDER[race].index(t) for t in ts]]  # noqa: E731
        ob = V2Observer(
            types, etypes, onehot(types), onehot(etypes), race, (32, 32), opts, flags, race == "T"
        )
        obs_en, tags = np.zeros((m, n)), [None] * m
        hmax = rng.uniform(40, 200, size=n + m)
        health = hmax.copy()
        shield = np.array([MAX_SHIELD.get(t, 0.0) for t in types + etypes]) * rng.uniform(0, 1, n + m)
        for step in range(12):
            pos = rng.uniform(0, 32, size=(n + m, 2))
            if step:
                health = np.where(rng.random(n + m) < 0.1, 0.0, health * rng.uniform(0.8, 1.0, n + m))
                ob.after_step(health)
                reference_after_step(n, health, obs_en, tags)
            move = rng.integers(0, 2, size=(n, ob.move_size)).astype(np.float32)
            true_avail = ob.avail(pos, health, np.tile([0, 1, 1, 1, 1, 1], (n, 1)), check_range=True)
            last = np.eye(ob.sizes["n_actions"])[rng.integers(0, ob.sizes["n_actions"], n)]
            seed = int(rng.integers(1 << 30))
            got = ob.observe(
                pos, health, hmax, shield, move, true_avail, last, step / 200, np.array([seed], np.uint64)
            )
            order = visiting_order(np.array([seed], np.uint64), n)  # the observer's first draws
            want = reference_obs(
                ob,
                types,
                etypes,
                pos,
                health,
                hmax,
                shield,
                move,
                true_avail,
                last,
                step / 200,
                order,
                obs_en,
                tags,
            )
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
            np.testing.assert_array_equal(ob.obs_enemies, obs_en.astype(bool))
