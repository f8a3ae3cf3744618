"""The JAX contender of ``learner_step.py`` (this folder): a worker serving the QMIX step in any layout.

JAX needs NumPy 2 and MindSpore NumPy < 2, so this file runs in the bench venv (``make bench-env``), in its
own process, and imports nothing from ``marl``. ``learner_step.py`` writes the initial weights (MindSpore's,
named as torch names them), the batches and the hyperparameters to an ``.npz`` and starts this worker; the
worker compiles the step in each requested layout (``jax_qmix_layouts.py``: where the GRU's input
projection is computed, gate matmuls, ``unroll``, batch- or time-major, ``donate_argnums``, the mixer's
form), runs each layout's first step from the same weights, answers with the first losses and compile
times, then serves requests on stdin, one JSON line each:

* ``{"op": "run", "steps": k, "batch": i}`` -> ``{"times": [...], "cpu": [...], "loss": x}`` (the selected
  layout; wall and process CPU seconds per step);
* ``{"op": "screen", "steps": k, "block": b, "layouts": [names]}`` -> ``{"layouts": {name: {"times",
  "cpu"}}}``: each named (default: every compiled) layout in turn, blocks of ``b`` steps, ``k`` steps each;
* ``{"op": "compile", "layouts": [names]}`` -> the same as the first answer, for more layouts;
* ``{"op": "select", "layout": name}`` -> ``{"selected": name}``: keeps only that layout, its parameters
  and optimizer state put back to where its first step left them;
* ``{"op": "grads", "batch": i, "out": path}`` -> ``{"losses": {name: x}}``: each layout's loss and
  gradients at the initial weights, the gradients written to ``path`` (``.npz``, keys ``layout/param``);
* ``{"op": "quit"}`` or end of input.

Protocol lines are the only thing written to stdout. One thread: the process is pinned to one CPU
(``--pin-cpu``, before JAX starts its thread pools, which size themselves from the affinity) and XLA is
told ``--xla_cpu_multi_thread_eigen=false``; the CPU time per step shows whether more than one core ran.
The driver side (:class:`JaxWorker`, :func:`write_npz`) is here too, so both ends of the protocol live here.

    .venv-bench/bin/python benchmarks/learner_step/jax_qmix_step.py --data step.npz \\
        [--threads 1] [--pin-cpu 1]
        [--layouts cell-fused-u1-time-donate-bmm,hoist]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks
from benchmarks.learner_step.jax_qmix_layouts import (  # noqa: E402
    DEFAULT,
    build_loss,
    jit_step,
    parse_layout,
    screening_layouts,
)

BATCH_KEYS = ("inputs", "avail", "actions", "reward", "term", "mask", "state")
ONE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false"  # jax 0.10.2 rejects unknown `--` flags


# ------------------------------------------------------------- driver side (the MindSpore venv)
class JaxWorker:
    """The driver side: this file run by ``python`` (the bench venv's) as a worker on ``data``."""

    def __init__(
        self, python: str, data: Path, threads: int, layouts: list[str] | None = None, pin_cpu: int = -1
    ) -> None:
        cmd = [python, str(Path(__file__).resolve()), "--data", str(data), "--threads", str(threads)]
        cmd += ["--pin-cpu", str(pin_cpu), "--layouts", ",".join(layouts or [DEFAULT.name])]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.hello = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the JAX worker exited (code {self.proc.wait()}); see its stderr above")
        msg = json.loads(line)
        if "error" in msg:
            raise RuntimeError(f"JAX worker: {msg['error']}")
        return msg

    def ask(self, **req) -> dict:  # noqa: ANN003
        """Sends one request, returns the answer."""
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def run(self, k: int, i: int) -> tuple[list[float], list[float], float]:
        """``k`` steps of the selected layout on batch ``i``: (wall s per step, CPU s per step, last loss)."""
        msg = self.ask(op="run", steps=k, batch=i)
        return msg["times"], msg["cpu"], msg["loss"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def write_npz(path: Path, info, cfg, weights: dict, arrays: list[list[np.ndarray]]) -> None:  # noqa: ANN001
    """Weights, batches and hyperparameters for the worker (``info``: an ``EnvInfo``, ``cfg``: a ``Config``;
    ``arrays``: per batch, the arrays of ``BATCH_KEYS``)."""
    lc = cfg.learner
    meta = {
        "n_agents": info.n_agents,
        "hidden_dim": cfg.agent.hidden_dim,
        "embed_dim": cfg.mixer.embed_dim,
        "gamma": lc.gamma,
        "td_lambda": lc.td_lambda,
        "grad_norm_clip": lc.grad_norm_clip,
        "lr": lc.lr,
        "n_batches": len(arrays),
    }
    out = {f"w:{k}": v for k, v in weights.items()}
    out.update(
        {f"b{i}:{k}": x for i, batch in enumerate(arrays) for k, x in zip(BATCH_KEYS, batch, strict=True)}
    )
    np.savez(path, meta=np.array(json.dumps(meta)), **out)


# ------------------------------------------------------------------ worker side (the bench venv)
def timed_steps(fn, state: list, batch: tuple, k: int) -> tuple[list[float], list[float], float]:  # noqa: ANN001
    """``k`` steps of ``fn`` updating ``state`` (``[params, target, opt]``) in place: wall and CPU seconds
    per step and the last loss; ``float(loss)`` waits for the result, as torch's ``.item()``."""
    times, cpu, value = [], [], float("nan")
    for _ in range(k):
        t0, c0 = time.perf_counter(), time.process_time()
        state[0], state[2], loss = fn(state[0], state[1], state[2], batch)
        value = float(loss)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, cpu, value


class Server:
    """The worker's state: the data, and per layout its compiled step, live state and post-first-step copy."""

    def __init__(self, data: np.lib.npyio.NpzFile) -> None:
        import jax.numpy as jnp

        self.meta = json.loads(str(data["meta"]))
        self.w = {k[2:]: np.asarray(data[k]) for k in data.files if k.startswith("w:")}
        dtypes = {"avail": np.int32, "actions": np.int32}
        self.batches = [
            tuple(jnp.asarray(data[f"b{i}:{k}"].astype(dtypes.get(k, np.float32))) for k in BATCH_KEYS)
            for i in range(self.meta["n_batches"])
        ]
        self.steps: dict[str, object] = {}
        self.state: dict[str, list] = {}
        self.snap: dict[str, list] = {}
        self.selected = ""

    def fresh(self) -> list:
        """``[params, target, opt]`` at the initial weights, as new device arrays."""
        import jax.numpy as jnp

        params = {k: jnp.asarray(v) for k, v in self.w.items() if "target_" not in k}
        target = {k: jnp.asarray(v) for k, v in self.w.items() if "target_" in k}
        zeros = {k: jnp.zeros_like(v) for k, v in params.items()}
        opt = {"m": zeros, "v": {k: jnp.zeros_like(v) for k, v in params.items()}, "count": jnp.zeros(())}
        return [params, target, opt]

    def compile(self, names: list[str]) -> dict:
        """Compiles and runs the first step of each layout; per layout compile s, first call s, first loss."""
        import jax

        out = {}
        for name in names:
            layout = parse_layout(name)
            state = self.fresh()
            t0 = time.perf_counter()
            fn = jit_step(self.meta, layout).lower(*state, self.batches[0]).compile()
            compile_s = time.perf_counter() - t0
            _, _, loss = timed_steps(fn, state, self.batches[0], 1)
            first_call_s = time.perf_counter() - t0
            self.steps[layout.name], self.state[layout.name] = fn, state
            self.snap[layout.name] = jax.tree_util.tree_map(lambda x: np.array(x, copy=True), state)
            self.selected = self.selected or layout.name
            out[layout.name] = {"compile_s": compile_s, "first_call_s": first_call_s, "first_loss": loss}
        return out

    def screen(self, steps: int, block: int, names: list[str] | None = None) -> dict:
        """Each layout of ``names`` (default: all compiled) in turn, ``block`` steps at a time, ``steps``
        each, cycling through the batches."""
        names = [parse_layout(n).name for n in names] if names else list(self.steps)
        res = {name: {"times": [], "cpu": []} for name in names}
        for name in names:  # one untimed step each first: the first calls after compiling run slower
            timed_steps(self.steps[name], self.state[name], self.batches[0], 1)
        done = 0
        while done < steps:
            k = min(block, steps - done)
            for name in names:
                batch = self.batches[done % len(self.batches)]
                times, cpu, _ = timed_steps(self.steps[name], self.state[name], batch, k)
                res[name]["times"] += times
                res[name]["cpu"] += cpu
            done += k
        return {"layouts": res}

    def select(self, name: str) -> dict:
        import jax
        import jax.numpy as jnp

        name = parse_layout(name).name
        if name not in self.steps:
            return {"error": f"layout {name} not compiled; compiled: {', '.join(self.steps)}"}
        self.steps = {name: self.steps[name]}
        self.state = {name: jax.tree_util.tree_map(jnp.asarray, self.snap[name])}
        self.selected = name
        return {"selected": name}

    def grads(self, i: int, out: str) -> dict:
        import jax

        losses, arrays = {}, {}
        for name in self.steps:
            params, target, _ = self.fresh()
            loss, g = jax.jit(jax.value_and_grad(build_loss(self.meta, parse_layout(name))))(
                params, target, self.batches[i % len(self.batches)]
            )
            losses[name] = float(loss)
            arrays.update({f"{name}/{k}": np.asarray(v) for k, v in g.items()})
        np.savez(out, **arrays)
        return {"losses": losses}

    def handle(self, req: dict) -> dict:
        op = req.get("op")
        if op == "run":
            batch = self.batches[int(req["batch"]) % len(self.batches)]
            times, cpu, loss = timed_steps(
                self.steps[self.selected], self.state[self.selected], batch, int(req["steps"])
            )
            return {"times": times, "cpu": cpu, "loss": loss}
        if op == "screen":
            return self.screen(int(req["steps"]), int(req.get("block", 1)), req.get("layouts"))
        if op == "compile":
            return {"layouts": self.compile(list(req["layouts"]))}
        if op == "select":
            return self.select(str(req["layout"]))
        if op == "grads":
            return self.grads(int(req["batch"]), str(req["out"]))
        return {"error": f"unknown op {op!r}; allowed: run, screen, compile, select, grads, quit"}


def pin_and_flags(threads: int, pin_cpu: int) -> None:
    """One CPU for this process (``pin_cpu`` >= 0) and XLA's one-thread flag; before JAX is imported."""
    if pin_cpu >= 0:
        os.sched_setaffinity(0, {pin_cpu})
    if threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + ONE_THREAD_FLAGS).strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help=".npz written by learner_step.py")
    ap.add_argument("--threads", type=int, default=1, help="XLA CPU threads (1 = single-threaded Eigen)")
    ap.add_argument("--pin-cpu", type=int, default=-1, help="CPU to pin this process to (-1: no pinning)")
    ap.add_argument("--layouts", default=DEFAULT.name, help="comma-separated layout names, or 'screen'")
    args = ap.parse_args()
    names = args.layouts.split(",") if args.layouts != "screen" else [x.name for x in screening_layouts()]
    try:
        names = [parse_layout(n).name for n in names]
    except ValueError as exc:
        ap.error(str(exc))
    pin_and_flags(args.threads, args.pin_cpu)
    proto, sys.stdout = sys.stdout, sys.stderr  # stray prints must not corrupt the protocol

    def send(msg: dict) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    import jax
    import jaxlib

    server = Server(np.load(args.data))
    done = server.compile(names)
    first = done[names[0]]
    send(
        {
            **first,
            "layouts": done,
            "versions": f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, numpy {np.__version__}",
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "affinity": sorted(os.sched_getaffinity(0)),
        }
    )
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            send(server.handle(req))
        except (KeyError, ValueError, TypeError) as exc:
            send({"error": f"bad request {req}: {exc}"})


if __name__ == "__main__":
    main()
