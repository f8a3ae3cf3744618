"""Does the embedded engine play the game's 3m the way the game did, given the game's own ally actions?

Episodes recorded on StarCraft II (og-marl's SMAC dataset "3m, Tiny", source D in docs/fidelity.md) are
stitched into whole episodes (``recorded_episodes.py``: og-marl's sequences of 20 steps overlap by 10), the
game's statistics are read from them (win rate, length, allies alive, enemy health left, and a damage-based
split-fire index of the enemies' fire), and every episode is replayed in the engine with the recorded ally
actions (``replay_engine.py``): once with the units placed where the recording's first state has them
(written into the engine's state after reset: the engine has no placement call), once on the engine's own
spawns. Reported: the same statistics, per-episode agreement of outcomes, and per-step divergence of
health and positions. Results: ``benchmarks/results/replay_recorded.md``.

    python benchmarks/fidelity/replay_recorded.py --map 3m --extent 28 \\
        <data>/executor_sequence_log_*.tfrecord \\
        --out benchmarks/results/replay_recorded.md --json replay_recorded.json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity.recorded_episodes import (  # noqa: E402
    Episode,
    cluster_bootstrap,
    game_won,
    mean_ci,
    sequences,
    stitch,
    trajectory_stats,
    unpack,
)
from benchmarks.fidelity.replay_engine import (  # noqa: E402
    DIVERGENCE_STEPS,
    SUBS,
    TIMEOUT,
    WON,
    Replays,
    divergence,
    replay,
)
from marl.envs.smac.maps import load_map  # noqa: E402
from marl.envs.smac.sim.variants import parse_rules  # noqa: E402

METHOD = """## Method

- Episodes: og-marl's logger (``offline_environment_logger.py``) writes row t as s_t, a_t, r_{t+1}, d_{t+1},
  starts a 20-row sequence every 10 steps and zero-pads every open sequence when the episode ends, so
  consecutive sequences of an episode overlap by 10 rows and the final state s_T is never written. An episode
  starts at the only row with an all-zero last-action block; it is stitched from the first 10 rows of each
  of its sequences and the real rows (``zero_padding_mask``) of its last one; every overlap is checked.
- Game outcome: a win is a last reward holding SMAC's win bonus (reward scaled by 20 / 365 on 3m,
  ``docs/smac.md`` section 5); length T = rows; allies alive and enemy health left (mean fraction of 45 HP)
  are read at s_{T-1}, the last state both the game and the engine have, for the engine too (its s_{L-1}).
- Hits: a drop of k x 6 HP between two states is k hits (marine: 45 HP, armour 0, 6 damage, period 13.8
  loops: ``unit_data.yaml``, source X in ``docs/fidelity.md``; a SMAC step is 8 loops, source P), so one
  enemy lands at most one hit per step; a death counts at least one. The damage split-fire index, per step
  from a state with an ally dead and two or more alive, with two or more hits: distinct allies hit /
  min(hits, living allies) (1: spread as widely as possible). ``targeting_probe.py``'s index is the same
  ratio over the enemies' current targets; it is given for the engine beside the damage-based one.
