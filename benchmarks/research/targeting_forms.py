#!/usr/bin/env python
"""Candidate forms of the built-in AI's targeting against the three checks the calibration has, in one table.

A form of the enemies' targeting (a name of ``sim/variants.py``'s candidate rules, or ``default``: the
engine's) must fit all three at once:

* **D**, the game's recorded 3m episodes (``targeting_fit.py``): the first ally death and the split-fire
  index of the engine replaying the game's ally actions, against the game's 95 % intervals (optional:
  ``--recorded FILES``; the files are og-marl's, outside the repository).
* **SMAC's heuristic** (``fidelity.py``): its win rate on ``--heuristic-maps`` beside the published figures.
* **Trained checkpoints** (``checkpoint_rules.py``): the greedy win rate of each ``--checkpoints`` run under
  the form, beside the game's QMIX runs at 300k (median [range]); a checkpoint trained under the engine's
  rules that still wins far above that range under a form shows the form leaves what the policy uses.

    .venv/bin/python benchmarks/research/targeting_forms.py --forms default noretaliate closer5 \\
        --checkpoints results/qmix_smac_paper_3s5z_s0 --recorded <og-marl>/3m/*.tfrecord \\
        --out benchmarks/results/targeting_forms.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402
from benchmarks.fidelity import fidelity  # noqa: E402
from benchmarks.research import checkpoint_rules  # noqa: E402

D_KEYS = ("first_death", "split")


def recorded_rows(files: list[Path], forms: list[str], seeds: int) -> dict[str, dict[str, tuple]]:
    """D's first-death state and split-fire index per form (mean, lo, hi), and the game's under ``game``."""
    from benchmarks.fidelity.recorded_episodes import sequences, stitch
    from benchmarks.fidelity.replay_recorded import game_stats, outcome_rows
    from benchmarks.research.targeting_fit import screen
    from marl.envs.smac.maps import load_map

    spec = load_map("3m")
    n, m = spec.n_agents, spec.n_enemies
    episodes, _ = stitch(sequences(sorted(files)), n, 6 + m)
    game = game_stats(episodes, n, m, spec.episode_limit)
    rows, _ = screen(episodes, spec, 28.0, game, forms, seeds, 0)
    out = {"game": {k: outcome_rows(game, 1)[k] for k in D_KEYS}}
    out.update({f: {k: rows[f][k] for k in D_KEYS} for f in forms})
    return out


def game_band(map_name: str, steps: int = 300_000) -> str:
    """The game's QMIX test win rate at ``steps``: median [range] over the SMAC paper's runs."""
    from marl.report.paper_runs import band, load_paper_runs

    b = band(load_paper_runs().get((map_name, "QMIX"), []), steps, "win_rate")
    return "-" if b is None else f"{b.median:.2f} [{b.lo:.2f}, {b.hi:.2f}]"


def main(argv: list[str] | None = None) -> str:
    """Build the table (printed, and written to ``--out`` with a header); returns it."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forms", nargs="+", default=["default", "noretaliate"])
    ap.add_argument("--checkpoints", nargs="*", type=Path, default=[], help="run folders (newest checkpoint)")
    ap.add_argument("--recorded", nargs="*", type=Path, default=[], help="D: og-marl 3m tfrecord files")
    ap.add_argument("--heuristic-maps", nargs="*", default=["3s5z", "10m_vs_11m", "2s3z", "27m_vs_30m"])
    ap.add_argument("--heuristic-episodes", type=int, default=500)
    ap.add_argument("--episodes", type=int, default=64, help="greedy episodes per checkpoint and form")
    ap.add_argument("--seeds", type=int, default=2, help="engine replays per recorded episode")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if min(args.heuristic_episodes, args.episodes, args.seeds) < 1:
        ap.error("--heuristic-episodes, --episodes and --seeds must be >= 1")
    from marl.envs.smac.sim.variants import parse_rules

    for form in args.forms:
        if form != "default":
            try:
                parse_rules(form)
            except ValueError as err:
                ap.error(str(err))
    run = harness.start()
    d = recorded_rows(args.recorded, args.forms, args.seeds) if args.recorded else {}
    published = fidelity.published_heuristic(yaml.safe_load(fidelity.PUBLISHED.read_text()))
    heur: dict[str, list[str]] = {f: [] for f in args.forms}
    for form in args.forms:
        for name in args.heuristic_maps:
            episodes = min(args.heuristic_episodes, fidelity.LARGE.get(name, args.heuristic_episodes))
            r = fidelity.run_sim(name, "heuristic", episodes, 0, sim_rules="" if form == "default" else form)
            heur[form].append(f"{100 * fidelity.summarize(r)['win']:.1f}")
    ckpt: dict[str, list[str]] = {f: [] for f in args.forms}
    labels = []
    for path in args.checkpoints:
        rows = checkpoint_rules.play(path, args.forms, args.episodes, 11)
        labels.append((rows[0]["map"], path.name))
        for r in rows:
            ckpt[r["rules"]].append(f"{100 * r['win']:.0f}")
    head = ["form"]
    head += ["D: first death", "D: split-fire index"] if d else []
    head += [f"heuristic {m} %" for m in args.heuristic_maps]
    head += [f"checkpoint {m} ({name}) %" for m, name in labels]
    target = ["**target**"]
    for k, (mu, lo, hi) in d.get("game", {}).items():
        p = 3 if k == "split" else 2
        target.append(f"{mu:.{p}f} [{lo:.{p}f}, {hi:.{p}f}]")
    target += [
        f"{published[m][0]:.0f} ({published[m][1]})" if m in published else "-" for m in args.heuristic_maps
    ]
    target += [f"game 300k: {game_band(m)}" for m, _ in labels]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|", "| " + " | ".join(target) + " |"]
    for form in args.forms:
        cells = [form]
        if d:
            for k in D_KEYS:
                mu, g = d[form][k][0], d["game"][k]
                cells.append(f"{mu:.{3 if k == 'split' else 2}f}" + (" *" if g[1] <= mu <= g[2] else ""))
        cells += heur[form] + ckpt[form]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out:
        shown = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
        header = harness.header_lines(run, __file__, shown)
        intro = [
            "# Candidate forms of the enemies' targeting against D, the heuristic and trained checkpoints",
            "",
            *header,
            f"- D: the game's 3m episodes replayed, {args.seeds} engine replays each (* = inside the game's "
            f"95 % interval); heuristic: SMAC's, {args.heuristic_episodes} episodes a map (200 on the "
            "largest), seed 0, the published figure (source tag as in fidelity.md) in the target row; "
            f"checkpoints: {args.episodes} greedy episodes, seed 11",
            "",
        ]
        Path(args.out).write_text("\n".join(intro) + text + "\n", encoding="utf-8")
    return text


if __name__ == "__main__":
    main()
