"""How far an ordered marine walks in one SMAC step: the game's 3m episodes beside the engine's replays.

SMAC's move actions (2-5: north, south, east, west) order a unit 2 units away; a marine walks 2.25 per
game second (X), so an unhindered step of 8 loops covers 1.125 along the order. The recorded episodes
(og-marl's "3m, Tiny", source D in ``docs/fidelity.md``) give every ally's position in every state, so
each move step shows how much of that walk the game gave: the loss in loops is
``(1.125 - distance along the order) / (2.25 / 16)``. The steps are split by the ally's previous action
(the same move, another move, stop, an attack, none: the episode's first step), since a unit that turns,
starts, or leaves an attack is where an engine's movement rule could part from the game's.

The engine side replays the same episodes with the game's ally actions from the game's first positions
(``replay_engine.replay``), so both sides answer the same orders; a step counts where the ally is alive
before and after it. Each category gets the share of full steps (loss under 0.1 loop, 95 % Wilson
interval), the mean loss, the mean sideways drift, a histogram of the lost loops, and a chi-square test
of the game's histogram against the engine's.

Two more tables read how units touch. **Contact**: every pair of living allies in consecutive states:
how close two marines stand (the 0.1 % quantile of their distances), how many pairs closer than both
radii (0.75) stood without either moving, and where pairs found closer than 0.685 stood after the step.
**In the way**: each move step with another living ally ahead (0-0.8 along the order, within 0.6 of its
line) by what that ally was ordered to do (fire, stop, move): the mover's lost loops and how often the
one in the way moved at all. Results: ``results/recorded_movement.md``.

    .venv/bin/python benchmarks/fidelity/recorded_movement.py <data>/executor_sequence_log_*.tfrecord \\
        --out benchmarks/results/recorded_movement.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity.recorded_episodes import Episode, emit, episodes_or_exit, parser, run_header, unpack  # noqa: E402
from benchmarks.fidelity.replay_engine import replay  # noqa: E402
from marl.envs.smac.maps import load_map  # noqa: E402
from marl.envs.smac.sim.units import PROPS, SPEED, type_ids  # noqa: E402
from marl.envs.smac.sim.units import RADIUS as RADIUS_COL  # noqa: E402
from marl.envs.smac.sim.variants import parse_rules  # noqa: E402

N, M = 3, 3  # 3m
EXTENT = 28.0  # SMAC's state divides 3m's positions by the map's width (docs/smac.md, section 4)
DIRS = {2: (0.0, 1.0), 3: (0.0, -1.0), 4: (1.0, 0.0), 5: (-1.0, 0.0)}  # SMAC: north, south, east, west
MARINE = type_ids(("marine",), True)[0]
PER_LOOP = float(PROPS[MARINE, SPEED])  # X: 2.25 per game second, / 16
RADIUS = float(PROPS[MARINE, RADIUS_COL])  # X: 0.375
FULL = 8 * PER_LOOP  # one SMAC step of 8 loops
BINS = (-1.0, 0.1, 0.9, 1.9, 2.9, 3.9, 4.9, 5.9, 8.1)  # lost loops; the first bin is a full step
COARSE = (0.1, 2.9, 5.9)  # the chi-square's bins: full, up to 3 loops lost, up to 6, more
CATEGORIES = ("same move", "other move", "stop", "attack", "first step")


def _category(prev: int, a: int) -> str | None:
    if prev < 0:
        return "first step"
    if prev == a:
        return "same move"
    if prev in DIRS:
        return "other move"
    return "stop" if prev == 1 else "attack" if prev >= 6 else None  # no-op: only the dead take it


def move_steps(episodes: list[Episode], pos_per_episode: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every step in which a living ally takes a move action and is alive after it: the category of its
    previous action, the lost loops and the sideways drift. ``pos_per_episode[k]`` is episode ``k``'s
    (T + 1, n + m, 2) world positions (NaN where dead); steps beyond either side's end are skipped."""
    cat, loss, side = [], [], []
    for ep, pos in zip(episodes, pos_per_episode, strict=True):
        for t in range(min(len(ep.actions_TN), len(pos) - 1)):
            for i in range(N):
                a = int(ep.actions_TN[t, i])
                c = _category(int(ep.actions_TN[t - 1, i]) if t > 0 else -1, a) if a in DIRS else None
                if c is None or np.isnan(pos[t, i]).any() or np.isnan(pos[t + 1, i]).any():
                    continue
                d, u = pos[t + 1, i] - pos[t, i], np.array(DIRS[a])
                cat.append(c)
                loss.append((FULL - d @ u) / PER_LOOP)
                side.append(abs(d @ u[::-1]))
    return {"cat": np.array(cat), "loss": np.array(loss), "side": np.array(side)}


