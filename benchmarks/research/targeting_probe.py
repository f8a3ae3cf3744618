"""Probe of the built-in AI's targeting: SMAC's attack-nearest heuristic against it, with a split-fire index.

For each map it plays ``--episodes`` episodes of SMAC's heuristic allies (``heuristic_ai=True``) on the
embedded engine and reports the win rate (normal-approximation 95 % half-width), the mean episode length and
a *split-fire index*: at every agent step after the first ally death (while two or more allies live), the
number of distinct allies the living enemies target, divided by min(enemies with a target, living allies);
1 means every enemy shoots a different ally (as far as possible), lower means focus fire.

``--mirror-enemy-spawn`` mirrors the enemies' spawn layout along x about their spawn point (a diagnostic:
the engine lays both sides out on the same square grid, so on 3m the allies lead with one marine and the
enemies with two; see docs/fidelity.md).

    .venv/bin/python benchmarks/research/targeting_probe.py --maps 3m 8m --episodes 1000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

import marl.envs.smac.sim.engine as sim_engine  # noqa: E402
from benchmarks.fidelity.fidelity import play_batched  # noqa: E402
from benchmarks.fidelity.replay_engine import split_index  # noqa: E402
from marl.envs.smac.batched_env import BatchedStarCraft2Env  # noqa: E402


def mirrored_layout(spec) -> np.ndarray:
    """The engine's spawn layout with every enemy's x offset from its spawn point negated."""
    pos = sim_engine.spawn_layout(spec).copy()
    xs = np.array([float(g.spawn[0]) for g in spec.enemies for _ in range(g.count)])
    n = spec.n_agents
    pos[n:, 0] = 2.0 * xs - pos[n:, 0]
    return pos


def probe(
    map_name: str, episodes: int, seed: int, n_envs: int = 32, mirror: bool = False
) -> dict[str, float]:
    """Play ``episodes`` heuristic episodes; win rate, its 95 % half-width, mean length, split-fire index."""
    env = BatchedStarCraft2Env(map_name, min(n_envs, episodes), seed, heuristic_ai=True)
    if mirror:
        env.engine.base_pos = mirrored_layout(env.spec)
    E, n = env.n_envs, env.n_agents
    won, length, split = [], [], []

    def on_step(running: np.ndarray) -> None:
        for e in np.flatnonzero(running):
            s = split_index(env.engine.S[e], n)
            if s is not None:
                split.append(s)

    def on_end(e: int, info: dict[str, np.ndarray], steps: int) -> None:
        won.append(bool(info["battle_won"][e]))
        length.append(steps)

    play_batched(env, episodes, lambda: np.zeros((E, n), dtype=np.int64), on_end, on_step)
    env.close()
    w = float(np.mean(won))
    return {
        "n": len(won),
        "win": w,
        "win_ci": 1.96 * float(np.sqrt(w * (1 - w) / len(won))),
        "length": float(np.mean(length)),
        "split": float(np.mean(split)) if split else float("nan"),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--maps", nargs="+", default=["3m", "8m"])
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mirror-enemy-spawn", action="store_true")
    a = p.parse_args(argv)
    if a.episodes < 1:
        p.error(f"--episodes must be at least 1, got {a.episodes}")
    print("| map | n | heuristic win rate | episode length | split-fire index |")
    print("|---|---|---|---|---|")
    for m in a.maps:
        r = probe(m, a.episodes, a.seed, mirror=a.mirror_enemy_spawn)
        win = f"{100 * r['win']:.1f} % ± {100 * r['win_ci']:.1f}"
        print(f"| {m} | {r['n']} | {win} | {r['length']:.2f} | {r['split']:.3f} |")


if __name__ == "__main__":
    main()
