"""Where every unit stands at the start of an episode, on the embedded engine or on the game, side by side.

How StarCraft II arranges several units created at one point is in no source we found (docs/fidelity.md,
"spawns": the game's placement search is closed; the first unit stands on the point), and the layout is
the largest lever on outcomes we measured (``targeting.md``). This script records the start positions so
that one run on the game settles it: for each map it resets the env ``--episodes`` times and writes, per
unit (in the env's agent / enemy order), its offset from the spawn point of its group (the nearest group of
its type): the mean over resets and the spread, plus a per-side summary (the largest distance from the
point and the closest pair of units).

    .venv/bin/python benchmarks/research/spawn_layout.py --maps 3m 2s3z --episodes 20 --json sim.json
    python benchmarks/research/spawn_layout.py --backend sc2 --json game.json  # on a machine with the game
    .venv/bin/python benchmarks/research/spawn_layout.py --compare game.json     # the engine beside the game

``--compare`` reads a file written with ``--backend sc2`` (or by ``recorded_spawns.py`` from episodes
recorded on the game: 3m in ``results/recorded_spawns.md``) and reports, per map and unit, how far the
engine's mean start position is from that of its counterpart on the game (units of a type paired by the
closest assignment, since the game orders SMAC's agents by type and position). ``--backend sc2`` has not
been run here: the game cannot be installed on this project's machines.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from marl.envs.smac import StarCraft2Env  # noqa: E402
from marl.envs.smac.maps import list_maps, load_map  # noqa: E402
from marl.envs.smac.types import SideTable, UnitGroup  # noqa: E402


def group_spawns(side: SideTable, groups: tuple[UnitGroup, ...] | list[UnitGroup]) -> np.ndarray:
    """(n, 2): each unit's spawn point, the nearest one among the groups of its type (any group if none)."""
    out = np.empty((len(side.unit_type), 2))
    for i, (name, pos) in enumerate(zip(side.unit_type, side.pos, strict=True)):
        same = [g.spawn for g in groups if g.unit == name] or [g.spawn for g in groups]
        pts = np.asarray(same, dtype=float)
        out[i] = pts[np.argmin(np.linalg.norm(pts - pos, axis=1))]
    return out


def record(map_name: str, backend: str, episodes: int, seed: int) -> dict:
    """Start offsets (episodes, n, 2) of both sides on one map, with the unit types."""
    spec = load_map(map_name)
    env = StarCraft2Env(map_name, backend=backend, seed=seed)
    out: dict = {"allies": [], "enemies": []}
    try:
        for _ in range(episodes):
            env.reset()
            tab = env.unit_table
            for key, side, groups in (
                ("allies", tab.allies, spec.allies),
                ("enemies", tab.enemies, spec.enemies),
            ):
                out[key].append((side.pos - group_spawns(side, groups)).tolist())
                out[f"{key}_types"] = list(side.unit_type)
    finally:
        env.close()
    return out


def summary(offsets_ENK: np.ndarray) -> dict[str, float]:
    """Per-side numbers of a layout: the largest distance from the point, the closest pair, the spread."""
    mean_NK = offsets_ENK.mean(axis=0)
    d = np.linalg.norm(mean_NK[:, None] - mean_NK[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    return {
        "reach": float(np.linalg.norm(mean_NK, axis=1).max()),
        "closest_pair": float(d.min()) if len(mean_NK) > 1 else float("nan"),
        "jitter": float(offsets_ENK.std(axis=0).max()),
    }


def matched_gaps(a_NK: np.ndarray, b_NK: np.ndarray, types_a: list[str], types_b: list[str]) -> np.ndarray:
    """Each unit's distance to its counterpart: units of a type are paired by the assignment that minimises
    the total distance (the game orders SMAC's agents by type and position, the engine by id)."""
    gaps = np.full(len(types_a), np.nan)
    for name in sorted(set(types_a)):
        ia = [i for i, t in enumerate(types_a) if t == name]
        ib = [i for i, t in enumerate(types_b) if t == name]
        if len(ia) != len(ib):
            continue
        cost = np.linalg.norm(a_NK[ia][:, None] - b_NK[ib][None], axis=-1)
        rows, cols = linear_sum_assignment(cost)
        gaps[np.asarray(ia)[rows]] = cost[rows, cols]
    return gaps


def compare(ours: dict, game: dict) -> list[str]:
    """Markdown rows: per map and side, each unit's distance from its counterpart's mean start offset."""
    rows = []
    for m in sorted(set(ours) & set(game)):
        for key in ("allies", "enemies"):
            ta, tb = ours[m][f"{key}_types"], game[m][f"{key}_types"]
            if sorted(ta) != sorted(tb):
                rows.append(f"| {m} | {key} | – | different units: {sorted(ta)} vs {sorted(tb)} |")
                continue
            a, b = np.asarray(ours[m][key]).mean(axis=0), np.asarray(game[m][key]).mean(axis=0)
            gap = matched_gaps(a, b, ta, tb)
            rows.append(f"| {m} | {key} | {gap.max():.2f} | {' '.join(f'{g:.2f}' for g in gap)} |")
    return rows


def table(data: dict, backend: str) -> list[str]:
    """Markdown rows: per map and side, the summary and each unit's mean offset (x, y)."""
    rows = []
    for m, d in data.items():
        for key in ("allies", "enemies"):
            off = np.asarray(d[key])
            s = summary(off)
            units = " ".join(
                f"{t}({x:+.2f},{y:+.2f})" for t, (x, y) in zip(d[f"{key}_types"], off.mean(0), strict=True)
            )
            rows.append(
                f"| {m} | {backend} | {key} | {s['reach']:.2f} | {s['closest_pair']:.2f} | {s['jitter']:.2f} "
                f"| {units} |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maps", nargs="*", default=None, help="default: all 23 SMAC maps")
    ap.add_argument("--backend", choices=("sim", "sc2"), default="sim")
    ap.add_argument("--episodes", type=int, default=20, help="resets per map")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write the raw offsets here")
    ap.add_argument("--compare", type=Path, default=None, help="a JSON written with --backend sc2")
    args = ap.parse_args(argv)
    maps = args.maps or list_maps()
    bad = sorted(set(maps) - set(list_maps()))
    if bad:
        ap.error(f"unknown map(s) {bad}; choose from {list_maps()}")
    if args.episodes < 1:
        ap.error(f"--episodes must be at least 1, got {args.episodes}")
    data = {m: record(m, args.backend, args.episodes, args.seed) for m in maps}
    if args.json:
        args.json.write_text(json.dumps({"backend": args.backend, "episodes": args.episodes, "maps": data}))
    print(f"start offsets from the group's spawn point, {args.episodes} resets per map (game units)\n")
    print(
        "| map | backend | side | farthest from the point | closest pair | largest std | each unit (x, y) |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(table(data, args.backend)))
    if args.compare:
        game = json.loads(args.compare.read_text())
        if game.get("backend") != "sc2":
            ap.error(f"{args.compare} was written with --backend {game.get('backend')}, not sc2")
        print("\n| map | side | largest gap, engine vs game | each unit's gap |\n|---|---|---|---|")
        print("\n".join(compare(data, game["maps"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
