"""Steps per second of the SMAC API class, ``StarCraft2Env``, on the embedded engine: fused vs table by table.

Other libraries (pymarl, EPyMARL, our Gymnasium and PettingZoo views) drive one ``StarCraft2Env`` per
process. Each timed step is what pymarl's episode runner asks of it: ``get_state()``, ``get_avail_actions()``
and ``get_obs()``, a uniformly random available action per agent, ``step``, and ``reset()`` at the end of an
episode. Both paths run the same seeds and actions, so they play the same episodes (checked: the same battle
count); blocks of each alternate, and the median block is reported.

    python benchmarks/throughput/smac_api_step.py        # writes benchmarks/results/smac_api_step.md
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

import numpy as np

from benchmarks import harness
from marl.envs.smac.env import StarCraft2Env

ROOT = Path(__file__).resolve().parents[2]
MAPS = ("3m", "8m", "27m_vs_30m")


class Player:
    """One env and its random stream: ``block(n)`` plays ``n`` steps as pymarl's runner would."""

    def __init__(self, name: str, fused: bool) -> None:
        self.env = StarCraft2Env(name, backend="sim", seed=0, fused=fused)
        self.env.reset()
        self.rs = np.random.default_rng(0)

    def block(self, n: int) -> float:
        """Seconds for ``n`` steps."""
        env, rs = self.env, self.rs
        t0 = time.perf_counter()
        for _ in range(n):
            env.get_state()
            avail = np.array(env.get_avail_actions(), dtype=bool)
            env.get_obs()
            acts = (rs.random(avail.shape) * avail).argmax(1)
            _, terminated, _ = env.step(acts)
            if terminated:
                env.reset()
        return time.perf_counter() - t0


def measure(name: str, steps: int, blocks: int) -> dict:
    """Median steps/s of each path over alternating blocks of ``steps``."""
    players = {fused: Player(name, fused) for fused in (True, False)}
    for p in players.values():
        p.block(max(steps // 4, 10))  # warm-up: compiled kernels loaded, first episodes played
    fused, reference = (lambda p=p: p.block(steps) for p in players.values())
    alt = harness.alternate(fused, reference, blocks, names=("fused", "reference"))
    games = {f: p.env.get_stats()["battles_game"] for f, p in players.items()}
    assert games[True] == games[False], f"the two paths played different episodes: {games}"
    sps = {side: steps / alt.median(side, "value") for side in alt.sides}
    return {"map": name, **sps, "episodes": games[True]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maps", nargs="+", default=list(MAPS))
    ap.add_argument("--steps", type=int, default=4000, help="steps per block (27m_vs_30m: a fifth)")
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "smac_api_step.md"))
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    run = harness.start()
    rows = [measure(m, args.steps // (5 if m == "27m_vs_30m" else 1), args.blocks) for m in args.maps]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## {date}",
        "",
        *harness.header_lines(run, __file__, given, python="python"),
        f"- {args.blocks} alternating blocks per path; median block; one thread",
    ]
    if args.note:
        lines.append(f"- note: {args.note}")
    lines += [
        "",
        "| map | fused (steps/s) | table by table, `fused=False` (steps/s) | ratio | episodes played |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["fused"] / r["reference"]
        lines.append(
            f"| {r['map']} | {r['fused']:,.0f} | {r['reference']:,.0f} | {ratio:.2f}× | {r['episodes']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    if not out.exists():
        head = "# `StarCraft2Env` on the embedded engine: the fused path against the table-by-table path\n\n"
        head += (
            "Written by `benchmarks/throughput/smac_api_step.py` (its docstring says what a step is); "
            "newest first.\n\n"
        )
        out.write_text(head + text)
    else:
        old = out.read_text()
        first, _, rest = old.partition("\n## ")
        out.write_text(first + "\n" + text + ("\n## " + rest if rest else ""))


if __name__ == "__main__":
    main()
