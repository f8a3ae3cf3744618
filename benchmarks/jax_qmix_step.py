"""The JAX contender of ``benchmarks/learner_step.py``: the QMIX learner step as one ``jax.jit`` function.

JAX needs NumPy 2 and MindSpore NumPy < 2, so this file runs in the bench venv (``make bench-env``), in its
own process, and imports nothing from ``marl``. ``learner_step.py`` writes the initial weights (MindSpore's,
named as torch names them), the batches and the hyperparameters to an ``.npz`` and starts this worker; the
worker compiles the step, answers with its first loss and compile time, then serves requests on stdin, one
JSON line each, ``{"op": "run", "steps": k, "batch": i}`` -> ``{"times": [seconds per step], "loss": x}``,
until ``{"op": "quit"}`` or end of input. Protocol lines are the only thing written to stdout. The driver
side (:class:`JaxWorker`, :func:`write_npz`) is here too, so both ends of the protocol live in one file.

The step is the same maths as marl's ``QLearner`` at its defaults and as the torch peer
(``torch_qmix_step.py``): RNN agent Dense -> ReLU -> GRU (torch's gate equations) -> Dense, unrolled
over time in ``lax.scan`` as JaxMARL's ``ScannedRNN`` does (the input projections of all steps computed
before the scan, as marl's MindSpore unroll does), target agent and target mixer, double Q, TD(lambda)
targets by a reverse ``lax.scan``, QMIX mixer (|hypernet| weights, ELU), 0.5 * masked MSE, gradient
clipping to global norm 10 (torch's ``max_norm / (norm + 1e-6)``) and Adam with torch's update rule
(betas 0.9 / 0.999, eps 1e-8 outside the square root) -- loss, gradients and update in one jitted
function, with the parameter and optimizer buffers donated. float32 throughout.

    .venv-bench/bin/python benchmarks/jax_qmix_step.py --data step.npz [--threads 1]
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

BATCH_KEYS = ("inputs", "avail", "actions", "reward", "term", "mask", "state")


def build_step(meta: dict):  # noqa: ANN201 (returns a jittable function)
    """``step(params, target, opt, batch) -> (params, opt, loss)`` for the sizes and hyperparameters in
    ``meta``; ``params``/``target`` are dicts of torch-named arrays, ``opt`` is ``{"m", "v", "count"}``."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    n, hd, e = meta["n_agents"], meta["hidden_dim"], meta["embed_dim"]
    gamma, lam, clip, lr = meta["gamma"], meta["td_lambda"], meta["grad_norm_clip"], meta["lr"]
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    def dense(p, name, x):  # noqa: ANN001, ANN202 (torch Linear: x W^T + b)
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def mlp2(p, name, x):  # noqa: ANN001, ANN202 (torch Sequential(Linear, ReLU, Linear))
        return dense(p, name + ".2", jax.nn.relu(dense(p, name + ".0", x)))

    def unroll(p, pre, x_BTNI):  # noqa: ANN001, ANN202
        """Q-values ``(B, T, N, A)``; hidden state starts at zero, time-major scan over ``B*N`` rows."""
        b, t, _, i = x_BTNI.shape
        x_TMI = jnp.swapaxes(x_BTNI, 0, 1).reshape(t, b * n, i)
        emb_TMH = jax.nn.relu(dense(p, pre + "fc1", x_TMI))
        gi_TMG = emb_TMH @ p[pre + "rnn.weight_ih"].T + p[pre + "rnn.bias_ih"]  # G = 3H gates r, z, n
        w_hh, b_hh = p[pre + "rnn.weight_hh"], p[pre + "rnn.bias_hh"]

        def cell(h_MH, gi_MG):  # noqa: ANN001, ANN202 (torch.nn.GRUCell)
            gh_MG = h_MH @ w_hh.T + b_hh
            r = jax.nn.sigmoid(gi_MG[:, :hd] + gh_MG[:, :hd])
            z = jax.nn.sigmoid(gi_MG[:, hd : 2 * hd] + gh_MG[:, hd : 2 * hd])
            cand = jnp.tanh(gi_MG[:, 2 * hd :] + r * gh_MG[:, 2 * hd :])
            h_MH = (1.0 - z) * cand + z * h_MH
            return h_MH, h_MH

        _, h_TMH = lax.scan(cell, jnp.zeros((b * n, hd), x_BTNI.dtype), gi_TMG)
        q_TMA = dense(p, pre + "fc2", h_TMH)
        return jnp.swapaxes(q_TMA.reshape(t, b, n, -1), 0, 1)

    def mixer(p, pre, q_BTN, st_BTS):  # noqa: ANN001, ANN202 (pymarl's QMixer)
        b, t, _ = q_BTN.shape
        st = st_BTS.reshape(b * t, -1)
        w1 = jnp.abs(mlp2(p, pre + "hyper_w_1", st)).reshape(-1, n, e)
        b1 = dense(p, pre + "hyper_b_1", st).reshape(-1, 1, e)
        hidden = jax.nn.elu(q_BTN.reshape(-1, 1, n) @ w1 + b1)
        w_final = jnp.abs(mlp2(p, pre + "hyper_w_final", st)).reshape(-1, e, 1)
        v = mlp2(p, pre + "V", st).reshape(-1, 1, 1)
        return (hidden @ w_final + v).reshape(b, t, 1)

    def td_lambda(reward, term, mask, tmax):  # noqa: ANN001, ANN202 (pymarl2's backward recursion)
        def back(g_next, xs):  # noqa: ANN001, ANN202
            r, tm, m, q_next = xs
            g = lam * gamma * g_next + m * (r + (1.0 - lam) * gamma * q_next * (1.0 - tm))
            return g, g

        g_last = tmax[:, -1] * (1.0 - term.sum(axis=1))
        xs = tuple(jnp.swapaxes(x, 0, 1) for x in (reward, term, mask, tmax[:, 1:]))
        _, g_TB1 = lax.scan(back, g_last, xs, reverse=True)
        return jnp.swapaxes(g_TB1, 0, 1)

    def loss_fn(params, target, batch):  # noqa: ANN001, ANN202
        inputs, avail, actions, reward, term, mask, state = batch
        q = unroll(params, "agent.", inputs)
        chosen = jnp.take_along_axis(q[:, :-1], actions, axis=3)[..., 0]
        tq = unroll(target, "target_agent.", inputs)
        best = jnp.argmax(jnp.where(avail == 0, -9999999.0, lax.stop_gradient(q)), axis=3)[..., None]
        tmax = mixer(target, "target_mixer.", jnp.take_along_axis(tq, best, axis=3)[..., 0], state)
        targets = lax.stop_gradient(td_lambda(reward, term, mask, tmax))
        td = (mixer(params, "mixer.", chosen, state[:, :-1]) - targets) * mask
        return 0.5 * (td * td).sum() / mask.sum()

    def step(params, target, opt, batch):  # noqa: ANN001, ANN202
        loss, grads = jax.value_and_grad(loss_fn)(params, target, batch)
        norm = jnp.sqrt(sum((g * g).sum() for g in jax.tree_util.tree_leaves(grads)))
        coef = jnp.minimum(clip / (norm + 1e-6), 1.0)
        grads = jax.tree_util.tree_map(lambda g: g * coef, grads)
        count = opt["count"] + 1.0
        m = jax.tree_util.tree_map(lambda m, g: beta1 * m + (1.0 - beta1) * g, opt["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: beta2 * v + (1.0 - beta2) * g * g, opt["v"], grads)
        step_size = lr / (1.0 - beta1**count)
        root_bc2 = jnp.sqrt(1.0 - beta2**count)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - step_size * m / (jnp.sqrt(v) / root_bc2 + eps), params, m, v
        )
        return params, {"m": m, "v": v, "count": count}, loss

    return step


# ------------------------------------------------------------- driver side (the MindSpore venv)
class JaxWorker:
    """The driver side: this file run by ``python`` (the bench venv's) as a worker on ``data``."""

    def __init__(self, python: str, data: Path, threads: int) -> None:
        cmd = [python, str(Path(__file__).resolve()), "--data", str(data), "--threads", str(threads)]
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

    def run(self, k: int, i: int) -> list[float]:
        self.proc.stdin.write(json.dumps({"op": "run", "steps": k, "batch": i}) + "\n")
        self.proc.stdin.flush()
        msg = self._read()
        return msg["times"], msg["loss"]

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
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help=".npz written by learner_step.py")
    ap.add_argument("--threads", type=int, default=1, help="XLA CPU threads (1 = single-threaded Eigen)")
    args = ap.parse_args()
    if args.threads == 1:  # must be set before jax is imported
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
    proto, sys.stdout = sys.stdout, sys.stderr  # stray prints must not corrupt the protocol

    def send(msg: dict) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    import jax
    import jax.numpy as jnp
    import jaxlib

    data = np.load(args.data)
    meta = json.loads(str(data["meta"]))
    params = {k[2:]: jnp.asarray(data[k]) for k in data.files if k.startswith("w:") and "target_" not in k}
    target = {k[2:]: jnp.asarray(data[k]) for k in data.files if k.startswith("w:") and "target_" in k}
    dtypes = {"avail": np.int32, "actions": np.int32}
    batches = [
        tuple(jnp.asarray(data[f"b{i}:{k}"].astype(dtypes.get(k, np.float32))) for k in BATCH_KEYS)
        for i in range(meta["n_batches"])
    ]
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    opt = {
        "m": zeros,
        "v": jax.tree_util.tree_map(jnp.zeros_like, params),
        "count": jnp.zeros((), jnp.float32),
    }

    t0 = time.perf_counter()
    compiled = (
        jax.jit(build_step(meta), donate_argnums=(0, 2)).lower(params, target, opt, batches[0]).compile()
    )
    compile_s = time.perf_counter() - t0
    params, opt, loss = compiled(params, target, opt, batches[0])
    first_loss = float(loss)
    send(
        {
            "first_loss": first_loss,
            "compile_s": compile_s,
            "first_call_s": time.perf_counter() - t0,
            "versions": f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, numpy {np.__version__}",
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        }
    )
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        if req.get("op") != "run":
            send({"error": f"unknown op {req.get('op')!r}; allowed: run, quit"})
            continue
        times = []
        batch = batches[int(req["batch"]) % len(batches)]
        for _ in range(int(req["steps"])):
            t0 = time.perf_counter()
            params, opt, loss = compiled(params, target, opt, batch)
            value = float(loss)  # waits for the result, as torch's .item() and MindSpore's .asnumpy()
            times.append(time.perf_counter() - t0)
        send({"times": times, "loss": value})


if __name__ == "__main__":
    main()