- Replays: the recorded actions, in SMAC's ids, step the engine; an action the engine does not allow then
  (SMAC's available actions) becomes no-op (in the engine: keep the current order) and is counted; after
  the recording runs out the allies no-op. "Recorded spawns": every unit put at its recorded s_0
  position after reset (the engine's state array, no engine change); "own spawns": the engine's reset,
  units paired with the recorded ones by position. Divergence at step t: over replays where both have s_t,
  the mean |health fraction| difference per unit and the mean distance (game units) between units alive in
  both.
- Intervals: 95 %, normal approximation over episodes (each episode's replays averaged first; proportions
  clipped to [0, 100 %]); for the step-pooled fire statistics, a bootstrap resampling whole episodes
  (2000 resamples, numpy, seed 0).
"""


def _per_episode(values_R: np.ndarray, seeds: int) -> np.ndarray:
    v = np.asarray(values_R, dtype=float).reshape(-1, seeds)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(v, axis=1)  # NaN: the episode has no such event


def game_stats(episodes: list[Episode], n: int, m: int, limit: int) -> dict[str, np.ndarray | list]:
    """``trajectory_stats`` of the recorded episodes (states s_0 .. s_{T-1}; s_T is not recorded)."""
    hp = [unpack(ep.state_TS, n, m, np.zeros(2), 1.0) for ep in episodes]
    T = np.array([len(ep.actions_TN) for ep in episodes])
    won = np.array([game_won(ep, m, 45.0 * m) for ep in episodes])
    ally, enemy = [h["ally_hp"] for h in hp], [h["enemy_hp"] for h in hp]
    return trajectory_stats(ally, enemy, won, (~won) & (T >= limit), T)


def engine_stats(reps: Replays, n: int) -> dict[str, np.ndarray | list]:
    """``trajectory_stats`` of the replays (per replay), on s_0 .. s_{L-1} as for the game."""
    L = reps.length_R
    ally = [reps.hp_RTU[r, : L[r], :n] for r in range(len(L))]
    enemy = [reps.hp_RTU[r, : L[r], n:] for r in range(len(L))]
    return trajectory_stats(ally, enemy, reps.status_R == WON, reps.status_R == TIMEOUT, L)


def _grouped(lists: list[list[float]], seeds: int) -> list[list[float]]:
    return [sum(lists[k * seeds : (k + 1) * seeds], []) for k in range(len(lists) // seeds)]


def outcome_rows(st: dict, seeds: int) -> dict[str, tuple[float, float, float]]:
    """Mean and 95 % interval of each statistic: normal approximation over episodes (replays averaged
    per episode first) for the scalars, episode-resampling bootstrap for the step-pooled fire values."""
    out = {}
    for key in (
        "won",
        "timeout",
        "length",
        "allies_alive",
        "enemy_hp_left",
        "first_hit",
        "first_hits",
        "first_death",
    ):
        mu, half, _ = mean_ci(_per_episode(st[key], seeds))
        out[key] = (mu, mu - half, mu + half)
    for key in ("split", "hit_before", "hit_after"):
        out[key] = cluster_bootstrap(_grouped(st[key], seeds))
    out["split_n"] = (float(sum(len(v) for v in st["split"])),) * 3
    return out


def agreement(game: dict, eng: dict, seeds: int) -> dict[str, tuple[float, float, float]]:
    """Per replay against its episode: outcome agrees, and engine minus game for the end statistics."""
    rep = lambda x: np.repeat(np.asarray(x, dtype=float), seeds)  # noqa: E731
    out = {"win_agrees": eng["won"] == rep(game["won"]).astype(bool)}
    for key in ("length", "allies_alive", "enemy_hp_left"):
        out[key] = np.asarray(eng[key], dtype=float) - rep(game[key])
    res = {}
    for key, v in out.items():
        mu, half, _ = mean_ci(_per_episode(v, seeds))
        res[key] = (mu, mu - half, mu + half)
    return res


def _fmt(v: tuple[float, float, float], pct: bool = False, digits: int = 2) -> str:
    k = 100.0 if pct else 1.0
    unit = " %" if pct else ""
    d = 1 if pct else digits
    lo, hi = (max(v[1], 0.0), min(v[2], 1.0)) if pct else (v[1], v[2])
    return f"{k * v[0]:.{d}f}{unit} [{k * lo:.{d}f}, {k * hi:.{d}f}]"


def report(meta: dict, rows: dict, agree: dict, div: dict, subs: dict) -> str:
    """The results file's Markdown: header, outcome, agreement, divergence and substitution tables."""
    cols = list(rows)
    lines = [
        "# Replaying the game's 3m episodes in the embedded engine, with the game's own ally actions",
        "",
        *[f"- {k}: {v}" for k, v in meta.items()],
        "",
        METHOD,
        "## Outcomes (mean [95 % interval]; end statistics at the state before the last step)",
        "",
        "| statistic | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    names = {
        "won": ("win rate", True),
        "timeout": ("episodes at the 60-step limit", True),
        "length": ("episode length (steps)", False),
        "allies_alive": ("allies alive", False),
        "enemy_hp_left": ("enemy health left (fraction)", False),
        "first_hit": ("first state showing an ally hit", False),
        "first_hits": ("hits landed on allies in that step", False),
        "first_death": ("first state showing an ally dead", False),
        "split": ("damage split-fire index", False),
        "hit_before": ("allies hit per step with a hit, before the first ally death", False),
        "hit_after": ("allies hit per step with a hit, after the first ally death", False),
        "target_split": ("probe's target split-fire index (engine only)", False),
    }
    for key, (label, pct) in names.items():
        cells = [_fmt(rows[c][key], pct, 3 if "split" in key else 2) if key in rows[c] else "–" for c in cols]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        "| steps in the split-fire index | " + " | ".join(f"{rows[c]['split_n'][0]:.0f}" for c in cols) + " |"
    )
    lines += ["", "## Agreement with the game, per episode (engine minus game; mean [95 % interval])", ""]
    lines += ["| statistic | " + " | ".join(agree) + " |", "|---|" + "---|" * len(agree)]
    for key, label, pct in (
        ("win_agrees", "win/loss agrees", True),
        ("length", "length difference (steps)", False),
        ("allies_alive", "allies alive difference", False),
        ("enemy_hp_left", "enemy health left difference", False),
    ):
        lines.append(f"| {label} | " + " | ".join(_fmt(agree[c][key], pct) for c in agree) + " |")
    lines += ["", "## Recorded actions the engine did not allow (replaced by no-op)", ""]
    lines += ["| cause | " + " | ".join(subs) + " |", "|---|" + "---|" * len(subs)]
    for key in (*SUBS, "past_recording", "actions"):
        lines.append(f"| {key} | " + " | ".join(str(subs[c][key]) for c in subs) + " |")
    lines += ["", "## Divergence per step (game vs engine)", ""]
    head = "| step | " + " | ".join(f"{c}: n, ally hp, enemy hp, ally pos, enemy pos" for c in div) + " |"
    lines += [head, "|---|" + "---|" * len(div)]
    for t in DIVERGENCE_STEPS:
        cells = []
        for c in div:
            d = div[c][t]
            hp = f"{d['ally_hp']:.3f}, {d['enemy_hp']:.3f}"
            cells.append(f"{d['n']}, {hp}, {d['ally_pos']:.2f}, {d['enemy_pos']:.2f}")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="og-marl TFRecord files of one map")
    ap.add_argument("--map", required=True)
    ap.add_argument("--extent", type=float, required=True, help="the map's playable width (28 on 3m)")
    ap.add_argument("--seeds", type=int, default=4, help="engine replays per episode")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown report here")
    ap.add_argument("--json", type=Path, default=None, help="write the numbers as JSON here")
    ap.add_argument(
        "--variant",
        default="default",
        help="the enemies' candidate targeting rules, e.g. scan4+noretaliate "
        "(marl/envs/smac/sim/variants.py; "
        "not the engine's default)",
    )
    a = ap.parse_args(argv)
    run = harness.start()
    rules = parse_rules(a.variant)
    spec = load_map(a.map)
    n, m = spec.n_agents, spec.n_enemies
    episodes, found = stitch(sequences(sorted(a.files)), n, 6 + m)
    if not episodes:
        ap.error("no episode found in those files")
    centre = np.asarray(spec.map_size, dtype=float) / 2
    game = game_stats(episodes, n, m, spec.episode_limit)
    rows = {"game (recorded)": outcome_rows(game, 1)}
    agree, div, subs = {}, {}, {}
    for label, placed in (("engine, recorded spawns", True), ("engine, own spawns", False)):
        reps = replay(episodes, spec, a.extent, placed=placed, seeds=a.seeds, seed=a.seed, rules=rules)
        st = engine_stats(reps, n)
        rows[label] = outcome_rows(st, a.seeds)
        rows[label]["target_split"] = cluster_bootstrap(_grouped(reps.target_split_R, a.seeds))
        agree[label] = agreement(game, st, a.seeds)
        div[label] = divergence(episodes, reps, n, m, a.extent, centre)
        subs[label] = {**reps.subs, "past_recording": reps.past_recording, "actions": reps.actions}
    meta = {
        **harness.header(run, __file__, sys.argv[1:] if argv is None else argv, python="python"),
        "episodes": f"{len(episodes)} stitched from {found['sequences']} sequences "
        f"({found['overlaps_checked']} overlaps checked, {found['overlaps_differ']} differ; "
        f"{found['orphans']} sequences without an episode start; {found['no_terminal']} episodes without "
        f"a final discount of 0); {a.seeds} engine replays per episode and spawn kind, seed {a.seed}",
    }
    if rules.any():
        meta["targeting rules"] = f"{a.variant} (a candidate, not the engine's default)"
    text = report(meta, rows, agree, div, subs)
    print(text)
    if a.out:
        a.out.write_text(text)
    if a.json:
        blob = {"meta": meta, "outcomes": rows, "agreement": agree, "divergence": div, "substituted": subs}
        a.json.write_text(json.dumps(blob, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
