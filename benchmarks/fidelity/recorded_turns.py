"""Move steps with nothing in the way, by how far the ally turns: the game's 3m episodes beside the engine's.

``recorded_movement.py`` finds the game's marines losing part of a move step more often after a stop, an
attack or another move than after the same move, and the engine matching all but the stop. Two mechanisms
could do it: turning (a unit facing one way must turn before it walks the other; X gives the marine a
``TurningRate`` of 999.8 degrees per game second, 62.5 a loop, so a reversal would cost about 3 loops if
it turned standing) and other units in the way. This benchmark separates them: it keeps only the move
steps with no other living ally near the path (-0.2 to 1.6 along the order, within 0.9 of its line) and
splits them by the previous action and the angle between the new order and the way the ally faced (toward
its last attack's target, else along its last walk of more than 0.05). Columns as in
``recorded_movement.py`` (a full step loses under 0.1 loop). The engine side replays the same episodes with
the game's ally actions (``replay_engine.replay``). A second table lists the game's attacks that began in
a step's last loops before a move (:func:`late_attacks`): when they began and whether they hit within their
own step. Results: ``results/recorded_turns.md``.

    .venv/bin/python benchmarks/fidelity/recorded_turns.py <data>/executor_sequence_log_*.tfrecord \\
        --out benchmarks/results/recorded_turns.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity.recorded_episodes import (  # noqa: E402
    Episode,
    emit,
    episodes_or_exit,
    parser,
    run_header,
    units_of,
)
from benchmarks.fidelity.recorded_movement import (  # noqa: E402
    DIRS,
    EXTENT,
    FULL,
    PER_LOOP,
    M,
    N,
    _category,
    engine_positions,
    game_positions,
)

LATE = (
    12.0  # a cooldown of 12 loops or more at a step's start: the attack began in the step before's last loops
)
TURNS = ((0.0, 30.0, "about 0°"), (60.0, 120.0, "about 90°"), (150.0, 181.0, "about 180°"))
PREVIOUS = ("same move", "other move", "stop", "attack")


def facing(ep: Episode, pos: np.ndarray, t: int, i: int) -> np.ndarray | None:
    """The unit vector ally ``i`` faces before step ``t``: toward its last attack's target, else along its
    last walk longer than 0.05; None when neither is known."""
    for s in range(t - 1, -1, -1):
        a = int(ep.actions_TN[s, i])
        if a >= 6:  # its last attack: toward the target, unknown if the target is dead
            v = pos[s, N + a - 6] - pos[s, i]
            return None if np.isnan(v).any() else v / np.hypot(*v)
        v = pos[s + 1, i] - pos[s, i]
        if not np.isnan(v).any() and np.hypot(*v) > 0.05:  # its last walk
            return v / np.hypot(*v)
    return None


def free_steps(episodes: list[Episode], pos_per_episode: list[np.ndarray]) -> list[tuple[str, float, float]]:
    """(previous action, turn in degrees, lost loops) of every move step with no other ally near the path."""
    rows = []
    for ep, pos in zip(episodes, pos_per_episode, strict=True):
        for t in range(1, min(len(ep.actions_TN), len(pos) - 1)):
            for i in range(N):
                a = int(ep.actions_TN[t, i])
                if a not in DIRS or np.isnan(pos[t : t + 2, i]).any():
                    continue
                u = np.array(DIRS[a])
                rel = [pos[t, j] - pos[t, i] for j in range(N) if j != i and not np.isnan(pos[t, j]).any()]
                if any(-0.2 < r @ u < 1.6 and abs(r @ u[::-1]) < 0.9 for r in rel):
                    continue
                f = facing(ep, pos, t, i)
                if f is None:
                    continue
                turn = float(np.degrees(np.arccos(np.clip(f @ u, -1.0, 1.0))))
                loss = (FULL - (pos[t + 1, i] - pos[t, i]) @ u) / PER_LOOP
                rows.append((_category(int(ep.actions_TN[t - 1, i]), a), turn, float(loss)))
    return rows


def table(rows: list[tuple[str, float, float]]) -> dict[tuple[str, str], dict[str, float]]:
    """Per (previous action, turn class): steps, share full, mean and largest loss, whole loops lost."""
    out = {}
    for prev in PREVIOUS:
        for lo, hi, name in TURNS:
            loss = np.array([x for c, turn, x in rows if c == prev and lo <= turn < hi])
            if len(loss):
                out[prev, name] = {
                    "n": len(loss),
                    "full": float(np.mean(loss < 0.1)),
                    "mean": float(loss.mean()),
                    "max": float(loss.max()),
                    "whole": int(np.sum((loss > 0.5) & (np.abs(loss - np.round(loss)) < 0.02))),
                }
    return out


def late_attacks(episodes: list[Episode]) -> list[tuple[float, float, float, float]]:
    """The game's attacks that began late in a step followed by a move order (the ally's cooldown at the
    move step's start >= ``LATE`` loops, its previous action an attack no other ally shared): the cooldown
    at the start of the attack step and of the move step, and the target's health lost in each step."""
    rows = []
    for ep in episodes:
        u = units_of(ep.state_TS, N, M, np.zeros(2), EXTENT)  # positions unused
        hp, cd = u.health, u.cooldown  # hit points, loops
        for t in range(1, min(len(ep.actions_TN), len(hp) - 1)):
            for i in range(N):
                a, prev = int(ep.actions_TN[t, i]), int(ep.actions_TN[t - 1, i])
                shared = any(int(ep.actions_TN[t - 1, j]) == prev for j in range(N) if j != i)
                if a not in DIRS or prev < 6 or cd[t, i] < LATE or shared or hp[t + 1, i] <= 0:
                    continue
                h = hp[t - 1 : t + 2, N + prev - 6]
                rows.append((cd[t - 1, i], cd[t, i], h[0] - h[1], h[1] - h[2]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    run = harness.start()
    episodes = episodes_or_exit(ap, args.files, N, M)
    sides = {"game (D)": table(free_steps(episodes, game_positions(episodes)))}
    sides["engine"] = table(free_steps(episodes, engine_positions(episodes)))
    lines = [
        "# Move steps with nothing in the way, by the turn: the game's 3m episodes beside the engine's",
        "",
        *run_header(__file__, argv, run, f"{len(episodes)} recorded episodes, each replayed once"),
        "- a step counts when no other living ally stands -0.2 to 1.6 along the order and within 0.9 of "
        "its line; turn = angle between the order and the way the ally faced (its last target, else its "
        "last walk)",
        "",
        "| previous action | turn | side | steps | share full | mean lost loops | largest loss | "
        "whole loops lost (1 or more, exactly) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for prev in PREVIOUS:
        for _, _, name in TURNS:
            for side, tab in sides.items():
                x = tab.get((prev, name))
                if x:
                    lines.append(
                        f"| {prev} | {name} | {side} | {x['n']} | {x['full']:.3f} | {x['mean']:.2f} | "
                        f"{x['max']:.2f} | {x['whole']} |"
                    )
    late = np.array(late_attacks(episodes)).reshape(-1, 4)
    lines += [
        "",
        f"## The game's attacks that began in a step's last loops, then a move (cooldown >= {LATE:g} loops "
        "at the move step's start; no other ally on the target)",
        "",
        f"{len(late)} steps; the target lost health in the attack's own step in "
        f"{int(np.sum(late[:, 2] > 0))} and in the move step in {int(np.sum(late[:, 3] > 0))} "
        "(a marine's hit is 6; the move step's may be another ally's).",
        "",
        "| cooldown at the attack step's start | at the move step's start | target's health lost in the "
        "attack step | in the move step |",
        "|---|---|---|---|",
        *(f"| {r[0]:.2f} | {r[1]:.2f} | {r[2]:.1f} | {r[3]:.1f} |" for r in late),
    ]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
