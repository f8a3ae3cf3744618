"""benchmarks/learner_step.py's contenders: the matmul FLOP count and the torch / JAX steps' parity with
the MindSpore learner. Each test needs its contender's optional install and is skipped without it:
torch (``pip install -e ".[bench]"``) or the bench venv with JAX (``make bench-env``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from jax_qmix_step import JaxWorker, write_npz  # noqa: E402
from qmix_workload import batch_arrays, map_info, step_matmul_flops, synthetic_batch  # noqa: E402

from marl.config.schema import Config, LearnerConfig  # noqa: E402
from marl.learners import QLearner  # noqa: E402
from marl.utils.ms import params_to_numpy, setup  # noqa: E402

JAX_PYTHON = ROOT / ".venv-bench" / "bin" / "python"


def _setup(name: str, b: int):  # noqa: ANN202
    setup(1, seed=0)
    info = map_info(name)
    cfg = Config(learner=LearnerConfig(batch_size=b, use_jit=False))
    learner = QLearner(info, cfg)
    batches = [synthetic_batch(info, b, seed, max_len=12) for seed in range(2)]  # MindSpore: 16 slots
    return info, cfg, learner, batches


def test_map_sizes_come_from_the_map_data():
    info = map_info("8m")
    assert (info.n_agents, info.n_actions, info.episode_limit) == (8, 14, 120)
    with pytest.raises(ValueError, match="unknown SMAC map"):
        map_info("9m_typo")


def test_matmul_flop_count_equals_torch_flop_counter_and_first_losses_agree():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    from torch_qmix_step import torch_peer

    info, cfg, learner, batches = _setup("3m", 3)
    step = torch_peer(info, cfg, params_to_numpy(learner.nets))
    ms_loss, _ = learner.loss_and_grads(batches[0])
    with FlopCounterMode(display=False) as counter:
        torch_loss = step(*[torch.from_numpy(x) for x in batch_arrays(batches[0], cfg)])
    assert counter.get_total_flops() == step_matmul_flops(info, cfg, 3, info.episode_limit + 1)
    assert torch_loss == pytest.approx(ms_loss, abs=1e-5)


@pytest.mark.skipif(not JAX_PYTHON.is_file(), reason="needs the bench venv with JAX (make bench-env)")
def test_jax_worker_matches_the_mindspore_loss_before_and_after_an_update(tmp_path):
    info, cfg, learner, batches = _setup("3m", 2)
    arrays = [batch_arrays(b, cfg) for b in batches]
    write_npz(tmp_path / "step.npz", info, cfg, params_to_numpy(learner.nets), arrays)
    worker = JaxWorker(str(JAX_PYTHON), tmp_path / "step.npz", threads=1)
    try:
        first = worker.hello["first_loss"]
        assert first == pytest.approx(learner.loss_and_grads(batches[0])[0], abs=1e-5)
        assert "jax 0.10.2" in worker.hello["versions"]
        learner.train(batches[0], 0, 0)  # the worker's first call was this update
        times, loss = worker.run(2, 1)
        learner.train(batches[1], 0, 0)
        assert len(times) == 2 and all(t > 0 for t in times)
        assert loss == pytest.approx(learner.train(batches[1], 0, 0)["loss"], abs=1e-4)
        assert np.isfinite(loss) and loss != first
    finally:
        worker.close()
    assert worker.proc.returncode == 0
