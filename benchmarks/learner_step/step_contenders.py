"""The contenders of ``learner_step.py`` as timed runs, and the screening of the JAX and ``torch.compile``
layouts: each layout compiled, run a few steps in turn, the fastest kept, every layout's time recorded.
Wall and process CPU time are taken for every step (CPU/wall above 1 shows a second thread at work)."""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks.learner_step.jax_qmix_layouts import combine
from benchmarks.learner_step.jax_qmix_step import JaxWorker
from benchmarks.learner_step.torch_qmix_step import torch_peer


class Contender:
    """One implementation of the step in one layout: ``run(k, batch_index)`` times ``k`` steps on one batch
    and returns ``(wall seconds per step, process CPU seconds per step, loss of the last step)``."""

    def __init__(
        self,
        key: str,
        run,  # noqa: ANN001
        first_loss: float,
        first_call_s: float,
        compile_s: float | None = None,
        layout: str = "-",
    ) -> None:
        self.key, self.run, self.first_loss, self.first_call_s = key, run, first_loss, first_call_s
        self.compile_s, self.times, self.cpu, self.last_loss = compile_s, [], [], float("nan")
        self.layout = layout

    def block(self, k: int, i: int) -> None:
        times, cpu, self.last_loss = self.run(k, i)
        self.times += times
        self.cpu += cpu


def timed(fn, *args) -> tuple[float, float, float]:  # noqa: ANN001
    """``(result, wall seconds, process CPU seconds)`` of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - t0, time.process_time() - c0


def loop(fn, batches: list) -> callable:  # noqa: ANN001
    """``run(k, i)``: ``k`` timed calls of ``fn(*batches[i])`` (``fn`` returns the loss) -> wall and CPU
    seconds per call and the last loss."""

    def run(k: int, i: int) -> tuple[list[float], list[float], float]:
        out = [timed(fn, *batches[i % len(batches)]) for _ in range(k)]
        return [o[1] for o in out], [o[2] for o in out], float(out[-1][0])

    return run


def pin(cpus: set[int]) -> None:
    """Pins every thread of this process (and those it starts later) to ``cpus``."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that ended meanwhile
            pass


def record_rows(name: str, framework: str, runs: dict, record: list) -> str:
    """Appends one row per layout (``runs``: layout -> Contender with screening times) to ``record``;
    returns the fastest layout (lowest median wall time)."""
    med = {lay: statistics.median(c.times) for lay, c in runs.items()}
    for lay, c in runs.items():
        ratio = sum(c.cpu) / sum(c.times)
        record.append(
            dict(
                map=name,
                framework=framework,
                layout=lay,
                ms=med[lay] * 1e3,
                steps=len(c.times),
                cpu_ratio=ratio,
                compile_s=c.first_call_s if c.compile_s is None else c.compile_s,
                first_loss=c.first_loss,
            )
        )
    return min(med, key=med.get)


def jax_contender(worker: JaxWorker, name: str, args: argparse.Namespace, record: list) -> Contender:
    """The fastest of the worker's layouts (screened if more than one; with ``screen``, also the layout that
    combines the fastest choice of each kind), selected in the worker."""
    infos = dict(worker.hello["layouts"])

    def screened(names: list[str]) -> dict:
        res = worker.ask(op="screen", steps=args.screen_steps, block=1, layouts=names)["layouts"]
        out = {}
        for lay, r in res.items():
            i = infos[lay]
            out[lay] = Contender("jax", None, i["first_loss"], i["first_call_s"], i["compile_s"], lay)
            out[lay].times, out[lay].cpu = r["times"], r["cpu"]
        return out

    best = next(iter(infos))
    if len(infos) > 1:
        best = record_rows(name, "JAX", screened(list(infos)), record)
        if args.jax_layouts == "screen":
            mixed = combine(
                {r["layout"]: r["ms"] for r in record if r["map"] == name and r["framework"] == "JAX"}
            )
            if mixed.name not in infos:
                infos |= worker.ask(op="compile", layouts=[mixed.name])["layouts"]
                runs = screened([best, mixed.name])  # the best one-change layout again, beside it
                record_rows(name, "JAX (combined, beside the best again)", runs, record)
                best = min(runs, key=lambda lay: statistics.median(runs[lay].times))
        worker.ask(op="select", layout=best)
    i = infos[best]
    return Contender("jax", worker.run, i["first_loss"], i["first_call_s"], i["compile_s"], best)


def torch_compile_contender(info, cfg, weights, tb, name, args, record) -> Contender:  # noqa: ANN001
    """The fastest ``torch.compile`` layout (each compiled cold and screened round robin if several). The
    compile (inductor's worker processes and C++ compiler) may use every usable CPU; the steps run pinned."""
    runs, steps = {}, {}
    for lay in args.torch_compile_layouts:
        step = steps[lay] = torch_peer(info, cfg, weights, layout=lay)
        pin(args.usable_cpus)
        try:
            loss, dt, _ = timed(step, *tb[0])
        finally:
            pin(args.pinned_cpus)
        step.save()
        runs[lay] = Contender("torch-compile", loop(step, tb), loss, dt, layout=lay)
    if len(runs) > 1:
        for done in range(args.screen_steps):
            for c in runs.values():
                c.block(1, done % len(tb))
        best = record_rows(name, "torch.compile", runs, record)
        runs = {best: runs[best]}  # the others (and their compiled graphs) go
        if not args.torch_screen_every_map:  # cold compiles take minutes: later maps run the winner only
            args.torch_compile_layouts = [best]
        steps[best].restore()  # back to where its first step left it, as the other contenders
    c = next(iter(runs.values()))
    c.times, c.cpu = [], []
    return c


def screening_table(record: list[dict], steps: int) -> list[str]:
    """The screened layouts as Markdown lines (none if nothing was screened)."""
    if not record:
        return []
    out = [
        "",
        f"Layouts screened before the alternating run ({steps} steps each, round robin; per map the fastest "
        "median is the contender above):",
        "",
        "| map | framework | layout | median ms | CPU/wall | compile s | first loss |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in record:
        comp = "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        out.append(
            f"| {r['map']} | {r['framework']} | {r['layout']} | {r['ms']:.1f} | {r['cpu_ratio']:.2f} "
            f"| {comp} | {r['first_loss']:.7f} |"
        )
    return out
