"""Replays of recorded episodes in the embedded engine: the game's ally actions, step by step.

The engine has no call that places units, so after ``BatchedSimEngine.reset`` the benchmark writes the
recorded first-state positions into the engine's state array ``S`` (columns ``S_X``/``S_Y``, and the
allies' order point ``S_OX``/``S_OY``, which an idle unit keeps at its own position); health, cooldowns
and the enemies' attack-move order are the reset's. Ally ``i`` and enemy ``j`` of the engine then stand
where SMAC's agent ``i`` and enemy ``j`` stood, so the recorded ids need no mapping. With the engine's own
spawns (``placed=False``) the recorded units are paired with the engine's by the closest assignment of
their first positions. Nothing under ``marl/`` is changed; the engine's candidate targeting rules
(``marl/envs/smac/sim/variants.py``, not its default) can be chosen per replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from benchmarks.fidelity.recorded_episodes import Episode, unpack
from marl.envs.smac.sim.engine import BatchedSimEngine
from marl.envs.smac.sim.units import S_HP, S_OX, S_OY, S_TGT, S_X, S_Y
from marl.envs.smac.types import MapSpec

RUNNING, WON, LOST, DRAW, TIMEOUT = 0, 1, 2, 3, 4  # engine.battle_status codes, plus the episode limit
DIVERGENCE_STEPS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30)
SUBS = ("dead_in_engine", "alive_in_engine_only", "attack_unavailable", "move_unavailable")


def split_index(S_UC: np.ndarray, n: int) -> float | None:
    """Distinct targets of the living enemies / min(enemies with a target, living allies), or None."""
    hp = S_UC[:, S_HP]
    if (hp[:n] <= 0).sum() == 0 or (hp[:n] > 0).sum() < 2:
        return None
    tgt = S_UC[n:, S_TGT][hp[n:] > 0]
    tgt = tgt[tgt >= 0]
    if len(tgt) < 2:
        return None
    return len(set(tgt.tolist())) / min(len(tgt), int((hp[:n] > 0).sum()))


@dataclass
class Replays:
    """R = episodes x seeds replays (replay r is episode r // seeds), units in the recording's order."""

    hp_RTU: np.ndarray  # (R, limit + 1, n + m) health fractions s_0 .. s_L (NaN after the end)
    pos_RTU2: np.ndarray  # (R, limit + 1, n + m, 2) world positions (NaN if dead or after the end)
    length_R: np.ndarray  # (R,) steps until the engine's episode ended
    status_R: np.ndarray  # (R,) WON, LOST, DRAW or TIMEOUT
    seeds: int
    subs: dict[str, int] = field(default_factory=dict)  # recorded actions replaced by no-op, by cause
    actions: int = 0  # recorded agent actions replayed
    past_recording: int = 0  # engine steps after the recorded actions ran out (all no-op)
    target_split_R: list[list[float]] = field(default_factory=list)  # split_index values


def _pairing(rec_K2: np.ndarray, eng_K2: np.ndarray) -> np.ndarray:
    """(K,) the engine unit paired with each recorded unit: the assignment of least total distance."""
    cost = np.linalg.norm(rec_K2[:, None] - eng_K2[None], axis=-1)
    rows, cols = linear_sum_assignment(cost)
    return cols[np.argsort(rows)]


def replay(
    episodes: list[Episode],
    spec: MapSpec,
    extent: float,
    placed: bool = True,
    seeds: int = 1,
    seed: int = 0,
    rules: np.ndarray | None = None,
) -> Replays:
    """Step the engine with each episode's recorded ally actions (``seeds`` replays per episode).

    An action the engine does not allow at that moment (SMAC's available actions, ``avail_actions``) is
    replaced by no-op, which keeps the unit's current order in the engine, and counted by cause. When the
    recorded actions run out before the engine's episode ends, every ally no-ops until it ends. ``rules``:
    candidate targeting rules of the enemies (``variants.parse_rules``; ``None``: the engine's default).
    """
    n, m = spec.n_agents, spec.n_enemies
    R, L = len(episodes) * seeds, spec.episode_limit
    eng = BatchedSimEngine(spec, R, seed, rules=rules)
    eng.reset()
    centre = np.asarray(spec.map_size, dtype=float) / 2
    amap = np.tile(np.arange(n), (R, 1))
    emap = np.tile(np.arange(m), (R, 1))
    for r in range(R):
        u = unpack(episodes[r // seeds].state_TS[:1], n, m, centre, extent)
        ally, enemy = u["ally_pos"][0], u["enemy_pos"][0]
        if placed:
            eng.S[r, :n, S_X : S_Y + 1] = ally
            eng.S[r, :n, S_OX : S_OY + 1] = ally
            eng.S[r, n:, S_X : S_Y + 1] = enemy
        else:
            amap[r] = _pairing(ally, eng.S[r, :n, S_X : S_Y + 1])
            emap[r] = _pairing(enemy, eng.S[r, n:, S_X : S_Y + 1])
    order = np.concatenate([amap, n + emap], axis=1)  # engine unit of each recorded unit
    hmax = eng.health_max[order]
    out = Replays(
        np.full((R, L + 1, n + m), np.nan),
        np.full((R, L + 1, n + m, 2), np.nan),
        np.zeros(R, dtype=np.int64),
        np.zeros(R, dtype=np.int64),
        seeds,
        dict.fromkeys(SUBS, 0),
        target_split_R=[[] for _ in range(R)],
    )

    def record(t: int, rows: np.ndarray) -> None:
        S = eng.S[rows[:, None], order[rows]]  # (k, n + m, N_STATE) in the recording's order
        hp = S[..., S_HP] / hmax[rows]
        pos = S[..., S_X : S_Y + 1].copy()
        pos[hp <= 0] = np.nan
        out.hp_RTU[rows, t], out.pos_RTU2[rows, t] = hp, pos

    running = np.ones(R, dtype=bool)
    record(0, np.arange(R))
    for t in range(L):
        if not running.any():
            break
        avail = eng.avail_actions()
        act = np.zeros((R, n), dtype=np.int64)
        for r in np.flatnonzero(running):
            ep = episodes[r // seeds]
            if t >= len(ep.actions_TN):
                out.past_recording += 1
                continue
            for i in range(n):
                a, j = int(ep.actions_TN[t, i]), amap[r, i]
                a_eng = a if a < 6 else 6 + int(emap[r, a - 6])
                out.actions += 1
                if avail[r, j, a_eng]:
                    act[r, j] = a_eng
                    continue
                alive = eng.S[r, j, S_HP] > 0
                cause = "alive_in_engine_only" if a == 0 else "dead_in_engine" if not alive else None
                cause = cause or ("attack_unavailable" if a >= 6 else "move_unavailable")
                out.subs[cause] += 1
        eng.step(act, running)
        stepped = np.flatnonzero(running)
        record(t + 1, stepped)
        status = eng.battle_status()
        ended = running & ((status != RUNNING) | (t + 1 >= L))
        out.status_R[ended] = np.where(status[ended] != RUNNING, status[ended], TIMEOUT)
        out.length_R[ended] = t + 1
        running &= ~ended
        for r in np.flatnonzero(running):
            s = split_index(eng.S[r], n)
            if s is not None:
                out.target_split_R[r].append(s)
    return out


def divergence(
    episodes: list[Episode], reps: Replays, n: int, m: int, extent: float, centre: np.ndarray
) -> dict:
    """Per step t: mean |health fraction| difference (allies, enemies) and mean distance between the game's
    and the engine's positions of units alive in both (game units), over replays where both have s_t."""
    out = {}
    for t in DIVERGENCE_STEPS:
        a_hp, e_hp, a_pos, e_pos = [], [], [], []
        for r in range(len(reps.length_R)):
            ep = episodes[r // reps.seeds]
            if t >= len(ep.actions_TN) or t > reps.length_R[r]:
                continue
            g = unpack(ep.state_TS[t : t + 1], n, m, centre, extent)
            hp_g = np.concatenate([g["ally_hp"][0], g["enemy_hp"][0]])
            pos_g = np.concatenate([g["ally_pos"][0], g["enemy_pos"][0]])
            d_hp = np.abs(hp_g - reps.hp_RTU[r, t])
            d_pos = np.linalg.norm(pos_g - reps.pos_RTU2[r, t], axis=-1)
            a_hp.append(d_hp[:n].mean())
            e_hp.append(d_hp[n:].mean())
            a_pos.extend(d_pos[:n][~np.isnan(d_pos[:n])])
            e_pos.extend(d_pos[n:][~np.isnan(d_pos[n:])])
        mean = lambda x: float(np.mean(x)) if len(x) else float("nan")  # noqa: E731
        out[t] = {
            "n": len(a_hp),
            "ally_hp": mean(a_hp),
            "enemy_hp": mean(e_hp),
            "ally_pos": mean(a_pos),
            "enemy_pos": mean(e_pos),
        }
    return out
