"""The embedded engine's speed at two versions of the code, measured side by side in one run.

    .venv/bin/python benchmarks/research/engine_ab.py --base HEAD~1   # the working tree against HEAD~1
    .venv/bin/python benchmarks/research/engine_ab.py --base 519c408 --head 2d64a19 --out results/engine_ab.md

Each side is a checkout (``--base`` and ``--head`` are git revisions checked out in temporary worktrees;
``--head`` left out is this working tree) with a Numba cache of its own. For every map and env count both
sides time the three one-thread cells of ``sim_throughput.py`` (``rollout``: 100 compiled random steps per
call; ``full``: the per-step ``BatchedStarCraft2Env.step`` with random available actions; ``engine``:
``BatchedSimEngine`` alone), in fresh processes, alternating base and head ``--reps`` times, so a change in
the machine's load falls on both. One thread on each side by default: the comparison is of the code, not
of cores. ``--threads k`` runs every cell on ``k`` threads instead (how the two versions use several
cores; wall-clock rates, so only on an otherwise idle machine). The ratio column is head over base of the
median over the repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
CELLS = ("rollout", "full", "engine")

# run inside each checkout: its own sim_throughput functions time its own engine
_WORKER = r"""
import json, sys
sys.path.append("benchmarks")  # a checkout from before the suites' folders keeps them in benchmarks/
try:
    from benchmarks.throughput.sim_throughput import bench_full, bench_ours, bench_rollout
except ImportError:
    from sim_throughput import bench_full, bench_ours, bench_rollout
name, n, seconds, threads = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
print(json.dumps({
    "rollout": bench_rollout(name, n, seconds, threads)["sps"],
    "full": bench_full(name, n, seconds, threads)["sps"],
    "engine": bench_ours(name, n, seconds, threads)["sps"],
}))
"""


def _rev(ref: str, cwd: Path = ROOT) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", ref], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"engine_ab.py: {ref!r} is not a git revision of {cwd}: {out.stderr.strip()}")
    return out.stdout.strip()


def _checkout(ref: str, tmp: Path) -> Path:
    path = tmp / ref.replace("/", "_")
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(path), ref], cwd=ROOT, check=True)
    return path


def _timer(src: Path, cache: Path, name: str, n: int, seconds: float, threads: int):  # noqa: ANN202
    """One side of an alternation: a fresh process of ``src`` timing the cells; returns their rates."""
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-c", _WORKER, name, str(n), str(seconds), str(threads)]
    return lambda: json.loads(harness.run_command(argv, cwd=src, env=env).strip().splitlines()[-1])


def write_table(lines: list[str], out: str | None) -> None:
    """Print the result lines and, with ``out``, write them there (relative: under ``benchmarks/``)."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        path = Path(out)
        path = path if path.is_absolute() else ROOT / "benchmarks" / path
        path.write_text(text, encoding="utf-8")


def _threads(k: int) -> str:
    return "one thread" if k == 1 else f"{k} threads"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="git revision of the base side")
    ap.add_argument("--head", default=None, help="git revision of the head side (default: the working tree)")
    ap.add_argument("--maps", nargs="+", default=["3m", "8m", "27m_vs_30m"])
    ap.add_argument("--envs", nargs="+", type=int, default=[1, 64])
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell")
    ap.add_argument("--reps", type=int, default=2, help="alternations of base and head per cell")
    ap.add_argument("--threads", type=int, default=1, help="threads of every cell (> 1: an idle machine)")
    ap.add_argument("--out", default=None, help="results file (relative: under benchmarks/)")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.seconds <= 0 or args.threads < 1:
        raise SystemExit("engine_ab.py: --reps and --threads must be >= 1 and --seconds > 0")
    run, shown = harness.start(), sys.argv[1:] if argv is None else argv
    base_rev = _rev(args.base)
    head_rev = _rev(args.head) if args.head else f"working tree ({_rev('HEAD')} + changes)"
    with tempfile.TemporaryDirectory(prefix="engine_ab_") as tmp_name:
        tmp = Path(tmp_name)
        sides = {"base": _checkout(args.base, tmp), "head": _checkout(args.head, tmp) if args.head else ROOT}
        try:
            rows, per_round = [], []
            for name in args.maps:
                for n in args.envs:
                    base, head = (
                        _timer(src, tmp / f"cache_{side}", name, n, args.seconds, args.threads)
                        for side, src in sides.items()
                    )
                    alt = harness.alternate(base, head, args.reps, names=("base", "head"))
                    med = {s: {c: alt.median(s, c) for c in CELLS} for s in alt.sides}
                    rows.append((name, n, med))
                    per_round += alt.round_lines(f"{name} x{n}")
                    print(name, n, json.dumps(med), flush=True)
        finally:
            for src in sides.values():
                if src != ROOT:
                    subprocess.run(["git", "worktree", "remove", "--force", str(src)], cwd=ROOT, check=False)
    header = " | ".join(f"{s} {c}" for c in CELLS for s in ("base", "head"))
    lines = [
        f"# The engine's speed at two versions of the code ({_threads(args.threads)}, steps per second)",
        "",
        *harness.header_lines(
            run, __file__, shown, python="python", date_note=f"base {base_rev}; head {head_rev}"
        ),
        f"- {args.reps} alternations of {args.seconds:g} s cells, medians; the code line and engine version "
        "are the head's checkout",
        "",
        f"| map | n_envs | {header} | head/base rollout | head/base full | head/base engine |",
        "|---|---|" + "---|" * (2 * len(CELLS) + len(CELLS)),
    ]
    for name, n, med in rows:
        cells = " | ".join(f"{med[s][c]:,.0f}" for c in CELLS for s in ("base", "head"))
        ratios = " | ".join(f"{med['head'][c] / med['base'][c]:.2f}" for c in CELLS)
        lines.append(f"| {name} | {n} | {cells} | {ratios} |")
    lines += ["", "Each round is one process (start, compile-cache load and the three cells):", ""]
    write_table([*lines, *harness.ROUND_HEAD, *per_round], args.out)


if __name__ == "__main__":
    main()
