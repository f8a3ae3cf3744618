"""Whole episodes from og-marl's SMAC recordings (3m), the game's own statistics and a damage-based
fire-distribution index. Used by ``replay_recorded.py`` (results: ``results/replay_recorded.md``).

How og-marl writes an episode (``og_marl/offline_tools/offline_environment_logger.py`` at madiff commit
``41ba448``, confirmed on the data): every row ``t`` of a sequence holds ``s_t``, ``o_t``, the legal actions
and actions ``a_t`` chosen there, and the reward and discount *after* them, ``r_{t+1}``, ``d_{t+1}``. A new
sequence of 20 rows starts every 10 steps (``period`` 10), so consecutive sequences of one episode overlap
by 10 rows; when the episode ends every open sequence is zero-padded (``zero_padding_mask`` 0) and written,
the last real row having discount 0. The final state ``s_T`` is never written. An episode is therefore
stitched from the first 10 rows of each of its sequences, cut at the real rows of its last one; the first
row of an episode is the only one whose last-action block is all zero (``recorded_spawns.py``).

Game facts used here (sources in ``docs/fidelity.md`` and ``marl/envs/smac/sim/unit_data.yaml``): a marine
has 45 HP, armour 0, no shields, and its weapon does 6 damage (X, ``marine:`` row); its period is 0.8608
game seconds = 13.8 loops, minus at most 1 loop of jitter (X, ``RandomDelayMin``), so one marine lands at
most one hit in a SMAC step of 8 loops (P). The reward is scaled so that ``10 n_enemies + 200 + enemy
health`` (365 on 3m) gives 20 (SMAC, ``docs/smac.md`` section 5), so only a win brings one step above 9.05.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.fidelity.recorded_spawns import example, tfrecords
from marl.envs.smac.features_layout import Units

PERIOD = 10  # og-marl's period for its SMAC datasets (confirmed by the overlaps, see stitch())
MARINE_HP, MARINE_DAMAGE = 45.0, 6.0  # unit_data.yaml, marine (source X)
MARINE_MAX_CD = 15.0  # SMAC's unit_max_cooldown for a marine: the state shows weapon_cooldown / 15
WIN_BONUS, DEATH_BONUS, REWARD_SCALE = 200.0, 10.0, 20.0  # SMAC's reward (docs/smac.md section 5)


@dataclass
class Episode:
    """One recorded episode of T transitions (rows), in SMAC's agent and enemy order."""

    state_TS: np.ndarray  # (T, state_size) s_0 .. s_{T-1}
    actions_TN: np.ndarray  # (T, n) a_t, chosen in s_t
    rewards_T: np.ndarray  # (T,) r_{t+1} (agent 0's; SMAC's reward is shared)
    discounts_T: np.ndarray  # (T,) d_{t+1}
    episode_return: float  # og-marl's own field
    source: str  # file and first record
    obs_TNO: np.ndarray | None = None  # (T, n, obs_size) each agent's observation in s_t
    legal_TNA: np.ndarray | None = None  # (T, n, n_actions) the actions SMAC allowed there (0/1)


def sequences(paths: Iterable[Path]) -> Iterable[tuple[str, dict[str, np.ndarray]]]:
    """``(file:record, example)`` for every record of the files, in file order."""
    for path in paths:
        for i, rec in enumerate(tfrecords(Path(path))):
            yield f"{Path(path).name}:{i}", example(rec)


def stitch(
    seqs: Iterable[tuple[str, dict[str, np.ndarray]]], n_agents: int, n_actions: int, period: int = PERIOD
) -> tuple[list[Episode], dict[str, int]]:
    """Whole episodes from og-marl's overlapping sequences, with counts of what was checked."""
    stats = {"sequences": 0, "overlaps_checked": 0, "overlaps_differ": 0, "orphans": 0, "no_terminal": 0}
    episodes: list[Episode] = []
    group: list[tuple[str, dict[str, np.ndarray]]] = []

    def close() -> None:
        if not group:
            return
        rows = [ex for _, ex in group]
        # sequence k holds steps 10k .. 10k+19: its first `period` rows are new, the last one ends it
        keep = [period] * (len(rows) - 1) + [int(rows[-1]["zero_padding_mask"].sum())]

        def cat(key: str) -> np.ndarray:
            return np.concatenate([ex[key][:k] for ex, k in zip(rows, keep, strict=True)])

        disc = cat("agent_0_discounts")
        stats["no_terminal"] += int(disc[-1] != 0)
        acts = np.stack([cat(f"agent_{i}_actions") for i in range(n_agents)], axis=1)
        ret = float(rows[0]["episode_return"])
        obs, legal = (
            np.stack([cat(f"agent_{i}_{key}") for i in range(n_agents)], axis=1)
            if f"agent_0_{key}" in rows[0]
            else None
            for key in ("observations", "legal_actions")
        )
        episodes.append(
            Episode(cat("env_state"), acts, cat("agent_0_rewards"), disc, ret, group[0][0], obs, legal)
        )
        group.clear()

    for name, ex in seqs:
        stats["sequences"] += 1
        first = not ex["env_state"][0, -n_agents * n_actions :].any()
        if first:
            close()
        elif not group:
            stats["orphans"] += 1  # a sequence with no episode start before it
            continue
        else:
            prev = group[-1][1]
            n_prev, n_this = int(prev["zero_padding_mask"].sum()), int(ex["zero_padding_mask"].sum())
            k = min(n_prev - period, n_this)
            stats["overlaps_checked"] += 1
            if k < 0 or not np.array_equal(prev["env_state"][period : period + k], ex["env_state"][:k]):
                stats["overlaps_differ"] += 1
        group.append((name, ex))
    close()
    return episodes, stats


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The command line every recorded-3m benchmark shares: the TFRecord files and ``--out``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="og-marl TFRecord files of 3m")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    return ap


