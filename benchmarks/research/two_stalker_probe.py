"""2s_vs_1sc on the embedded engine: can scripted stalkers beat the spine crawler by trading its fire?

A diagnostic for the 2s_vs_1sc gap (docs/fidelity.md, "Known gaps"): both stalkers walk in and attack; with
``--swap-shield S`` a stalker the crawler is shooting steps back out of its reach once its shields are at or
below S, if its partner has more shields + hit points left, and walks in again when the crawler has switched.
It reads the crawler's current target from the engine's state, which no agent can observe: an upper bound on
what alternating fire can do here, not a policy.

    .venv/bin/python benchmarks/research/two_stalker_probe.py --episodes 100 --swap-shield -1 0 20 40 60
"""

from __future__ import annotations

import argparse

import numpy as np

from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.sim.units import S_HP, S_SH, S_TGT, S_X, S_Y

ATTACK_CRAWLER = 6  # the first attack action: enemy 0, the spine crawler


def _move(dx: float, dy: float) -> int:
    """SMAC's move action (north 2, south 3, east 4, west 5) along the larger component of (dx, dy)."""
    return (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)


def make_env(seed: int) -> StarCraft2Env:
    """2s_vs_1sc on the embedded engine, on the table-by-table path (``fused=False``), whose ``env._engine``
    holds the engine state that :func:`play` reads (the crawler's target)."""
    return StarCraft2Env(map_name="2s_vs_1sc", seed=seed, backend="sim", fused=False)


def play(env: StarCraft2Env, swap_shield: float) -> tuple[bool, int, float]:
    """One episode; returns (won, length in agent steps, the crawler's hit points left)."""
    env.reset()
    done, t, info = False, 0, {}
    while not done:
        S = env._engine._batch.S[0]  # allies 0 and 1, the crawler 2
        cx, cy, target = S[2, S_X], S[2, S_Y], int(S[2, S_TGT])
        actions = []
        for i in range(2):
            avail = env.get_avail_agent_actions(i)
            if S[i, S_HP] <= 0:
                actions.append(0)
                continue
            j = 1 - i
            partner_fresher = S[j, S_HP] > 0 and S[j, S_SH] + S[j, S_HP] > S[i, S_SH] + S[i, S_HP]
            if target == i and S[i, S_SH] <= swap_shield and partner_fresher:
                a = _move(S[i, S_X] - cx, S[i, S_Y] - cy)  # step back out of its reach
            elif avail[ATTACK_CRAWLER]:
                a = ATTACK_CRAWLER
            else:
                a = _move(cx - S[i, S_X], cy - S[i, S_Y])  # walk in
            actions.append(a if avail[a] else 1)
        _, done, info = env.step(actions)
        t += 1
    return bool(info.get("battle_won")), t, float(env._engine._batch.S[0][2, S_HP])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--swap-shield", type=float, nargs="+", default=[-1.0, 0.0, 20.0, 40.0, 60.0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print("| swap when shields <= | episodes | wins | episode length | crawler HP left |")
    print("|---|---|---|---|---|")
    for s in args.swap_shield:
        env = make_env(args.seed)
        runs = [play(env, s) for _ in range(args.episodes)]
        won, length, left = np.array(runs, dtype=float).T
        label = "never" if s < 0 else f"{s:g}"
        print(f"| {label} | {len(runs)} | {int(won.sum())} | {length.mean():.1f} | {left.mean():.0f} |")
        env.close()


if __name__ == "__main__":
    main()
