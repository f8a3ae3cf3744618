"""Fidelity benchmark: scripted policies on every SMAC map, on the embedded engine or on the game.

Policies: SMAC's own heuristic (``heuristic_ai=True``: each agent attacks the nearest enemy until it dies, a
Medivac heals the nearest injured ally), uniform-random over the available actions, and "stop" (every living
agent holds position; the closest thing to a no-op a living SMAC agent may do). For each (map, policy) it
reports the win rate (Wilson 95 % interval), the mean episode length, allies and enemies alive at the end and
the enemies' health+shield left (fraction of their maxima), each with a normal-approximation 95 % interval
(mean ± 1.96 standard errors), and puts the published real-game heuristic win rates beside them
(``benchmarks/data/published_smac.yaml``).

    .venv/bin/python benchmarks/fidelity/fidelity.py                # all 23 maps, embedded engine
    .venv/bin/python benchmarks/fidelity/fidelity.py --maps 3m 8m --episodes 400
    .venv/bin/python benchmarks/fidelity/fidelity.py --backend sc2  # the same on StarCraft II (the game)
    PYTHONPATH=. <python with SMAClite> benchmarks/fidelity/fidelity.py --backend smaclite  # its 12 maps
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity.fidelity_smaclite import CRASHES, SMACLITE_MAPS, run_smaclite, smaclite_version  # noqa: E402
from marl.envs.smac import StarCraft2Env  # noqa: E402
from marl.envs.smac.batched_env import BatchedStarCraft2Env  # noqa: E402
from marl.envs.smac.features import UNIT_MAX_HEALTH_SHIELD  # noqa: E402
from marl.envs.smac.maps import list_maps, load_map  # noqa: E402
from marl.envs.smac.research import variant_env  # noqa: E402
from marl.envs.smac.sim.variants import parse_rules  # noqa: E402

POLICIES = ("heuristic", "random", "stop")
LARGE = {"25m": 200, "27m_vs_30m": 200, "bane_vs_bane": 200, "2c_vs_64zg": 200, "so_many_baneling": 200}
PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published_smac.yaml"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its normal-approximation 95 % interval."""
    x = np.asarray(x, dtype=float)
    half = 1.96 * x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else math.nan
    return float(x.mean()), float(half)


def choose(policy: str, avail_ENA: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Actions (E, N) of a scripted policy from the availability masks (dead agents: no-op 0)."""
    alive = avail_ENA[..., 0] == 0
    if policy == "stop":
        return np.where(alive, 1, 0)
    if policy == "heuristic":  # the env replaces them; send valid ones anyway
        return np.where(alive, 1, 0)
    u = rng.random(avail_ENA.shape) * avail_ENA  # uniform among available actions
    return u.argmax(-1)


def play_batched(
    env: BatchedStarCraft2Env,
    episodes: int,
    act: Callable[[], np.ndarray],
    on_end: Callable[[int, dict[str, np.ndarray], int], None],
    on_step: Callable[[np.ndarray], None] | None = None,
) -> None:
    """Play ``episodes`` episodes on ``env`` (all of its envs at once, restarting finished ones until enough
    have started). ``act()`` gives the (E, N) actions; ``on_end(e, info, length)`` sees every finished
    episode right after its last step; ``on_step(still_running)`` runs after every step."""
    env.reset()
    E = env.n_envs
    running = np.ones(E, dtype=bool)
    steps = np.zeros(E, dtype=np.int64)
    started = E
    while running.any():
        _, term, info = env.step(act(), running)
        steps[running] += 1
        if on_step is not None:
            on_step(running & ~term)
        ended = np.flatnonzero(term & running)
        for e in ended:
            on_end(int(e), info, int(steps[e]))
        again = ended[: max(0, episodes - started)]
        started += len(again)
        running[ended] = False
        if len(again):
            mask = np.zeros(E, dtype=bool)
            mask[again] = True
            env.reset_envs(mask)
            running[again] = True
            steps[again] = 0


def run_sim(
    map_name: str,
    policy: str,
    episodes: int,
    seed: int,
    n_envs: int = 32,
    sim_rules: str = "",
    layout: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Play ``episodes`` episodes on the embedded engine (``sim_rules``: candidate targeting rules of
    ``marl/envs/smac/sim/variants.py`` instead of the engine's; ``layout``: (U, 2) spawn positions instead
    of the engine's, before its per-reset noise); per-episode outcome arrays."""
    spec = load_map(map_name)
    n = spec.n_agents
    shield_max = np.array([UNIT_MAX_HEALTH_SHIELD[t][1] for t in spec.enemy_types], dtype=float)
    env = variant_env(map_name, min(n_envs, episodes), seed, sim_rules, heuristic_ai=policy == "heuristic")
    if layout is not None:
        env.engine.base_pos = np.asarray(layout, dtype=float)
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("won", "length", "allies_alive", "enemies_alive", "enemy_health_left")}

    def on_end(e: int, info: dict[str, np.ndarray], length: int) -> None:
        u = env.units
        hp, sh, hmax = u.health[e], u.shield[e], np.broadcast_to(u.health_max, u.health.shape)[e]
        out["won"].append(bool(info["battle_won"][e]))
        out["length"].append(length)
        out["allies_alive"].append(int((hp[:n] > 0).sum()))
        out["enemies_alive"].append(int((hp[n:] > 0).sum()))
        out["enemy_health_left"].append(enemy_left(hp[n:], sh[n:], hmax[n:], shield_max))

    play_batched(env, episodes, lambda: choose(policy, env.get_avail_actions(), rng), on_end)
    env.close()
    return {k: np.asarray(v) for k, v in out.items()}


