"""benchmarks/learner_step/learner_step.py's contenders: the matmul FLOP count and the torch / JAX steps'
parity with the MindSpore learner. Each test needs its contender's optional install and is skipped without it:
torch (``pip install -e ".[bench]"``) or the bench venv with JAX (``make bench-env``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.learner_step.jax_qmix_step import JaxWorker, write_npz
from benchmarks.learner_step.qmix_workload import batch_arrays, map_info, step_matmul_flops, synthetic_batch
from marl.config.schema import Config, LearnerConfig
from marl.learners import QLearner
from marl.utils.ms import params_to_numpy, setup

ROOT = Path(__file__).resolve().parents[1]

JAX_PYTHON = ROOT / ".venv-bench" / "bin" / "python"


@pytest.fixture
def jax_cache(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """JAX's persistent compilation cache for the JAX workers (they inherit the environment): in pytest's
    cache folder (``.pytest_cache/d/jax_compilation``, which git ignores), so a second ``make test`` loads
    the compiled steps instead of compiling them again (the layouts test: 63 s cold, 5 s warm at
    load 6 on 2 cores, 2026-11-29); without pytest's cache (``-p no:cacheprovider``), a fresh folder."""
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("jax_compilation") if cache is not None else tmp_path_factory.mktemp("jax_cache")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(folder))
    return folder


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

    from benchmarks.learner_step.torch_qmix_step import torch_peer

    info, cfg, learner, batches = _setup("3m", 3)
    step = torch_peer(info, cfg, params_to_numpy(learner.nets))
    ms_loss, _ = learner.loss_and_grads(batches[0])
    with FlopCounterMode(display=False) as counter:
        torch_loss = step(*[torch.from_numpy(x) for x in batch_arrays(batches[0], cfg)])
    assert counter.get_total_flops() == step_matmul_flops(info, cfg, 3, info.episode_limit + 1)
    assert torch_loss == pytest.approx(ms_loss, abs=1e-5)


@pytest.mark.skipif(not JAX_PYTHON.is_file(), reason="needs the bench venv with JAX (make bench-env)")
def test_jax_worker_matches_the_mindspore_loss_before_and_after_an_update(tmp_path, jax_cache):
    info, cfg, learner, batches = _setup("3m", 2)
    arrays = [batch_arrays(b, cfg) for b in batches]
    write_npz(tmp_path / "step.npz", info, cfg, params_to_numpy(learner.nets), arrays)
    worker = JaxWorker(str(JAX_PYTHON), tmp_path / "step.npz", threads=1)
    try:
        first = worker.hello["first_loss"]
        assert first == pytest.approx(learner.loss_and_grads(batches[0])[0], abs=1e-5)
        assert "jax 0.10.2" in worker.hello["versions"]
        learner.train(batches[0], 0, 0)  # the worker's first call was this update
        times, cpu, loss = worker.run(2, 1)
        learner.train(batches[1], 0, 0)
        assert len(times) == len(cpu) == 2 and all(t > 0 for t in times) and all(c > 0 for c in cpu)
        assert loss == pytest.approx(learner.train(batches[1], 0, 0)["loss"], abs=1e-4)
        assert np.isfinite(loss) and loss != first
    finally:
        worker.close()
    assert worker.proc.returncode == 0


def test_jax_layout_names_parse_and_bad_ones_say_what_is_allowed():
    from benchmarks.learner_step.jax_qmix_layouts import (
        DEFAULT,
        PREVIOUS,
        Layout,
        combine,
        parse_layout,
        screening_layouts,
    )

    assert parse_layout("u4-split") == Layout(gates="split", unroll=4)
    assert parse_layout(PREVIOUS.name) == PREVIOUS and parse_layout("") == DEFAULT
    for bad, msg in (("cell-hoist", "one per kind"), ("u0", "u<k>"), ("hoist-concat", "concat gates")):
        with pytest.raises(ValueError, match=msg):
            parse_layout(bad)
    names = [x.name for x in screening_layouts()]
    assert len(names) == len(set(names)) == 11 and PREVIOUS.name in names
    times = dict.fromkeys(names, 1.0) | {
        "cell-fused-u4-time-donate-bmm": 0.5,
        "cell-split-u1-time-donate-bmm": 0.7,
    }
    assert combine(times) == Layout(gates="split", unroll=4)


