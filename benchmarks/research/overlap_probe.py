"""What acting on a second thread costs the learner: QMIX train calls on fixed batches, alone and while the
runner plays episodes on another thread (``runner.overlap``'s schedule without the training loop around it).

Same batches, same compiled graphs, same shapes in both phases, so the difference is contention alone (the
GIL, the cores, the caches), not a different trajectory. Run one process per MindSpore thread count::

    python benchmarks/research/overlap_probe.py --map 3m ms_threads=1
    python benchmarks/research/overlap_probe.py --map 3m ms_threads=2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: marl, benchmarks

from benchmarks import harness  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", default="3m")
    ap.add_argument("--calls", type=int, default=60, help="train calls per phase")
    ap.add_argument("--switch-ms", type=float, default=0.0, help="sys.setswitchinterval (0: Python's 5 ms)")
    args, overrides = ap.parse_known_args()
    run = harness.start()
    from benchmarks.learner_step.qmix_workload import synthetic_batch
    from marl.config import load_config
    from marl.trainer import Trainer

    out = tempfile.mkdtemp(prefix="overlap_probe_")
    over = ["log.mindinsight=false", "log.progress=false", f"results_dir={out}", "run_name=p", *overrides]
    trainer = Trainer(load_config("qmix", map_name=args.map, overrides=over))
    learner, runner = trainer.learner, trainer.runner
    batches = [synthetic_batch(trainer.info, trainer.cfg.learner.batch_size, s) for s in range(4)]

    def learn(n: int) -> float:
        t = time.perf_counter()
        for i in range(n):
            learner.train(batches[i % len(batches)], 0, 0)
        return time.perf_counter() - t

    learn(2 * len(batches))  # every shape compiled
    t, rounds = time.perf_counter(), 0
    while time.perf_counter() - t < 10:
        runner.run(0)
        rounds += 1
    act_alone = (time.perf_counter() - t) / rounds
    alone = learn(args.calls)
    stop, played = threading.Event(), [0]

    def act() -> None:
        while not stop.is_set():
            runner.run(0)
            played[0] += 1

    if args.switch_ms:
        sys.setswitchinterval(args.switch_ms / 1000)
    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    t = time.perf_counter()
    beside = learn(args.calls)
    elapsed = time.perf_counter() - t
    stop.set()
    thread.join()
    runner.close()
    trainer.lock.release()
    act_beside = elapsed / max(played[0], 1)
    print("\n".join([*harness.header_lines(run, __file__, sys.argv[1:], python="python"), ""]))
    print(
        "| map | overrides | GIL switch ms | train ms alone | train ms beside acting | ratio "
        "| acting ms a round alone | beside learning |\n|---|---|---|---|---|---|---|---|\n"
        f"| {args.map} | {' '.join(overrides) or 'defaults'} | {sys.getswitchinterval() * 1000:g} | "
        f"{1000 * alone / args.calls:.1f} | "
        f"{1000 * beside / args.calls:.1f} | {beside / alone:.2f}x | {1000 * act_alone:.1f} | "
        f"{1000 * act_beside:.1f} |"
    )


if __name__ == "__main__":
    main()
