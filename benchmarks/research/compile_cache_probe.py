"""Does MindSpore's compile cache give the right answer for marl's kind of graphs? (It did not in 2.10.)

Runs a small jitted Cell (a closure over a net whose parameters the Cell owns) in fresh processes that
share one cache folder: first inputs of shape A then B, then B then A, then A with a changed constant.
Without a cache every line prints the same value for the same input and constant; with MindSpore 2.10's
cache (keyed by compile order and the entry script's imports) the later processes print other values.
``marl.utils.ms.jit`` refuses the cache for this reason.

    python benchmarks/research/compile_cache_probe.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CHILD = r"""
import os, sys
import numpy as np
import mindspore as ms
from mindspore import nn, ops, Parameter, Tensor
ms.set_device("CPU")
class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.linspace(0, 1, 9).reshape(3, 3).astype(np.float32)), name="w")
    def construct(self, x):
        return ops.matmul(x, self.w)
net, k = Net(), float(os.environ["PROBE_K"])
def f(x):
    return (net(x) ** 2).sum() * k
class Step(nn.Cell):
    def __init__(self):
        super().__init__()
        self.owners = nn.CellList([net])
    @ms.jit(jit_level="O1")
    def construct(self, x):
        return f(x)
step = Step()
xs = {"A": np.ones((2, 3), np.float32), "B": np.arange(12, dtype=np.float32).reshape(4, 3)}
for name in sys.argv[1]:
    print(f"  input {name} (shape {xs[name].shape}), constant {k:g}: {float(step(Tensor(xs[name]))):.4f}")
"""


def run(script: str, order: str, k: float, cache: str | None) -> str:
    """Stdout of one child process (``script``) computing ``order``'s inputs with constant ``k``."""
    env = {kk: v for kk, v in os.environ.items() if not kk.startswith("MS_COMPILER_CACHE")}
    env["PROBE_K"] = str(k)
    if cache:
        env.update(MS_COMPILER_CACHE_ENABLE="1", MS_COMPILER_CACHE_PATH=cache)
    out = subprocess.run([sys.executable, script, order], env=env, capture_output=True, text=True)
    return out.stdout.rstrip() or out.stderr[-2000:]


def main() -> None:
    plan = [("AB", 1.0), ("BA", 1.0), ("AB", 2.0)]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")  # MindSpore parses the source, so it must be a file
        with open(script, "w") as fh:
            fh.write(CHILD)
        print("without the cache (the right answers):")
        for order, k in plan:
            print(run(script, order, k, None))
        print("with the cache, processes one after the other sharing one folder:")
        for order, k in plan:
            print(run(script, order, k, os.path.join(tmp, "cache")))


if __name__ == "__main__":
    main()