def episodes_or_exit(ap: argparse.ArgumentParser, files: list[Path], n: int, m: int) -> list[Episode]:
    """The recorded episodes of ``files`` (og-marl TFRecords of a map with ``n`` agents and ``m`` enemies),
    or the parser's error naming what is missing."""
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        ap.error(f"no such file(s): {', '.join(missing)}; give og-marl's TFRecord files of the map")
    episodes, _ = stitch(sequences(sorted(files)), n, 6 + m)
    if not episodes:
        ap.error("no episode found in those files")
    return episodes


def run_header(script: str | Path, argv: list[str] | None, run: harness.Run, runs: str) -> list[str]:
    """The header lines (:mod:`harness`: command, date, code and engine version, versions, machine, load,
    wall-clock since ``run``) of a results file of ``script`` (its ``__file__``), the date line followed by
    ``runs`` (what was read and run)."""
    shown = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    return harness.header_lines(run, script, shown, python="python", date_note=runs)


def emit(lines: list[str], out: Path | None) -> None:
    """Print a results file and write it to ``out`` if given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        out.write_text(text, encoding="utf-8")


def unpack(state_TS: np.ndarray, n: int, m: int, centre: np.ndarray, extent: float) -> dict[str, np.ndarray]:
    """SMAC's 3m state (no shields, no type bits) as health fractions (T, n) / (T, m) and world
    positions (T, n, 2) / (T, m, 2); a dead unit's position is NaN (SMAC zeroes its features)."""
    s = np.asarray(state_TS, dtype=float)
    ally = s[:, : n * 4].reshape(len(s), n, 4)
    enemy = s[:, n * 4 : n * 4 + m * 3].reshape(len(s), m, 3)
    out = {"ally_hp": ally[..., 0], "enemy_hp": enemy[..., 0]}
    for key, hp, rel in (
        ("ally_pos", ally[..., 0], ally[..., 2:4]),
        ("enemy_pos", enemy[..., 0], enemy[..., 1:3]),
    ):
        pos = centre + extent * rel
        pos[hp <= 0] = np.nan
        out[key] = pos
    return out


def units_of(state_TS: np.ndarray, n: int, m: int, centre: np.ndarray, extent: float) -> Units:
    """The marines SMAC's 3m states describe, as the library's feature layer takes them: positions (0 when
    dead), hit points, the allies' weapon cooldown in loops (the state's times 15, SMAC's marine maximum);
    no shields or energy."""
    s = np.asarray(state_TS, dtype=float)
    u = unpack(s, n, m, centre, extent)
    pos = np.nan_to_num(np.concatenate([u["ally_pos"], u["enemy_pos"]], axis=1))
    hp = np.concatenate([u["ally_hp"], u["enemy_hp"]], axis=1) * MARINE_HP
    cd = np.zeros_like(hp)
    cd[:, :n] = s[:, 1 : n * 4 : 4] * MARINE_MAX_CD
    zero = np.zeros_like(hp)
    return Units(n, pos, hp, zero, cd, zero, np.full(n + m, MARINE_HP))


def hits(hp_TU: np.ndarray, max_hp: float = MARINE_HP, damage: float = MARINE_DAMAGE) -> np.ndarray:
    """(T-1, U) hits each unit took between consecutive states, from its health fractions: a drop of
    ``k * damage`` is k hits; a unit that dies took at least one (its last health, rounded up in hits)."""
    hp = np.asarray(hp_TU, dtype=float) * max_hp
    drop = np.clip(hp[:-1] - hp[1:], 0.0, None)
    out = np.ceil(drop / damage - 1e-3).astype(np.int64)
    died = (hp[:-1] > 0) & (hp[1:] <= 0)
    return np.where(died, np.maximum(out, 1), out)