def run_game(map_name: str, policy: str, episodes: int, seed: int) -> dict[str, np.ndarray]:
    """The same on StarCraft II (one env; ``backend="sc2"``)."""
    spec = load_map(map_name)
    n = spec.n_agents
    env = StarCraft2Env(map_name, backend="sc2", seed=seed, heuristic_ai=policy == "heuristic")
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("won", "length", "allies_alive", "enemies_alive", "enemy_health_left")}
    try:
        for _ in range(episodes):
            env.reset()
            term, length, info = False, 0, {}
            while not term:
                avail = np.asarray(env.get_avail_actions())[None]
                _, term, info = env.step(choose(policy, avail, rng)[0])
                length += 1
            out["won"].append(bool(info.get("battle_won", False)))
            out["length"].append(length)
            out["allies_alive"].append(n - int(info.get("dead_allies", 0)))
            out["enemies_alive"].append(spec.n_enemies - int(info.get("dead_enemies", 0)))
            en = env.unit_table.enemies
            out["enemy_health_left"].append(enemy_left(en.health, en.shield, en.health_max, en.shield_max))
    finally:
        env.close()
    return {k: np.asarray(v) for k, v in out.items()}


def enemy_left(
    health: np.ndarray, shield: np.ndarray, health_max: np.ndarray, shield_max: np.ndarray
) -> float:
    """The enemies' remaining health+shield as a fraction of their maxima."""
    left = np.clip(health, 0, None).sum() + np.clip(shield, 0, None).sum()
    return float(left / (np.sum(health_max) + np.sum(shield_max)))


def summarize(r: dict[str, np.ndarray]) -> dict[str, object]:
    n, k = len(r["won"]), int(r["won"].sum())
    row: dict[str, object] = {"episodes": n, "win": k / n, "win_ci": wilson(k, n)}
    for key in ("length", "allies_alive", "enemies_alive", "enemy_health_left"):
        row[key] = mean_ci(r[key])
    return row


def published_heuristic(published: dict) -> dict[str, tuple[float, str]]:
    """Map -> (published heuristic win rate in %, its source tag): "a" the primary source, "b" the
    secondary transcription (used only where "a" has no figure)."""
    out = {
        m: (float(v), "b") for m, v in published.get("heuristic_secondary", {}).get("win_rate", {}).items()
    }
    out.update({m: (float(v), "a") for m, v in published["heuristic"]["win_rate"].items()})
    return out


def check_lines(
    rows: list, pub: dict[str, tuple[float, str]], tol: float = 15.0, label: str = "ours"
) -> list[str]:
    """The issue's goal, one line per map with a published heuristic figure: |ours - published| <= tol."""
    lines = []
    for name, policy, s in rows:
        if policy != "heuristic" or name not in pub:
            continue
        v, tag = pub[name]
        gap = 100 * s["win"] - v
        verdict = "within" if abs(gap) <= tol else "OUTSIDE"
        lines.append(
            f"- {name}: {label} {100 * s['win']:.1f} %, published {v:.0f} % ({tag}): {gap:+.1f} points, "
            + verdict
        )
    n_in = sum("within" in line for line in lines)
    return [f"**±{tol:.0f}-point check: {n_in} of {len(lines)} maps within.**", "", *lines]


