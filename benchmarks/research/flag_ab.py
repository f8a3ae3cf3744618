"""What a boolean setting saves in a real run: the same training with it off and on, one run after the other.

Runs ``scripts/train_qmix.py`` (or ``--script``) once per variant (``--flag``, default
``learner.pad_to_compiled``) with the same map, seed and budget, and reads the run's closing ``[learner]``
line (the lengths each graph compiled, the graph calls padded to a compiled length, and the train calls'
wall-clock, compiles included) and its trainer clock. The variants' runs are not step-for-step identical
(padding changes the order of float sums; ``runner.overlap`` acts with weights one update older), so the
trajectories part after a while; compare seconds per env step and the compile counts.

    python benchmarks/research/flag_ab.py --map 3m --t-max 150000 --seeds 0 1
    python benchmarks/research/flag_ab.py --flag runner.overlap --map 8m --out benchmarks/results/overlap.md \
        ms_threads=1

``benchmarks/research/compiled_lengths.py`` is this script with its first default.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"\[learner\] compiled lengths \{(.*)\}; (\d+) graph calls padded .*; train calls ([\d.]+) s"
)


# the result files' names for the variants of the settings measured so far
LABELS = {
    "learner.pad_to_compiled": ("exact lengths", "pad_to_compiled"),
    "runner.overlap": ("act, then learn", "overlap"),
}
TITLES = {
    "learner.pad_to_compiled": "`learner.pad_to_compiled`: the same training with and without it",
    "runner.overlap": "`runner.overlap`: acting beside learning, the same training with and without it",
}


def one_run(
    script: str, map_name: str, seed: int, t_max: int, flag: str, on: bool, out: Path, extra: list[str]
) -> dict:
    """One training run; its compiled lengths, padded calls, learner seconds, trainer clock and steps."""
    label = LABELS.get(flag, (f"{flag}=false", f"{flag}=true"))[on]
    name = f"{flag.split('.')[-1]}_{str(on).lower()}_{map_name}_seed{seed}"
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / script),
        "--map",
        map_name,
        "--seed",
        str(seed),
        "--results-dir",
        str(out),
        f"run_name={name}",
        f"t_max={t_max}",
        f"{flag}={str(on).lower()}",
        *extra,
        "log.progress=false",
        "log.mindinsight=false",
    ]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = SUMMARY.search(text)
    if not found:
        raise RuntimeError(f"no [learner] summary in the output of {' '.join(cmd)}:\n{text[-2000:]}")
    rows = [json.loads(line) for line in (out / name / "log.jsonl").read_text().splitlines() if line.strip()]
    clock = [r for r in rows if r.get("key") == "time_s"]
    lengths = re.findall(r"\): \[([\d, ]*)\]", found.group(1))
    return {
        "variant": label,
        "seed": seed,
        "n_lengths": sum(len(x.split(",")) for x in lengths),
        "lengths": found.group(1),
        "padded": int(found.group(2)),
        "learner_s": float(found.group(3)),
        "run_s": clock[-1]["value"],
        "t_env": clock[-1]["t"],
    }


def main(argv: list[str] | None = None, command: str = __file__) -> None:
    """Run the variants and append a section to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flag", default="learner.pad_to_compiled", help="a boolean setting (section.key)")
    ap.add_argument("--map", default="3m")
    ap.add_argument("--script", default="train_qmix.py")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--t-max", type=int, default=150_000)
    ap.add_argument("--results", default=str(Path(tempfile.gettempdir()) / "flag_ab"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compiled_lengths.md"))
    args, extra = ap.parse_known_args(argv)  # the rest: overrides for both variants
    out, run = Path(args.results) / time.strftime("%Y%m%d-%H%M%S"), harness.start()

    def variant(on: bool):  # noqa: ANN202  (a side of the alternation: one run a call, the seeds in turn)
        def train(seed: int) -> dict:
            return one_run(args.script, args.map, seed, args.t_max, args.flag, on, out, extra)

        return harness.in_turn(train, args.seeds)

    alt = harness.alternate(variant(False), variant(True), len(args.seeds), names=("off", "on"))
    runs = [r.value for r in alt.rounds]  # per seed: off, then on
    lines = [
        f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: {args.map}, {args.script}, "
        f"{args.t_max:,} env steps",
        "",
        *harness.header_lines(run, command, sys.argv[1:] if argv is None else argv, python="python"),
        "",
        "| variant | seed | lengths compiled | lengths per graph | calls padded | train calls s | run s "
        "| env steps | learner ms per 1k env steps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        per_k = 1000 * r["learner_s"] / r["t_env"] * 1000
        lines.append(
            f"| {r['variant']} | {r['seed']} | {r['n_lengths']} | {r['lengths']} | {r['padded']} | "
            f"{r['learner_s']:.1f} | {r['run_s']:.1f} | {r['t_env']:,} | {per_k:.0f} |"
        )
    lines += ["", "Each round is one training run (CPU / wall: the cores it kept busy):", ""]
    lines += [*harness.ROUND_HEAD, *alt.round_lines(args.map)]
    text = "\n".join(lines) + "\n"
    print(text)
    path = Path(args.out)
    if not path.exists():
        path.write_text(f"# {TITLES.get(args.flag, args.flag)}\n")
    with path.open("a") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
