#!/usr/bin/env python
"""A trained checkpoint's greedy play on the embedded engine under candidate rules (calibration research).

For each rule set (``default``: the engine as it is; otherwise a name of ``sim/variants.py``'s candidate
rules, e.g. ``nohelp``, ``noretaliate``) it plays ``--episodes`` greedy episodes at once with the
checkpoint's policy and prints the win rate [Wilson 95 %], the mean return (SMAC's default reward) and,
per side, the unit-steps per episode a unit stood pinned: alive, unmoved over the step (under 0.01), with a
living target beyond its weapon's reach (:func:`pinned`; the candidate rule ``unpin`` is about these). It
shows what a learned policy relies on: a rule whose absence lets it win far more than the game's runs do
at the same budget is a candidate for the gap (``docs/fidelity.md``, "Calibration against the SMAC paper's
runs").

    .venv/bin/python benchmarks/research/checkpoint_rules.py results/qmix_smac_paper_5m_vs_6m_seed0_<time> \\
        --rules default nohelp --episodes 64 --out benchmarks/results/checkpoint_rules.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402


def pinned(S: np.ndarray, before_XY: np.ndarray, utype: np.ndarray) -> np.ndarray:
    """(E, U) mask of the units that did not move since ``before_XY`` (under 0.01) although they have a
    living target beyond their weapon's reach (edge to edge, + 0.05): held by others, not fighting."""
    from marl.envs.smac.sim.units import PROPS, RADIUS, RANGE, S_HP, S_TGT, S_X, S_Y

    xy = S[:, :, [S_X, S_Y]]
    tgt = S[:, :, S_TGT].astype(np.int64)
    t = np.clip(tgt, 0, None)
    t_xy = np.take_along_axis(xy, t[:, :, None].repeat(2, axis=2), axis=1)
    gap = np.linalg.norm(xy - t_xy, axis=2) - PROPS[utype, RADIUS][None] - PROPS[utype, RADIUS][t]
    out_of_reach = (
        (tgt >= 0)
        & (np.take_along_axis(S[:, :, S_HP], t, axis=1) > 0)
        & (gap > PROPS[utype, RANGE][None] + 0.05)
    )
    unmoved = np.linalg.norm(xy - before_XY, axis=2) < 0.01
    return (S[:, :, S_HP] > 0) & unmoved & out_of_reach


APPROACH = 8  # the first steps of an episode, while the two sides walk in


def target_shares(
    S: np.ndarray, utype: np.ndarray, na: int, live: np.ndarray, step: int = APPROACH + 1
) -> dict[str, float]:
    """Per enemy type, the count of living enemies (in the envs ``live``) whose target is an ally of each
    type, keyed ``"<enemy type>><ally type>"``, plus ``"<enemy type>>none"`` and, when ``step`` (the
    episode's step just taken, from 1) is past the first ``APPROACH``, ``"<enemy type>>none, fighting"``."""
    from marl.envs.smac.sim.units import N_TYPES, S_HP, S_TGT
    from marl.envs.smac.types import UNIT_NAMES

    out: dict[str, float] = {}
    tgt = S[:, na:, S_TGT].astype(np.int64)
    alive = (S[:, na:, S_HP] > 0) & live[:, None]
    for k, u in enumerate(utype[na:]):
        name = UNIT_NAMES[u % N_TYPES]
        for e in np.flatnonzero(alive[:, k]):
            t = tgt[e, k]
            key = f"{name}>{UNIT_NAMES[utype[t] % N_TYPES] if t >= 0 else 'none'}"
            out[key] = out.get(key, 0.0) + 1.0
            if t < 0 and step > APPROACH:
                out[f"{name}>none, fighting"] = out.get(f"{name}>none, fighting", 0.0) + 1.0
    return out