@pytest.mark.slow  # 63 s with a cold JAX cache (load 7 on 2 cores): under pytest-xdist it starts early
@pytest.mark.skipif(not JAX_PYTHON.is_file(), reason="needs the bench venv with JAX (make bench-env)")
def test_every_jax_layout_has_the_mindspore_loss_and_gradients(tmp_path, jax_cache):
    info, cfg, learner, batches = _setup("3m", 2)
    arrays = [batch_arrays(b, cfg) for b in batches]
    write_npz(tmp_path / "step.npz", info, cfg, params_to_numpy(learner.nets), arrays)
    # every choice of every kind exactly once, in the fewest layouts (unroll's four values need four): each
    # layout compiles its step and its gradients (about 15 s a layout at load 6 on 2 cores, 2026-11-29; all
    # 11 screening layouts take minutes)
    names = [
        "hoist-split-u2-batch-keep-sum",
        "cell-concat-u1-time-donate-bmm",
        "full-fused-u4-batch-keep-bmm",
        "full-split-u8-time-donate-sum",
    ]
    worker = JaxWorker(str(JAX_PYTHON), tmp_path / "step.npz", threads=1, layouts=names, pin_cpu=0)
    try:
        assert worker.hello["affinity"] == [0] and "intra_op" not in worker.hello["xla_flags"]
        losses = worker.ask(op="grads", batch=1, out=str(tmp_path / "g.npz"))["losses"]
        ms_loss, ms_grads = learner.loss_and_grads(batches[1])
        firsts = {n: v["first_loss"] for n, v in worker.hello["layouts"].items()}
        screened = worker.ask(op="screen", steps=2, block=1)["layouts"]
        assert worker.ask(op="select", layout="cell-concat")["selected"] == names[1]
        times, cpu, loss = worker.run(1, 1)
    finally:
        worker.close()
    assert set(losses) == set(firsts) == set(screened) and len(losses) == len(names)
    assert all(v == pytest.approx(ms_loss, abs=1e-5) for v in losses.values())
    assert max(firsts.values()) - min(firsts.values()) < 1e-5
    assert all(len(s["times"]) == len(s["cpu"]) == 2 for s in screened.values())
    g = np.load(tmp_path / "g.npz")
    ms_names = [p.name for p in learner.params]
    for name in losses:
        for pname, ms_g in zip(ms_names, ms_grads, strict=True):
            np.testing.assert_allclose(g[f"{name}/{pname}"], ms_g, rtol=1e-3, atol=1e-5, err_msg=name)
    assert len(times) == len(cpu) == 1 and np.isfinite(loss)


def test_torch_layout_names_parse_and_bad_ones_say_what_is_allowed():
    from benchmarks.learner_step.torch_qmix_step import TorchLayout, parse_torch_layout

    assert parse_torch_layout("max-autotune-no-cudagraphs-graph-hoist") == TorchLayout(
        "max-autotune-no-cudagraphs", True, True
    )
    assert parse_torch_layout("default").name == "default-breaks-loop"
    assert parse_torch_layout("eager-hoist").name == "eager-hoist"
    for bad in ("eager-graph", "fast", "default-loop-hoist", "reduce-overhead-x"):
        with pytest.raises(ValueError, match="torch layout"):
            parse_torch_layout(bad)


def test_torch_layouts_have_the_mindspore_loss_and_restore_their_state():
    torch = pytest.importorskip("torch")
    from benchmarks.learner_step.torch_qmix_step import torch_peer

    info, cfg, learner, batches = _setup("3m", 2)
    weights = params_to_numpy(learner.nets)
    tb = [[torch.from_numpy(x) for x in batch_arrays(b, cfg)] for b in batches]
    ms_loss = learner.loss_and_grads(batches[0])[0]
    learner.train(batches[0], 0, 0)
    ms_second = learner.loss_and_grads(batches[1])[0]
    for layout in ("eager-loop", "eager-hoist", "default-graph-loop", "default-graph-hoist"):  # fullgraph
        # aot_eager: dynamo and AOT autograd as inductor gets them, without its C++ codegen (minutes cold)
        step = torch_peer(info, cfg, weights, layout=layout, backend="aot_eager")
        assert step(*tb[0]) == pytest.approx(ms_loss, abs=1e-5), layout
        step.save()
        second = step(*tb[1])
        assert second == pytest.approx(ms_second, abs=1e-4), layout
        step.restore()
        assert step(*tb[1]) == pytest.approx(second, abs=1e-6), layout


def test_screening_keeps_the_fastest_layout_and_lists_every_one():
    from benchmarks.learner_step.step_contenders import Contender, record_rows, screening_table

    runs = {}
    for lay, t in (("slow", 0.03), ("fast", 0.01)):
        runs[lay] = Contender("jax", None, 1.5, 4.0, 3.0, lay)
        runs[lay].times, runs[lay].cpu = [t, t, 2 * t], [t, t, 2 * t]
    record: list[dict] = []
    assert record_rows("3m", "JAX", runs, record) == "fast"
    lines = screening_table(record, 3)
    assert [r["layout"] for r in record] == ["slow", "fast"] and record[1]["ms"] == pytest.approx(10.0)
    assert "| 3m | JAX | fast | 10.0 | 1.00 | 3.0 | 1.5000000 |" in lines and screening_table([], 3) == []


def test_bad_layout_or_cpu_arguments_fail_with_what_is_allowed(monkeypatch, capsys):
    import subprocess

    from benchmarks.learner_step import learner_step

    script = str(ROOT / "benchmarks" / "learner_step" / "learner_step.py")
    out = subprocess.run(  # the command line once (each run starts MindSpore: 3 s at load 6 on 2 cores)
        [sys.executable, script, "--jax-layouts", "cell-hoist"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and "tokens, one per kind" in out.stderr, out.stderr[-500:]
    for args, msg in (
        (["--torch-compile-layouts", "eager-loop"], "compiled layouts only"),
        (["--pin-cpu", "999"], "usable CPUs"),
    ):  # its main() in this process, the same parser and checks
        monkeypatch.setattr(sys, "argv", [script, *args])
        with pytest.raises(SystemExit) as exit_:
            learner_step.main()
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and msg in err, (args, err[-500:])