def contacts(episodes: list[Episode], pos_per_episode: list[np.ndarray]) -> dict[str, float]:
    """How close living allies stand and when they are pushed apart (module docstring, "Contact")."""
    d0, d1, still = [], [], []
    for ep, pos in zip(episodes, pos_per_episode, strict=True):
        for t in range(min(len(ep.actions_TN), len(pos) - 1)):
            for i in range(N):
                for j in range(i + 1, N):
                    p = pos[t : t + 2, [i, j]]
                    if np.isnan(p).any():
                        continue
                    d0.append(np.hypot(*(p[0, 0] - p[0, 1])))
                    d1.append(np.hypot(*(p[1, 0] - p[1, 1])))
                    still.append(bool(np.abs(p[1] - p[0]).max() < 1e-4))
    d0, d1, still = np.array(d0), np.array(d1), np.array(still)
    close = d0 < 2 * RADIUS
    tight = d0 < 0.685
    return {
        "pairs": len(d0),
        "q001": float(np.quantile(d0, 0.001)),
        "close": int(close.sum()),
        "close still": int((close & still).sum()),
        "close still 0.69-0.75": int((close & still & (d0 > 0.69)).sum()),
        "tight": int(tight.sum()),
        "tight after": float(np.median(d1[tight])) if tight.any() else np.nan,
    }


def in_the_way(episodes: list[Episode], pos_per_episode: list[np.ndarray]) -> dict[str, dict[str, float]]:
    """Per order of the ally in a mover's way (fire, stop, move): the mover's lost loops and how often the
    one in the way moved (module docstring, "In the way")."""
    rows: dict[str, list[tuple[float, float]]] = {"fire": [], "stop": [], "move": []}
    for ep, pos in zip(episodes, pos_per_episode, strict=True):
        for t in range(min(len(ep.actions_TN), len(pos) - 1)):
            for i in range(N):
                a = int(ep.actions_TN[t, i])
                if a not in DIRS or np.isnan(pos[t : t + 2, i]).any():
                    continue
                u = np.array(DIRS[a])
                loss = (FULL - (pos[t + 1, i] - pos[t, i]) @ u) / PER_LOOP
                for j in range(N):
                    rel = pos[t, j] - pos[t, i]
                    if j == i or np.isnan(pos[t : t + 2, j]).any() or not (0 < rel @ u < 0.8):
                        continue
                    b = int(ep.actions_TN[t, j])
                    kind = "fire" if b >= 6 else "stop" if b == 1 else "move" if b in DIRS else None
                    if kind and abs(rel @ u[::-1]) < 0.6:
                        rows[kind].append((loss, float(np.hypot(*(pos[t + 1, j] - pos[t, j])))))
    out = {}
    for kind, r in rows.items():
        x = np.array(r).reshape(-1, 2)
        out[kind] = {
            "n": len(x),
            "loss": float(x[:, 0].mean()) if len(x) else np.nan,
            "stuck": float(np.mean(x[:, 0] > 5.9)) if len(x) else np.nan,
            "moved": float(np.mean(x[:, 1] > 0.01)) if len(x) else np.nan,
        }
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    lo, hi = stats.binomtest(k, n).proportion_ci(0.95, method="wilson") if n else (np.nan, np.nan)
    return float(lo), float(hi)


def summary(steps: dict[str, np.ndarray]) -> dict[str, dict[str, object]]:
    """Per category: n, share of full steps with its interval, mean loss and drift, the histogram."""
    out = {}
    for c in CATEGORIES:
        sel = steps["cat"] == c
        n, loss = int(sel.sum()), steps["loss"][sel]
        full = int(np.sum(loss < BINS[1]))
        out[c] = {
            "n": n,
            "full": full / n if n else np.nan,
            "full_ci": _wilson(full, n),
            "mean_loss": float(loss.mean()) if n else np.nan,
            "side": float(steps["side"][sel].mean()) if n else np.nan,
            "hist": np.histogram(loss, bins=BINS)[0].tolist(),
            "coarse": np.histogram(loss, bins=(-np.inf, *COARSE, np.inf))[0],
        }
    return out


