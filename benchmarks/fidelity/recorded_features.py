"""What SMAC's agents saw on the game (3m), beside what the library computes from the same units.

og-marl's recordings (source D in ``docs/fidelity.md``) hold, for every step, SMAC's global state, each
agent's observation and the actions SMAC allowed it. The library's feature layer
(``SmacFeatures.observe``, the compiled path, and with ``--reference`` its NumPy reference) is given the
units the state describes (positions from the map's centre times the playable extent 28, health times 45,
the allies' weapon cooldown times 15, the last actions) and its observations, available actions and state
are compared with the recorded ones, entry by entry. Everything but the move features depends only on the
units; the move features (SMAC's ``can_move``: is the cell one unit away in that direction pathable) also
read the map's pathing grid, so where they differ they show where the engine's arena differs from the
game's. The table of cells lists what the recording proves about 3m's pathing: a move SMAC allowed proves
its probed cell pathable, one it refused (for a living agent) proves it blocked.
Results: ``results/recorded_features.md``.

    .venv/bin/python benchmarks/fidelity/recorded_features.py <data>/executor_sequence_log_*.tfrecord \\
        --out benchmarks/results/recorded_features.md
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
from marl.envs.smac.batched_env import BatchedStarCraft2Env  # noqa: E402

N, M, A = 3, 3, 9  # 3m
EXTENT = 28.0  # SMAC's 3m state: positions over the playable extent
DIRS = {2: (0, 1), 3: (0, -1), 4: (1, 0), 5: (-1, 0)}  # SMAC: north, south, east, west
TOL = 1e-4  # the recording stores float32


def compare(episodes: list[Episode], env: BatchedStarCraft2Env) -> dict[str, np.ndarray]:
    """The library's (avail, obs, state) on every recorded step beside the recorded ones, stacked."""
    centre = np.asarray(env.spec.map_size, dtype=float) / 2
    s = np.concatenate([ep.state_TS for ep in episodes])
    u = units_of(s, N, M, centre, EXTENT)
    last = s[:, -N * A :].reshape(len(s), N, A).astype(np.float32)
    avail, obs, state = env.features.observe(u, last, np.zeros(len(s), dtype=np.int64))
    return {
        "avail": avail,
        "obs": obs,
        "state": state,
        "game_avail": np.concatenate([ep.legal_TNA for ep in episodes]).astype(np.int64),
        "game_obs": np.concatenate([ep.obs_TNO for ep in episodes]),
        "game_state": s,
        "pos": u.pos,
        "alive": u.health > 0,
    }


def pathing_evidence(got: dict[str, np.ndarray]) -> tuple[set, set]:
    """Cells the recording proves pathable and blocked (SMAC's ``can_move`` probes ``int(pos + 1 dir)``)."""
    yes, no = set(), set()
    for r, i in zip(*np.nonzero(got["alive"][:, :N]), strict=True):
        x, y = got["pos"][r, i]
        for a, (dx, dy) in DIRS.items():
            (yes if got["game_avail"][r, i, a] else no).add((int(x + dx), int(y + dy)))
    return yes, no


def _row(what: str, diff: np.ndarray) -> str:
    return f"| {what} | {diff.size} | {int((diff < TOL).sum())} | {diff.max():.2e} |"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument(
        "--reference", action="store_true", help="the NumPy reference instead of the compiled path"
    )
    args = ap.parse_args(argv)
    run = harness.start()
    episodes = episodes_or_exit(ap, args.files, N, M)
    env = BatchedStarCraft2Env("3m", 1, 0)
    env.features.compiled = not args.reference
    got = compare(episodes, env)
    env.close()
    d_obs = np.abs(got["obs"] - got["game_obs"])
    move = slice(0, 4)  # the obs's move features come first (docs/smac.md section 3.1)
    rest = np.ones(d_obs.shape[-1], dtype=bool)
    rest[move] = False
    d_av = np.abs(got["avail"] - got["game_avail"]).astype(float)
    rows = len(got["state"])
    yes, no = pathing_evidence(got)
    grid = np.asarray(env.spec.pathing_grid, dtype=bool)
    wrong_yes = sorted(c for c in yes if not grid[c])
    wrong_no = sorted(c for c in no if grid[c])
    path = "the NumPy reference" if args.reference else "the compiled path"
    lines = [
        "# SMAC's observations, available actions and state: the game's 3m episodes beside the library's",
        "",
        *run_header(__file__, argv, run, f"{len(episodes)} recorded episodes, {rows} steps"),
        f"- the library's features ({path}) from the units each recorded state describes; an entry matches "
        f"within {TOL:g}",
        "",
        "| what | entries | match | largest difference |",
        "|---|---|---|---|",
        _row("state", np.abs(got["state"] - got["game_state"])),
        _row("observations, all but the move features", d_obs[..., rest]),
        _row("observations, the 4 move features", d_obs[..., move]),
        _row("available actions, moves (2-5)", d_av[..., 2:6]),
        _row("available actions, the others", np.delete(d_av, np.s_[2:6], axis=-1)),
        "",
        "## 3m's pathing as the recording proves it, beside the engine's arena",
        "",
        f"- cells proven pathable: {len(yes)}, x {min(c[0] for c in yes)}-{max(c[0] for c in yes)}, "
        f"y {min(c[1] for c in yes)}-{max(c[1] for c in yes)}; proven blocked: {sorted(no)}",
        f"- proven pathable but blocked in the engine: {wrong_yes or 'none'}",
        f"- proven blocked but pathable in the engine: {wrong_no or 'none'}",
    ]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
