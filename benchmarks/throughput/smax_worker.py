"""JaxMARL's SMAX side of the throughput benchmarks, run in the peer venv (``make bench-env``: jax needs
numpy 2, so it cannot share a process with MindSpore):

    .venv-bench/bin/python benchmarks/throughput/smax_worker.py <map> <n_envs> <seconds>   # one JSON line
    .venv-bench/bin/python benchmarks/throughput/smax_worker.py <map> <n_envs> serve       # paired timing

``HeuristicEnemySMAX`` with the scenario of the map's name; each agent takes a uniformly random available
action. Two timed functions: ``step`` (one jitted call samples the actions and steps every env, ``vmap``
over envs) and ``scan`` (100 of those steps inside one jitted ``lax.scan``, JaxMARL's favoured use). Each
timed window follows an untimed warm-up of a quarter of it (at most 1 s), as ours does
(``sim_throughput.steady_rate``). With a number of seconds the worker prints one line, both rates and the
head (compile seconds, versions); with ``serve`` it prints the head, then answers each line
``<step|scan> <seconds>`` on stdin with ``{"sps": ...}``: what ``sim_paired.SmaxServer`` sends.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import sys
import time

import jax
import jax.numpy as jnp
from jaxmarl import make
from jaxmarl.environments.smax import map_name_to_scenario

SCAN_LENGTH = 100


class Smax:
    """The jitted step and scan of ``n_envs`` SMAX envs of ``name``, loaded and warmed."""

    def __init__(self, name: str, n_envs: int) -> None:
        env = self.env = make("HeuristicEnemySMAX", scenario=map_name_to_scenario(name))
        keys = jax.random.split(jax.random.PRNGKey(0), n_envs)
        t0 = time.perf_counter()
        state = jax.jit(jax.vmap(lambda k: env.reset(k)[1]))(keys)
        step = jax.jit(jax.vmap(self.one))
        for _ in range(3):  # the first calls may recompile (weak types)
            keys, state = step(keys, state)
        jax.block_until_ready(state)
        self.compile_s = time.perf_counter() - t0  # the step's (as every run before); the scan compiles next

        def roll(keys, state):
            def body(c, _):
                return jax.vmap(self.one)(*c), None

            return jax.lax.scan(body, (keys, state), None, length=SCAN_LENGTH)[0]

        roll = jax.jit(roll)
        self.carry = {"step": (keys, state), "scan": roll(*roll(keys, state))}
        jax.block_until_ready(self.carry["scan"])
        self.fns = {"step": step, "scan": roll}
        self.per_call = {"step": n_envs, "scan": SCAN_LENGTH * n_envs}

    def one(self, key, state):
        """One step of one env under uniformly random available actions; the next key and state."""
        env = self.env
        key, k1, k2 = jax.random.split(key, 3)
        avail = env.get_avail_actions(state)
        keys = jax.random.split(k1, env.num_agents)
        acts = {
            a: jax.random.categorical(keys[i], jnp.log(avail[a].astype(jnp.float32)))
            for i, a in enumerate(env.agents)
        }
        _, state, _, _, _ = env.step(k2, state, acts)
        return key, state

    def rate(self, kind: str, secs: float) -> float:
        """Env steps a second of ``kind`` over ``secs``, after an untimed warm-up of a quarter of it (at most
        1 s)."""
        fn, c = self.fns[kind], self.carry[kind]
        for s in (min(1.0, secs / 4), secs):
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < s:
                c = fn(*c)
                n += 1
                if kind == "scan":  # else XLA queues dozens of 100-step calls ahead: a window of minutes
                    jax.block_until_ready(c)
            jax.block_until_ready(c)
        self.carry[kind] = c
        return n * self.per_call[kind] / (time.perf_counter() - t0)


def main() -> None:
    """Time the SMAX of ``argv[1:3]`` once (``argv[3]`` seconds) or serve timing requests (``serve``)."""
    name, n_envs, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    smax = Smax(name, n_envs)
    head = {"compile_s": smax.compile_s, "jax": jax.__version__, "jaxmarl": md.version("jaxmarl")}
    if mode == "serve":
        print(json.dumps(head), flush=True)
        for line in sys.stdin:
            kind, secs = line.split()
            print(json.dumps({"sps": smax.rate(kind, float(secs))}), flush=True)
    else:
        secs = float(mode)
        print(json.dumps({"sps": smax.rate("step", secs), "scan_sps": smax.rate("scan", secs), **head}))


if __name__ == "__main__":
    main()