def agreement(game: dict, eng: dict) -> dict[str, float]:
    """Per category, the chi-square p of the game's coarse histogram against the engine's."""
    out = {}
    for c in CATEGORIES:
        table = np.array([game[c]["coarse"], eng[c]["coarse"]])
        table = table[:, table.sum(axis=0) > 0]
        out[c] = float(stats.chi2_contingency(table).pvalue) if table.shape[1] > 1 else np.nan
    return out


def engine_positions(episodes: list[Episode], rules: str = "") -> list[np.ndarray]:
    """The engine's positions replaying each episode with the game's actions from its first positions
    (under candidate ``rules`` of ``sim/variants.py`` when given)."""
    reps = replay(episodes, load_map("3m"), EXTENT, rules=parse_rules(rules) if rules else None)
    return [reps.pos_RTU2[k] for k in range(len(episodes))]


def game_positions(episodes: list[Episode]) -> list[np.ndarray]:
    """The game's positions, from each episode's states."""
    centre = np.asarray(load_map("3m").map_size, dtype=float) / 2
    out = []
    for ep in episodes:
        u = unpack(ep.state_TS, N, M, centre, EXTENT)
        out.append(np.concatenate([u["ally_pos"], u["enemy_pos"]], axis=1))
    return out


def _fmt_side(s: dict) -> str:
    lo, hi = s["full_ci"]
    full = f"{s['full']:.3f} [{lo:.3f}, {hi:.3f}]"
    return f"{s['n']} | {full} | {s['mean_loss']:.2f} | {s['side']:.3f} | {s['hist']}"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--sim-rules", default="", help="candidate rules of sim/variants.py (e.g. 'unpin')")
    args = ap.parse_args(argv)
    run = harness.start()
    episodes = episodes_or_exit(ap, args.files, N, M)
    try:
        rules = parse_rules(args.sim_rules) if args.sim_rules else None
    except ValueError as err:
        ap.error(str(err))
    engine = f"engine ({args.sim_rules})" if rules is not None else "engine"
    pos = {"game (D)": game_positions(episodes), engine: engine_positions(episodes, args.sim_rules)}
    game, eng = (summary(move_steps(episodes, pos[k])) for k in pos)
    p = agreement(game, eng)
    touch = {k: contacts(episodes, v) for k, v in pos.items()}
    way = {k: in_the_way(episodes, v) for k, v in pos.items()}
    lines = [
        "# Movement per step: the game's 3m episodes beside the engine's replays of them",
        "",
        *run_header(
            __file__,
            argv,
            run,
            f"{len(episodes)} recorded episodes, each replayed once in the engine with the game's ally "
            "actions",
        ),
        f"- a full step walks {FULL:.3f} along the order (8 loops at {PER_LOOP:.4f} per loop, X); lost loops "
        f"= (full - walked) / per loop; histogram bins {list(BINS)}; chi-square on the bins < 0.1, "
        "0.1-2.9, 2.9-5.9, more",
        "",
        "| previous action | side | move steps | share full [95 % CI] | mean lost loops | mean drift | "
        "lost-loop histogram | chi-square p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in CATEGORIES:
        lines.append(f"| {c} | game (D) | {_fmt_side(game[c])} | {p[c]:.3g} |")
        lines.append(f"| | {engine} | {_fmt_side(eng[c])} | |")
    lines += [
        "",
        "## Contact: pairs of living allies in consecutive states",
        "",
        "| side | pairs | 0.1 % quantile of distance | closer than 0.75 | of those, neither moved | "
        "neither moved, 0.69-0.75 apart | closer than 0.685 | their median distance after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, c in touch.items():
        lines.append(
            f"| {k} | {c['pairs']} | {c['q001']:.4f} | {c['close']} | {c['close still']} | "
            f"{c['close still 0.69-0.75']} | {c['tight']} | {c['tight after']:.4f} |"
        )
    lines += [
        "",
        "## In the way: a walking ally with another ally ahead, by the other's order",
        "",
        "| side | other's order | steps | mover's mean lost loops | mover stuck (> 5.9 lost) | other moved |",
        "|---|---|---|---|---|---|",
    ]
    for k, w in way.items():
        for kind, x in w.items():
            lines.append(
                f"| {k} | {kind} | {x['n']} | {x['loss']:.2f} | {x['stuck']:.2f} | {x['moved']:.2f} |"
            )
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
