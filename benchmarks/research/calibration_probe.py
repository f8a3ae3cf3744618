"""Sensitivity probe for issue 45's three outliers: scripted and random play under candidate rules and arenas.

For each map it plays every policy under every variant and prints win rate [Wilson 95 %], mean return
(SMAC's default reward), mean episode length and the enemies' mean hit points (+ shields) left. A variant is
``default`` (the engine as it is), a name of ``sim/variants.py``'s candidate targeting rules (e.g.
``noretaliate``, ``delay2``), ``arena=game`` (2c_vs_64zg only: the walkable cells read from the SMAC map file
itself, see :data:`GAME_ARENA`), ``arena=open`` (2c_vs_64zg only: no ravine, :data:`OPEN_ARENA`), or
``scale:UNIT.FIELD=FACTOR[,...]`` (a sensitivity: that column of the unit table, both sides' rows, times
FACTOR in this process, e.g. ``scale:colossus.cooldown=1.5``; fields :data:`SCALABLE`). Diagnostics only:
nothing here changes the engine. The ``crowd`` column is the enemies'
median nearest-neighbour distance (ground units, centre to centre) over steps 2-6, the approach, beside the
contact distance two of them keep in the game (``units.CONTACT`` x both radii).

Policies: ``random`` (uniform over available actions), ``stop`` (every agent stops), ``attack`` (each agent
attacks the closest enemy it may attack, else walks toward the closest enemy), and on 2s_vs_1sc ``swap``
(``attack``, but the stalker the crawler is targeting steps out of its reach when its shields are gone and
its partner has more shields + hit points; it reads the crawler's target from the engine state: an upper
bound on alternating fire, as ``two_stalker_probe.py``).

    .venv/bin/python benchmarks/research/calibration_probe.py --maps 2s_vs_1sc \\
        --variants default noretaliate delay4
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

import marl.envs.smac.batched_env as batched_env  # noqa: E402
import marl.envs.smac.sim.engine as sim_engine  # noqa: E402
from benchmarks import harness  # noqa: E402
from marl.envs.smac.maps import MAPS_DIR, load_map, parse_map  # noqa: E402
from marl.envs.smac.research import variant_env  # noqa: E402
from marl.envs.smac.sim import units  # noqa: E402
from marl.envs.smac.sim.units import S_HP, S_SH, S_TGT, S_X, S_Y  # noqa: E402
from marl.envs.smac.types import MapSpec  # noqa: E402

# 2c_vs_64zg's walkable cells as the SMAC map file has them (oxwhirl/smac d6aab33,
# smac/env/starcraft2/maps/SMAC_Maps/2c_vs_64zg.SC2Map, read with mpyq): t3CellFlags marks the unpathable
# cells (2 x 2 blocks), t3SyncCliffLevel the levels: low ground y 6-11, the colossi's plateau (level 2)
# x 7-24 y 13-19, ramps x 4-6 and 25-27; the unpathable strip y 12-13 spans x 4-27, so the zerglings'
# way up is 2 cells wide at each end of the playable area (x 2-3, 28-29), then over the ramps.
GAME_ARENA = {
    "walkable": [{"rect": [2, 6, 30, 20]}],
    "blocked": [
        {"rect": [4, 12, 28, 14]},
        {"rect": [2, 18, 8, 20]},
        {"rect": [24, 18, 30, 20]},
        {"rect": [2, 6, 4, 8]},
        {"rect": [28, 6, 30, 8]},
    ],
}
# 2c_vs_64zg's band with no ravine at all (a diagnostic, not a reading of the map): the zerglings meet the
# colossi on open ground, as if nothing held them on their way up.
OPEN_ARENA = {"walkable": [{"rect": [4, 6, 28, 20]}]}
ARENAS = {"arena=game": GAME_ARENA, "arena=open": OPEN_ARENA}
POLICIES = ("random", "stop", "attack", "swap")
# scale: fields -> the unit table's columns
SCALABLE = {"dmg": units.DMG, "cooldown": units.COOLDOWN, "hits": units.HITS, "speed": units.SPEED}


def scaled_props(text: str) -> np.ndarray:
    """The unit table with ``UNIT.FIELD=FACTOR`` changes (comma-separated) applied to both sides' rows."""
    props = units.PROPS.copy()
    for part in text.split(","):
        try:
            key, factor = part.split("=")
            name, field = key.split(".")
            col, t = SCALABLE[field], units.TYPE_INDEX[name]
            factor = float(factor)
        except (ValueError, KeyError):
            raise SystemExit(
                f"bad scale {part!r}: UNIT.FIELD=FACTOR, FIELD one of {sorted(SCALABLE)}"
            ) from None
        props[[t, units.N_TYPES + t], col] *= factor
    props.setflags(write=False)
    return props


