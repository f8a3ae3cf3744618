"""SMAC's reward as the game's 3m episodes recorded it, beside the library's reward on the same states.

og-marl's recordings (source D in ``docs/fidelity.md``) hold SMAC's global state ``s_t`` and the reward
``r_{t+1}`` that SMAC's own Python code computed on the game for every step. The library's reward
(``SmacFeatures.reward_and_end``: damage dealt, 10 per enemy killed, 200 for a win, scaled so that a
perfect episode gives 20; SMAC's defaults, ``docs/smac.md`` section 5) is computed here from the same
health in ``s_t`` and ``s_{t+1}`` and compared with the recorded reward, step by step. The last step of an
episode has no ``s_{t+1}`` in the recording; in a won episode it is known all the same (every enemy dies,
and with SMAC's positive-only reward the allies' health does not enter), so those steps are checked too.
Results: ``results/recorded_rewards.md``.

    .venv/bin/python benchmarks/fidelity/recorded_rewards.py <data>/executor_sequence_log_*.tfrecord \\
        --out benchmarks/results/recorded_rewards.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity.recorded_episodes import (  # noqa: E402
    MARINE_HP,
    Episode,
    emit,
    episodes_or_exit,
    game_won,
    parser,
    run_header,
    units_of,
)
from marl.envs.smac.batched_env import BatchedStarCraft2Env  # noqa: E402

N, M = 3, 3  # 3m
EXTENT = 28.0  # SMAC's 3m state: positions over the playable extent (they do not enter the reward)
TOL = 1e-5  # the recording stores float32 rewards (about 1e-7 relative)


def compare(episodes: list[Episode], env: BatchedStarCraft2Env) -> dict[str, np.ndarray]:
    """Per checked step: the library's reward minus the recorded one, whether it is an episode's last step,
    and the end code the library gives it (+1 win, 0 draw, -1 loss, 2 running)."""
    o = env.opts
    bonus = {1: o.reward_win, -1: o.reward_defeat}
    scale = env.max_reward / o.reward_scale_rate
    centre = np.asarray(env.spec.map_size, dtype=float) / 2
    diff, last, codes = [], [], []
    for ep in episodes:
        states = np.asarray(ep.state_TS)
        if game_won(ep, M, MARINE_HP * M):  # the unrecorded final state: every enemy dead
            final = states[-1].copy()
            final[N * 4 : N * 4 + M * 3 : 3] = 0.0  # the enemies' health fractions
            states = np.vstack([states, final])
        u = units_of(states, N, M, centre, EXTENT)
        dead = np.zeros((1, N + M), dtype=bool)
        for t in range(len(states) - 1):
            r, code, _, _ = env.features.reward_and_end(
                u.take(np.array([t])), u.take(np.array([t + 1])), dead
            )
            mine = (float(r[0]) + bonus.get(int(code[0]), 0.0)) / scale
            diff.append(mine - float(ep.rewards_T[t]))
            last.append(t == len(ep.rewards_T) - 1)
            codes.append(int(code[0]))
    return {"diff": np.array(diff), "last": np.array(last), "code": np.array(codes)}


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    run = harness.start()
    episodes = episodes_or_exit(ap, args.files, N, M)
    env = BatchedStarCraft2Env("3m", 1, 0)
    env.reset()  # SMAC's max_reward takes the enemies' maxima at the first reset
    got = compare(episodes, env)
    env.close()
    d, last = np.abs(got["diff"]), got["last"]
    inner = d[~last]
    wins = int(np.sum(last & (got["code"] == 1)))
    lines = [
        "# SMAC's reward: the game's 3m episodes beside the library's reward on the same states",
        "",
        *run_header(__file__, argv, run, f"{len(episodes)} recorded episodes"),
        f"- the library's reward from the health in s_t and s_(t+1) (`SmacFeatures.reward_and_end`, SMAC's "
        f"defaults, max_reward {env.max_reward:g}); a step matches within {TOL:g} of the recorded one",
        "",
        "| steps | compared | match | largest difference |",
        "|---|---|---|---|",
        f"| within an episode | {len(inner)} | {int((inner < TOL).sum())} | {inner.max():.2e} |",
        f"| the last step of a won episode (win bonus) | {wins} | {int((d[last] < TOL).sum())} | "
        f"{d[last].max() if last.any() else 0.0:.2e} |",
    ]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