def fire_split(hp_TN: np.ndarray) -> tuple[list[float], list[int], list[int]]:
    """The damage-based split-fire index of one episode's ally health fractions (T, n).

    For each transition from a state with at least one ally dead and two or more alive, in which two or
    more hits landed: distinct allies hit / min(hits, living allies), 1 = spread as widely as possible,
    1 / min(...) = all on one. Also returned: the distinct allies hit in every transition with a hit,
    before and after the first death. ``replay_engine.split_index`` is the same ratio over the enemies'
    *targets* (distinct targets / min(enemies with a target, living allies)); here a landed hit stands
    for an enemy with a target, as a marine lands at most one hit per step.
    """
    hp = np.asarray(hp_TN, dtype=float)
    h = hits(hp)
    split, before, after = [], [], []
    for t in range(len(h)):
        alive = hp[t] > 0
        n_hit, distinct = int(h[t].sum()), int((h[t] > 0).sum())
        if n_hit:
            (after if (~alive).any() else before).append(distinct)
        if (~alive).any() and alive.sum() >= 2 and n_hit >= 2:
            split.append(distinct / min(n_hit, int(alive.sum())))
    return split, before, after


def first_fire(hp_TN: np.ndarray) -> tuple[float, float, float]:
    """From ally health fractions (T, n): the first state showing an ally hit, the hits landed on allies
    in that step, and the first state showing an ally dead (NaN where the states show none)."""
    h = hits(hp_TN).sum(axis=1)
    dead = (np.asarray(hp_TN) <= 0).any(axis=1)
    t_hit = int(np.argmax(h > 0)) + 1 if (h > 0).any() else None
    return (
        float(t_hit) if t_hit else float("nan"),
        float(h[t_hit - 1]) if t_hit else float("nan"),
        float(np.argmax(dead)) if dead.any() else float("nan"),
    )


def trajectory_stats(
    ally_hp: list[np.ndarray],
    enemy_hp: list[np.ndarray],
    won: np.ndarray,
    timeout: np.ndarray,
    length: np.ndarray,
) -> dict[str, np.ndarray | list]:
    """Per episode, from its health fractions s_0 .. s_{T-1} ((T, n) allies, (T, m) enemies): the given
    outcome, allies alive and enemy health left (mean fraction) at s_{T-1}, ``first_fire``, ``fire_split``."""
    fs = [fire_split(h) for h in ally_hp]
    ff = np.array([first_fire(h) for h in ally_hp]).reshape(-1, 3)
    return {
        "won": np.asarray(won, dtype=bool),
        "timeout": np.asarray(timeout, dtype=bool),
        "length": np.asarray(length),
        "allies_alive": np.array([(h[-1] > 0).sum() for h in ally_hp]),
        "enemy_hp_left": np.array([h[-1].mean() for h in enemy_hp]),
        "first_hit": ff[:, 0],
        "first_hits": ff[:, 1],
        "first_death": ff[:, 2],
        "split": [f[0] for f in fs],
        "hit_before": [f[1] for f in fs],
        "hit_after": [f[2] for f in fs],
    }


def game_won(ep: Episode, n_enemies: int, enemy_hp_total: float) -> bool:
    """A win: the last reward holds SMAC's win bonus (no step without one exceeds 9.05 on 3m)."""
    max_reward = DEATH_BONUS * n_enemies + WIN_BONUS + enemy_hp_total
    return bool(ep.rewards_T[-1] * max_reward / REWARD_SCALE >= WIN_BONUS - 1e-3)


def mean_ci(x: Iterable[float]) -> tuple[float, float, int]:
    """Mean, 95 % half-width by the normal approximation (1.96 standard errors), and n."""
    a = np.asarray(list(x), dtype=float)
    a = a[~np.isnan(a)]
    if len(a) == 0:
        return float("nan"), float("nan"), 0
    half = 1.96 * a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else float("nan")
    return float(a.mean()), float(half), len(a)


def cluster_bootstrap(
    groups: list[list[float]], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of all values pooled, with a 95 % percentile interval from resampling whole groups (episodes)."""
    flat = [v for g in groups for v in g]
    if not flat:
        return float("nan"), float("nan"), float("nan")
    sums = np.array([sum(g) for g in groups], dtype=float)
    cnts = np.array([len(g) for g in groups], dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    with np.errstate(invalid="ignore"):
        boots = sums[idx].sum(1) / cnts[idx].sum(1)
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return float(np.mean(flat)), float(lo), float(hi)