def crowd(S: np.ndarray, n_agents: int) -> float:
    """The median over envs of the enemies' median nearest-neighbour distance (living ground units)."""
    out = []
    for e in range(S.shape[0]):
        live = S[e, n_agents:, S_HP] > 0
        xy = np.stack([S[e, n_agents:, S_X][live], S[e, n_agents:, S_Y][live]], axis=1)
        if len(xy) > 1:
            d = np.hypot(*(xy[:, None] - xy[None]).transpose(2, 0, 1))
            np.fill_diagonal(d, np.inf)
            out.append(np.median(d.min(1)))
    return float(np.median(out)) if out else math.nan


def spec_for(map_name: str, variant: str) -> MapSpec:
    """The map's spec, with the game's arena for ``arena=game`` or no ravine for ``arena=open``."""
    if variant not in ARENAS:
        return load_map(map_name)
    if map_name != "2c_vs_64zg":
        raise ValueError(f"{variant} is defined for 2c_vs_64zg only")
    raw = yaml.safe_load((MAPS_DIR / f"{map_name}.yaml").read_text(encoding="utf-8"))
    raw["arena"] = ARENAS[variant]
    return parse_map(raw, f"2c_vs_64zg ({variant})")


def act(policy: str, env, rng: np.random.Generator) -> np.ndarray:
    """(E, N) actions of a scripted policy (SMAC's action ids: 0 no-op, 1 stop, 2-5 moves, 6+ attacks)."""
    avail = env.get_avail_actions()
    E, N, _ = avail.shape
    alive = avail[..., 0] == 0
    if policy == "random":
        return (rng.random(avail.shape) * avail).argmax(-1)
    if policy == "stop":
        return np.where(alive, 1, 0)
    S = env.engine.S
    out = np.zeros((E, N), dtype=np.int64)
    for e in range(E):
        enemies = np.flatnonzero(S[e, N:, S_HP] > 0)
        for i in range(N):
            if not alive[e, i]:
                continue
            if not len(enemies):
                out[e, i] = 1
                continue
            d = np.hypot(S[e, N + enemies, S_X] - S[e, i, S_X], S[e, N + enemies, S_Y] - S[e, i, S_Y])
            order = enemies[np.argsort(d)]
            near = order[0]
            dx, dy = S[e, N + near, S_X] - S[e, i, S_X], S[e, N + near, S_Y] - S[e, i, S_Y]
            a = next((6 + j for j in order if avail[e, i, 6 + j]), -1)
            if policy == "swap" and N == 2:
                j = 1 - i
                mine = S[e, N, S_TGT] == i
                fresher = S[e, j, S_HP] > 0 and S[e, j, S_SH] + S[e, j, S_HP] > S[e, i, S_SH] + S[e, i, S_HP]
                if mine and S[e, i, S_SH] <= 0 and fresher:
                    dx, dy, a = -dx, -dy, -1  # step back out of its reach
            if a < 0:
                a = (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)
            out[e, i] = a if avail[e, i, a] else 1
    return out


