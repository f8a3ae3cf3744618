"""How the game times a weapon's attacks, read from its own 3m episodes, beside the engine's.

SMAC's state gives every ally's position and weapon cooldown (``weapon_cooldown / 15`` for a marine, in
game loops), so the recorded episodes (og-marl's "3m, Tiny", source D in ``docs/fidelity.md``) show where
an ordered ally stops to shoot (does it stand when its target is within range + both radii, 5.75 on 3m,
and walk first when beyond?) and when each attack started. Two kinds of step are read for the timing, both
with the ally ordered to attack an enemy within 5.65 (so that no walk comes first):

* **fresh**: the ally's weapon is ready (cooldown 0) and its previous action was not an attack. If the
  attack starts ``k`` loops into the 8-loop step with the cooldown ``Period + j`` (``j`` the random delay),
  the next state shows ``Period + j - (8 - k)``.
* **continuing**: the ally kept attacking and its cooldown ``c`` (0 < c < 7 loops) runs out during the
  step. Two readings are tested: the next attack starts at the first loop boundary and its cooldown counts
  from there (``loop``: shows ``Period + j - 8 + ceil(c)``), or it counts from the exact moment the last
  one ran out (``carry``: ``Period + j - 8 + c``).

* **last loop**: an ally that keeps attacking with 7-8 loops of cooldown at a step's start (its weapon
  comes ready in the step's last loop) against one with 6-7: the share that began an attack within the
  step (the cooldown shown after it is above 0); and for the next step, with the same target and 0 shown
  at its start, the delay implied when the new cooldown counts from the moment the last ran out (``Period
  + j - 16 + c``, ``c`` the cooldown at the start of the step before).

Each reading implies a ``j`` for every step; the game's ``RandomDelayMin``/``Max`` (-1 and +2 loops, X)
bound it. The same steps are taken from the engine (3m, allies attacking the nearest enemy they may attack,
read from the engine's SMAC state exactly as from the game's). Results: ``results/recorded_cooldowns.md``.

    .venv/bin/python benchmarks/fidelity/recorded_cooldowns.py <data>/executor_sequence_log_*.tfrecord \\
        --out benchmarks/results/recorded_cooldowns.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity.recorded_episodes import (  # noqa: E402
    MARINE_MAX_CD,
    Episode,
    emit,
    episodes_or_exit,
    parser,
    run_header,
)
from marl.envs.smac.batched_env import BatchedStarCraft2Env  # noqa: E402
from marl.envs.smac.sim.units import CD_JITTER_HI, CD_JITTER_LO, COOLDOWN, PROPS, type_ids  # noqa: E402

N, M = 3, 3  # 3m
MAX_CD = MARINE_MAX_CD  # the state's cooldown is weapon_cooldown / 15
PERIOD = float(PROPS[type_ids(("marine",), True)[0], COOLDOWN])  # X: GuassRifle Period 0.8608 s, in loops
REACH = 5 + 2 * 0.375  # a marine's range + both radii (X)
IN_RANGE = 5.65  # below REACH: the attack starts without a walk
LOOPS = 8


def transitions(episodes: list[Episode], extent: float = 28.0) -> dict[str, np.ndarray]:
    """Every step in which a living ally attacks a living enemy (both alive in the next state too):
    distance at the step's start, cooldowns (loops) at its start and end, whether the previous action was
    an attack, how far the ally moved. Positions from SMAC's 3m state (allies: health, cooldown, x, y;
    enemies: health, x, y)."""
    rows = []
    for ep in episodes:
        s = np.asarray(ep.state_TS, dtype=float)
        ally = s[:, : N * 4].reshape(len(s), N, 4)
        enemy = s[:, N * 4 : N * 4 + M * 3].reshape(len(s), M, 3)
        for t in range(len(s) - 1):
            for i in range(N):
                a = int(ep.actions_TN[t, i])
                j = a - 6
                if j < 0 or min(ally[t, i, 0], ally[t + 1, i, 0], enemy[t, j, 0], enemy[t + 1, j, 0]) <= 0:
                    continue
                d = extent * np.hypot(*(ally[t, i, 2:4] - enemy[t, j, 1:3]))
                prev = int(ep.actions_TN[t - 1, i]) if t > 0 else -1
                moved = extent * np.hypot(*(ally[t + 1, i, 2:4] - ally[t, i, 2:4]))
                before = MAX_CD * ally[t - 1, i, 1] if t > 0 else np.nan
                cds = (MAX_CD * ally[t, i, 1], MAX_CD * ally[t + 1, i, 1])
                rows.append((d, *cds, prev >= 6, moved, before, prev == a))
    r = np.array(rows, dtype=float).reshape(-1, 7)
    return {
        "dist": r[:, 0],
        "cd0": r[:, 1],
        "cd1": r[:, 2],
        "was_attacking": r[:, 3] > 0,
        "moved": r[:, 4],
        "cd_before": r[:, 5],
        "same_target": r[:, 6] > 0,
    }


def engine_episodes(episodes: int, seed: int, n_envs: int = 16) -> list[Episode]:
    """3m on the engine, every ally attacking the nearest enemy it may attack (else stop), recorded as the
    game's episodes are: SMAC's state and the actions taken in it."""
    env = BatchedStarCraft2Env("3m", n_envs, seed)
    env.reset()
    done: list[Episode] = []
    states = [[] for _ in range(n_envs)]
    acts = [[] for _ in range(n_envs)]
    while len(done) < episodes:
        avail = env.get_avail_actions()  # (E, N, A)
        pos = env.units.pos
        a = np.where(avail[..., 0] == 1, 0, 1)  # dead: no-op; else stop
        for e in range(n_envs):
            for i in range(N):
                legal = np.flatnonzero(avail[e, i, 6:])
                if len(legal):
                    d = np.hypot(*(pos[e, N + legal] - pos[e, i]).T)
                    a[e, i] = 6 + legal[np.argmin(d)]
        state = env.get_state()
        for e in range(n_envs):
            states[e].append(state[e].copy())
            acts[e].append(a[e].copy())
        _, term, _ = env.step(a)
        for e in np.flatnonzero(term):
            s, x = np.array(states[e]), np.array(acts[e])
            done.append(Episode(s, x, np.zeros(len(s)), np.ones(len(s)), 0.0, f"engine env {e}"))
            states[e], acts[e] = [], []
        if term.any():
            env.reset_envs(term)
    env.close()
    return done[:episodes]


def laws(tr: dict[str, np.ndarray]) -> dict[str, float]:
    """The fresh and continuing statistics of the module docstring."""
    lo, hi = PERIOD - LOOPS + CD_JITTER_LO + 1, PERIOD - LOOPS + CD_JITTER_HI + 1  # attack at loop 1
    inr = tr["dist"] < IN_RANGE
    fresh = inr & ~tr["was_attacking"] & (tr["cd0"] == 0) & (tr["cd1"] > 0)
    rem = tr["cd1"][fresh]
    body = rem[(rem >= lo - 0.05) & (rem <= hi + 0.05)]
    c = tr["cd0"]
    cont = inr & tr["was_attacking"] & (c > 0.05) & (c < 7) & (tr["cd1"] > 0)
    ready = tr["cd0"] == 0
    near, far = ready & (tr["dist"] < REACH), ready & (tr["dist"] >= REACH) & (tr["dist"] < REACH + 0.35)
    out = {
        "stand n": float(near.sum()),
        "stand share": float(np.mean(tr["moved"][near] < 0.05)),
        "walk n": float(far.sum()),
        "walk share": float(np.mean(tr["moved"][far] >= 0.05)),
        "fresh n": float(fresh.sum()),
        "fresh min": float(rem.min()),
        "fresh in body": float(len(body) / len(rem)),
        "fresh distinct values": float(len(np.unique(np.round(rem, 4)))),
        "fresh KS p": float(stats.kstest(body, "uniform", args=(lo, hi - lo)).pvalue),
        "continuing n": float(cont.sum()),
    }
    for name, at in (("carry", c[cont]), ("loop", np.ceil(c[cont] - 1e-9))):
        jit = tr["cd1"][cont] - (PERIOD - LOOPS + at)
        inside = jit[(jit >= CD_JITTER_LO - 0.2) & (jit <= CD_JITTER_HI + 0.2)]
        out[f"{name} min"], out[f"{name} max"] = float(jit.min()), float(jit.max())
        span = CD_JITTER_HI - CD_JITTER_LO
        out[f"{name} KS p"] = float(stats.kstest(inside, "uniform", args=(CD_JITTER_LO, span)).pvalue)
    # the last loop: a cooldown that runs out in it, then the next step counted from that moment
    kept = inr & tr["was_attacking"]
    late, early = kept & (c > 7) & (c < 8), kept & (c > 6) & (c < 7)
    out["late n"], out["late began"] = float(late.sum()), float(np.mean(tr["cd1"][late] > 0.05))
    out["early n"], out["early began"] = float(early.sum()), float(np.mean(tr["cd1"][early] > 0.05))
    b = tr["cd_before"]
    across = kept & tr["same_target"] & (c == 0) & (b > 7) & (b < 8) & (tr["cd1"] > 0)
    jit = tr["cd1"][across] - (PERIOD - 2 * LOOPS + b[across])
    out["across n"] = float(across.sum())
    inside = jit[(jit >= CD_JITTER_LO - 0.2) & (jit <= CD_JITTER_HI + 0.2)]
    span = CD_JITTER_HI - CD_JITTER_LO
    some = len(inside) > 0  # none where every weapon fires in the last loop (the engine before 2026-11-27)
    out["across min"], out["across max"] = (float(jit.min()), float(jit.max())) if some else (np.nan, np.nan)
    ks = stats.kstest(inside, "uniform", args=(CD_JITTER_LO, span)).pvalue if some else np.nan
    out["across KS p"] = float(ks)
    return out


ROWS = (
    ("stand n", "ready allies ordered to attack an enemy within 5.75 (range + both radii)", "{:.0f}"),
    ("stand share", "  share that stood still (moved under 0.05) and fired", "{:.3f}"),
    ("walk n", "ready allies ordered to attack an enemy 5.75-6.10 away", "{:.0f}"),
    ("walk share", "  share that walked first (moved 0.05 or more)", "{:.3f}"),
    ("fresh n", "fresh steps (ready, in range, not attacking before)", "{:.0f}"),
    ("fresh min", "fresh: least cooldown shown after the step (loops)", "{:.3f}"),
    ("fresh in body", f"fresh: share within [Period - 8, Period - 5] = [{PERIOD - 8:.2f}, {PERIOD - 5:.2f}]",
     "{:.3f}"),
    ("fresh distinct values", "fresh: distinct values shown", "{:.0f}"),
    ("fresh KS p", "fresh: KS p against uniform on that interval (the body)", "{:.3g}"),
    ("continuing n", "continuing steps (cooldown 0-7 loops at the start, in range)", "{:.0f}"),
    ("carry min", "carry: implied j, least", "{:+.3f}"),
    ("carry max", "carry: implied j, largest", "{:+.3f}"),
    ("carry KS p", "carry: KS p of j against uniform on [-1, +2]", "{:.3g}"),
    ("loop min", "loop: implied j, least", "{:+.3f}"),
    ("loop max", "loop: implied j, largest", "{:+.3f}"),
    ("loop KS p", "loop: KS p of j against uniform on [-1, +2]", "{:.3g}"),
    ("early n", "kept attacking with 6-7 loops of cooldown at the start (in range)", "{:.0f}"),
    ("early began", "  share that began an attack in the step (cooldown shown after it > 0)", "{:.3f}"),
    ("late n", "kept attacking with 7-8 loops at the start: it runs out in the last loop", "{:.0f}"),
    ("late began", "  share that began an attack in the step", "{:.3f}"),
    ("across n", "the next step (0 shown at its start, attacking the same target)", "{:.0f}"),
    ("across min", "  implied j counted from the moment it came ready (Period - 16 + c), least", "{:+.3f}"),
    ("across max", "  implied j, largest", "{:+.3f}"),
    ("across KS p", "  KS p of j against uniform on [-1, +2]", "{:.3g}"),
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--engine-episodes", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run = harness.start()
    episodes = episodes_or_exit(ap, args.files, N, M)
    game = laws(transitions(episodes))
    eng = laws(transitions(engine_episodes(args.engine_episodes, args.seed)))
    lines = [
        "# Weapon timing: the game's 3m episodes beside the engine",
        "",
        *run_header(
            __file__,
            argv,
            run,
            f"{len(episodes)} recorded episodes, {args.engine_episodes} engine episodes (seed {args.seed})",
        ),
        f"- Period {PERIOD:.4f} loops (X); the state's cooldown times 15 (SMAC's marine maximum) is in loops",
        "",
        "| statistic | game (D) | engine |",
        "|---|---|---|",
    ]
    for key, label, fmt in ROWS:
        lines.append(f"| {label} | {fmt.format(game[key])} | {fmt.format(eng[key])} |")
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