def play(run: Path, rules: list[str], episodes: int, seed: int) -> list[dict[str, float]]:
    """Greedy win rate (with its Wilson interval) and mean return of ``run``'s newest intact checkpoint
    under each of ``rules``, ``episodes`` episodes each, all envs stepped together."""
    from marl.checkpoint import load_latest
    from marl.envs.smac.research import variant_env
    from marl.evaluate import load_policy
    from marl.report.paper_runs import wilson
    from marl.trainer_state import check_payload

    payload = load_latest(run, check=check_payload)
    if payload["meta"]["config"]["env"]["name"] != "sc2":
        name = payload["meta"]["config"]["env"]["name"]
        raise SystemExit(f"{run}: a run on a SMAC map is needed, this one played {name}")
    policy = load_policy(payload, seed)
    cfg = policy.cfg
    out = []
    for rule in rules:
        controller = policy.controller(seed)
        env = variant_env(cfg.env.map_name, episodes, seed, "" if rule == "default" else rule, fused=False)
        env.reset()
        controller.init_hidden(episodes)
        running = np.ones(episodes, dtype=bool)
        ret, won = np.zeros(episodes), np.zeros(episodes, dtype=bool)
        eng, n = env.engine, env.n_agents
        held = np.zeros((episodes, 2))  # pinned unit-steps of the allies, the enemies
        shares: dict[str, float] = {}
        step = 0
        while running.any():
            acts = controller.select_actions(env.get_obs(), env.get_avail_actions(), 0, test_mode=True)
            before_XY = eng.S[:, :, :2].copy()
            r, term, step_info = env.step(acts, running)
            step += 1
            mask = pinned(eng.S, before_XY, eng.utype) & running[:, None]
            held += np.stack([mask[:, :n].sum(1), mask[:, n:].sum(1)], axis=1)
            for key, v in target_shares(eng.S, eng.utype, n, running, step).items():
                shares[key] = shares.get(key, 0.0) + v
            ret[running] += r[running]
            won |= running & term & step_info["battle_won"]
            running &= ~term
        env.close()
        lo, hi = wilson(float(won.mean()), episodes)
        out.append(
            {"map": cfg.env.map_name, "alg": cfg.alg, "rules": rule, "win": float(won.mean()), "lo": lo,
             "hi": hi, "ret": float(ret.mean()), "held_allies": float(held[:, 0].mean()),
             "held_enemies": float(held[:, 1].mean()), "targets": _fractions(shares)}
        )  # fmt: skip
    return out


def _fractions(counts: dict[str, float]) -> str:
    """``"stalker>zealot 0.29, ..."``: each enemy type's targets as fractions of its unit-steps."""
    total: dict[str, float] = {}
    for key, v in counts.items():
        if not key.endswith(", fighting"):  # a part of "<type>>none", not a target of its own
            total[key.split(">")[0]] = total.get(key.split(">")[0], 0.0) + v
    return ", ".join(f"{k} {v / total[k.split('>')[0]]:.2f}" for k, v in sorted(counts.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run folder (its newest intact checkpoint is played)")
    ap.add_argument("--rules", nargs="+", default=["default"])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--targets", action="store_true", help="add what the enemies target, by unit type")
    ap.add_argument("--out", default="", help="append this run (header and table) to a markdown file")
    args = ap.parse_args()
    if args.episodes < 1:
        ap.error("--episodes must be >= 1")
    run = harness.start()
    head = "| map | run | rules | greedy win % [95 %] | return | pinned unit-steps a game: allies, enemies |"
    if args.targets:
        head += (
            " enemies' targets (enemy type>ally type: share of its unit-steps after each step;"
            f" none, fighting: no target after step {APPROACH}) |"
        )
    rows = [head]
    rows.append("|---|---|---|---|---|---|" + ("---|" if args.targets else ""))
    for r in play(args.run, args.rules, args.episodes, args.seed):
        ci = f"{100 * r['win']:.0f} [{100 * r['lo']:.0f}, {100 * r['hi']:.0f}]"
        held = f"{r['held_allies']:.1f}, {r['held_enemies']:.1f}"
        rows.append(f"| {r['map']} | {r['alg']} | {r['rules']} | {ci} | {r['ret']:.1f} | {held} |")
        if args.targets:
            rows[-1] += f" {r['targets']} |"
        print(rows[-1], flush=True)
    if args.out:
        note = f"seed {args.seed}; {args.episodes} episodes a cell"
        header = harness.header_lines(run, __file__, [str(a) for a in sys.argv[1:]], date_note=note)
        head = [f"## `{harness.command(__file__, sys.argv[1:])}`", "", *header[1:], ""]
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n".join(head + rows) + "\n\n")


if __name__ == "__main__":
    main()