def play(map_name: str, policy: str, variant: str, episodes: int, seed: int) -> dict[str, float]:
    """``episodes`` episodes at once; win rate, its Wilson interval, mean return, length, enemy HP left."""
    spec = spec_for(map_name, variant)
    scaled = variant.startswith("scale:")
    rules = "" if variant == "default" or variant in ARENAS or scaled else variant
    orig, orig_props = batched_env.load_map, sim_engine.PROPS
    batched_env.load_map = lambda name: spec  # the env builds its engine from this spec
    if scaled:
        sim_engine.PROPS = scaled_props(variant.removeprefix("scale:"))  # read by the engine at every step
    try:
        return _play(map_name, policy, variant, episodes, seed, rules)
    finally:
        batched_env.load_map, sim_engine.PROPS = orig, orig_props


def _play(map_name: str, policy: str, variant: str, episodes: int, seed: int, rules: str) -> dict[str, float]:
    env = variant_env(map_name, episodes, seed, rules, fused=False)
    rng = np.random.default_rng(seed)
    env.reset()
    E, N = env.n_envs, env.n_agents
    running = np.ones(E, dtype=bool)
    ret, won, length = np.zeros(E), np.zeros(E, dtype=bool), np.zeros(E)
    left = np.zeros(E)
    spacing = []
    while running.any():
        if 2 <= length.max() <= 6:
            spacing.append(crowd(env.engine.S[running], N))
        r, term, info = env.step(act(policy, env, rng), running)
        ret[running] += r[running]
        length[running] += 1
        ended = running & term
        won |= ended & info["battle_won"]
        S = env.engine.S
        left[ended] = np.clip(S[ended, N:, S_HP], 0, None).sum(-1) + np.clip(S[ended, N:, S_SH], 0, None).sum(
            -1
        )
        running &= ~term
    env.close()
    k, n, z = int(won.sum()), E, 1.96
    p = k / n
    c, h = (
        (p + z * z / (2 * n)) / (1 + z * z / n),
        z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n),
    )
    return {"win": p, "lo": max(0.0, c - h), "hi": min(1.0, c + h), "ret": ret.mean(), "len": length.mean(),
            "left": left.mean(), "crowd": float(np.nanmedian(spacing)) if spacing else math.nan}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maps", nargs="+", default=["2s_vs_1sc", "2c_vs_64zg", "bane_vs_bane"])
    ap.add_argument("--policies", nargs="+", default=["random", "stop", "attack"], choices=POLICIES)
    ap.add_argument("--variants", nargs="+", default=["default"])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="append this run (header and table) to a markdown file")
    args = ap.parse_args()
    run = harness.start()
    rows = [
        "| map | policy | variant | win % [95 %] | return | length | enemy HP+SH left | crowd |",
        "|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(rows))
    for m in args.maps:
        for pol in args.policies:
            if pol == "swap" and m != "2s_vs_1sc":
                continue
            for v in args.variants:
                if v in ARENAS and m != "2c_vs_64zg":
                    continue
                t0 = time.time()
                r = play(m, pol, v, args.episodes, args.seed)
                ci = f"{100 * r['win']:.0f} [{100 * r['lo']:.0f}, {100 * r['hi']:.0f}]"
                rows.append(
                    f"| {m} | {pol} | {v} | {ci} | {r['ret']:.1f} | {r['len']:.1f} | {r['left']:.0f} "
                    f"| {r['crowd']:.2f} |"
                )
                print(rows[-1], f" <!-- {time.time() - t0:.0f} s -->", flush=True)
    if args.out:
        note = f"seed {args.seed}; {args.episodes} episodes a cell"
        header = harness.header_lines(run, __file__, sys.argv[1:], date_note=note)
        head = [f"## `{harness.command(__file__, sys.argv[1:])}`", "", *header[1:], ""]
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n".join(head + rows) + "\n\n")


if __name__ == "__main__":
    main()