BACKENDS: dict[str, Callable[[str, str, int, int], dict[str, np.ndarray]]] = {
    "sim": run_sim,
    "sc2": run_game,
    "smaclite": run_smaclite,
}
BACKEND_NAMES = {"sim": "embedded engine", "sc2": "SC2", "smaclite": "SMAClite"}
PYTHONS = {
    "sim": ".venv/bin/python",
    "sc2": ".venv/bin/python",
    "smaclite": "PYTHONPATH=. <python with SMAClite>",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maps", nargs="*", default=None, help="default: all 23 SMAC maps")
    ap.add_argument("--policies", nargs="*", default=list(POLICIES), choices=POLICIES)
    ap.add_argument("--episodes", type=int, default=500, help="per map and policy (five largest maps: 200)")
    ap.add_argument("--backend", default="sim", choices=tuple(BACKENDS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--note", default="")
    ap.add_argument(
        "--sim-rules",
        default="",
        help="candidate targeting rules of the built-in AI instead of the engine's (sim/variants.py, e.g. "
        "'noretaliate', the engine's rule before 2026-11-27); embedded engine only",
    )
    ap.add_argument("--out", default=str(harness.RESULTS / "fidelity.md"))
    args = ap.parse_args()
    if args.sim_rules and args.backend != "sim":
        ap.error(f"--sim-rules changes the embedded engine's targeting; --backend {args.backend} has its own")
    if args.sim_rules:
        try:
            parse_rules(args.sim_rules)
        except ValueError as err:
            ap.error(str(err))
    maps = args.maps or (list_maps() if args.backend != "smaclite" else list(SMACLITE_MAPS))
    published = yaml.safe_load(PUBLISHED.read_text())
    heur_pub = published_heuristic(published)
    run = harness.start()
    rows = []
    for name in maps:
        for policy in args.policies:
            episodes = min(args.episodes, LARGE.get(name, args.episodes))
            t = time.time()
            if args.sim_rules:
                r = run_sim(name, policy, episodes, args.seed, sim_rules=args.sim_rules)
            else:
                r = BACKENDS[args.backend](name, policy, episodes, args.seed)
            s = summarize(r)
            rows.append((name, policy, s))
            print(
                f"{name:18s} {policy:9s} win {s['win']:.3f} [{s['win_ci'][0]:.3f}, {s['win_ci'][1]:.3f}] "
                f"len {s['length'][0]:.1f}  ({time.time() - t:.1f} s)",
                flush=True,
            )
    lines = [
        f"# Fidelity benchmark: scripted policies ({BACKEND_NAMES[args.backend]})",
        "",
        *harness.header_lines(
            run, __file__, sys.argv[1:], python=PYTHONS[args.backend], date_note=f"seed {args.seed}"
        ),
    ]
    if args.backend == "smaclite":
        lines.append(f"- smaclite {smaclite_version()}")
    if args.note:
        lines.append(f"- note: {args.note}")
    if args.sim_rules:
        lines.append(f"- targeting: candidate rules `{args.sim_rules}` (sim/variants.py), not the engine's")
    if CRASHES:
        crashed = "; ".join(CRASHES)
        lines.append(f"- SMAClite raised in {len(CRASHES)} episodes, each replaced by a new one: {crashed}")
    lines += [
        "- intervals: win rate Wilson 95 %; other columns mean ± 1.96 standard errors; episodes per row in "
        "the `n` column (at most 200 on the five largest maps)",
        f"- published heuristic win rates (a): {published['heuristic']['source'].strip()}",
        f"- published heuristic win rates (b): {published['heuristic_secondary']['source'].strip()}",
        "",
        "| map | policy | n | win rate [95 % CI] | published heuristic | gap (points) | episode length | "
        "allies alive | enemies alive | enemy health left |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, policy, s in rows:
        pub = heur_pub.get(name) if policy == "heuristic" else None
        gap = f"{100 * s['win'] - pub[0]:+.0f}" if pub is not None else ""
        pub_s = f"{pub[0]:.0f} % ({pub[1]})" if pub is not None else ""
        cells = [
            f"{s[k][0]:.2f} ± {s[k][1]:.2f}"
            for k in ("length", "allies_alive", "enemies_alive", "enemy_health_left")
        ]
        lo, hi = s["win_ci"]
        lines.append(
            f"| {name} | {policy} | {s['episodes']} | {100 * s['win']:.1f} % [{100 * lo:.1f}, "
            f"{100 * hi:.1f}] | {pub_s} | {gap} | " + " | ".join(cells) + " |"
        )
    if "heuristic" in args.policies and any(name in heur_pub for name in maps):
        label = "SMAClite" if args.backend == "smaclite" else "ours"
        lines += ["", *check_lines(rows, heur_pub, label=label)]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
