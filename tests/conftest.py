"""Test-session setup shared by every test file: the tiers, the seeding, the hidden game, and the costly
fixtures built once per session (a trained run folder, the wheel).

Every test belongs to exactly one tier (a pytest marker, registered in ``pyproject.toml``; docs/testing.md
says what each holds and its time budget). A test's tier is, in this order:

1. a tier marker on the test or its module (``@pytest.mark.conformance``, ``pytestmark = ...``);
2. ``external`` when it is marked ``sc2`` or ``mindinsight`` (it needs something a ``make`` install lacks);
3. the first pattern of :data:`TEST_TIERS` that matches ``file::test[params]`` (tests of a unit file that
   train, compile graphs or take seconds);
4. its file's entry in :data:`FILE_TIERS`;
5. :data:`DEFAULT_TIER` for a file not listed there, so a new test file runs in ``make test`` at once.

A ``slow`` test in a ``unit`` file is moved to ``integration``: the unit tier is the 90-second loop.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

TIERS = ("unit", "integration", "conformance", "learning", "benchmarks", "external")
DEFAULT_TIER = "integration"
EXTERNAL_MARKERS = ("sc2", "mindinsight")
# Per-test ceilings (pytest-timeout) of the tiers whose tests train for real; the rest use pyproject's 300 s.
TIER_TIMEOUT_S = {"learning": 900, "external": 900}
# xdist groups by file-name prefix (a test's own xdist_group marker wins). ``smacv2``: Numba does not stop
# two processes compiling the same kernel at once, and on a fresh clone both workers met the SMACv2 kernels
# together and compiled them twice. ``trained``: the untrusted-checkpoint, -input and -property tests share
# the ``trained`` run, which each worker that runs one of them trains (10-25 s). Groups for the threaded and
# rules engines' kernels made the warm suite slower (docs/testing.md, "What the suite's time is made of").
FILE_GROUPS = {"test_smacv2_": "smacv2", "test_untrusted_": "trained"}

_UNIT = """
buffers config config_sections dense gru_kernel gym_env gym_view logging modules mpe numba_cache_guard
pettingzoo_view pettingzoo_suite sim_batched sim_engine sim_jit sim_targeting sim_threads
sim_weapons smac_batched_env smac_env smac_env_fused smac_features smac_fused smac_maps smac_rollout
smacv2_distributions smacv2_engine smacv2_env smacv2_fast smacv2_game smacv2_obs_reference unit_data
q_learner coma qplex qtran wqmix dqn maddpg pg maa2c gru_bptt length_groups compiled_lengths update_rows
learner_protocol q_learner_long tiers engine_version sim_collide sim_death_burst bench_harness
research_env smac_launch_options sim_variants exceptions
"""
_INTEGRATION = """
train_integration faults faults_cli overlap sweep checkpoint controller runner ray_runner baselines_eval
engine_only imports ms_setup sc2_engine smacv2_batched readme_tables ppo report records
engine_records untrusted_checkpoint untrusted_input untrusted_property devices_cli render docs wheel_install
"""
_LEARNING = "learning smacv2_train_seeded"
_BENCHMARKS = """
acting_threads_bench epymarl_bench fidelity_bench fidelity_smaclite heuristic_sensitivity learner_step_bench
map_ordering paper_runs recorded_cooldowns recorded_features recorded_movement recorded_rewards
recorded_spawns recorded_turns replay_recorded sim_paired_bench smacv2_baselines smacv2_throughput_bench
spawn_layout_bench suite_page unit_data_check t0_check_bench pymarl_paper numba_variants_bench
"""
_EXTERNAL = "mindinsight"

# Tests of unit files that belong to integration: each took 5 s or more in the unit-tier run of 2026-11-28
# (docs/testing.md); they run the Trainer, compile MindSpore graphs (jit parity) or run long numeric loops.
_SLOW_IN_UNIT_FILES = """
test_update_rows.py::test_a_run_with_update_rows_trains_and_the_memory_stop_names_one
test_update_rows.py::test_update_in_row_parts_equals_the_one_graph_update[*
test_update_rows.py::test_ppo_epochs_in_row_parts_equal_the_one_batch_epochs[*
test_q_learner.py::test_jit_and_eager_give_the_same_losses[*
test_q_learner.py::test_soft_target_update[True]
test_q_learner.py::test_training_reduces_loss[*
test_length_groups.py::test_grouped_update_equals_the_one_batch_update[*-True]
test_gru_kernel.py::test_kernel_equals_reference_forward_and_gradients[True-*
test_gru_kernel.py::test_kernel_equals_reference_forward_and_gradients[*-61-96-64]
test_gru_kernel.py::test_agent_unroll_same_with_and_without_kernels
test_gru_bptt.py::test_gradients_equal_float64_autodiff[*-True]
test_gru_bptt.py::test_float64_truth_is_grucell_and_the_reference_matches_its_autodiff
test_maddpg.py::test_state_dict_resume_draws_the_same_minibatches_and_noise
test_maddpg.py::test_maddpg_trainer_fake_env_discrete
test_maddpg.py::test_ddpg_trainer_pendulum_continuous
test_maddpg.py::test_critic_target_against_naive
test_maddpg.py::test_soft_update_arithmetic
test_dqn.py::test_step_reports_the_naive_target_and_learns
test_dqn.py::test_trainer_cartpole_short_run
test_dqn.py::test_resume_from_checkpoint_draws_the_same_minibatches
test_qtran.py::test_train_step_updates_agents_and_joint_nets_and_round_trips
test_qtran.py::test_config_and_a_short_run_on_the_fake_env
test_sim_jit.py::test_the_fused_step_of_one_env_counts_no_references
test_sim_jit.py::test_the_game_loop_counts_no_references
test_coma.py::test_train_moves_actor_and_critic_copies_target_on_schedule_and_round_trips
test_coma.py::test_config_and_a_short_run_on_the_fake_env
test_pg.py::test_pg_trains_on_gym_cartpole_with_jit
test_maa2c.py::test_maa2c_trains_on_fake_env
test_maa2c.py::test_maa2c_train_step_is_one_unclipped_update
test_wqmix.py::test_configs_and_a_short_run_on_the_fake_env[*
test_q_learner_long.py::test_auto_mode_trains_short_batches_on_the_whole_episode
test_q_learner_long.py::test_one_chunk_training_matches_whole_episode_training
test_qplex.py::test_qplex_q_learner_trains[*
"""
TEST_TIERS: dict[str, str] = {pattern: "integration" for pattern in _SLOW_IN_UNIT_FILES.split()}


# A test that takes longer than LONG_S alone says why: it is in a tier of long tests or marked slow. Timing
# depends on the machine's load, so a run lists the others at its end (a warning, not a failure).
LONG_S = 30.0
LONG_MARKERS = ("learning", "benchmarks", "external", "slow")
_unexplained: list[tuple[str, float]] = []


def unexplained_long(duration: float, keywords: Mapping[str, object]) -> bool:
    """A call of ``duration`` seconds over :data:`LONG_S` by a test with none of :data:`LONG_MARKERS`."""
    return duration > LONG_S and not any(m in keywords for m in LONG_MARKERS)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note each call over :data:`LONG_S` that no marker explains (under pytest-xdist: in the controller,
    from the workers' reports, which carry the tests' markers as keywords)."""
    if report.when == "call" and unexplained_long(report.duration, report.keywords):
        _unexplained.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001
    """List the calls :func:`pytest_runtest_logreport` noted, slowest first."""
    if _unexplained:
        terminalreporter.section(f"tests over {LONG_S:g} s without a marker saying why (docs/testing.md)")
        for nodeid, seconds in sorted(_unexplained, key=lambda x: -x[1]):
            terminalreporter.write_line(
                f"{seconds:.1f}s {nodeid}: mark it slow or move it to a tier of long tests"
            )


def _matches(name: str, pattern: str) -> bool:
    """``pattern`` matches ``name`` where each ``*`` stands for any text (brackets are literal)."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), name) is not None


FILE_TIERS: dict[str, str] = {
    f"test_{stem}.py": tier
    for tier, names in (
        ("unit", _UNIT),
        ("integration", _INTEGRATION),
        ("learning", _LEARNING),
        ("benchmarks", _BENCHMARKS),
        ("external", _EXTERNAL),
    )
    for stem in names.split()
}


def tier_of(item: pytest.Item) -> str:
    """The tier of one collected test (the module docstring gives the rules)."""
    for tier in TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    if any(item.get_closest_marker(m) is not None for m in EXTERNAL_MARKERS):
        return "external"
    name = f"{item.path.name}::{item.name}"
    for pattern, tier in TEST_TIERS.items():
        if _matches(name, pattern):
            return tier
    tier = FILE_TIERS.get(item.path.name, DEFAULT_TIER)
    if tier == "unit" and item.get_closest_marker("slow") is not None:
        return "integration"
    return tier


def _start_rank(item: pytest.Item) -> tuple[bool, bool, bool]:
    """Where a test goes in a pytest-xdist run: the learning tier first, then the ``slow`` tests, then the
    other tiers, the unit tier last (False sorts first)."""
    return (
        item.get_closest_marker("learning") is None,
        item.get_closest_marker("slow") is None,
        item.get_closest_marker("unit") is not None,
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's hook reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its tier marker, so that ``-m unit`` (and the other tiers) select it; under
    pytest-xdist, start the long tests first.

    A worker is handed a few tests at a time, in collection order (``--dist loadgroup`` hands out the
    ``xdist_group`` groups first, the largest first): a long test collected last could leave one worker
    running it alone at the end while the other waits. Longest first, with the many short unit tests at the
    end, the two workers finish together. The order within each rank stays the collection order.
    """
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
        group = next((g for p, g in FILE_GROUPS.items() if item.path.name.startswith(p)), None)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        if tier in TIER_TIMEOUT_S and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUT_S[tier]))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (every worker sorts the same way)
        items.sort(key=_start_rank)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Seed Python's, NumPy's global and (when imported) MindSpore's generators before every test.

    A test's random draws then do not depend on which tests ran before it in the same worker (pytest-xdist
    hands tests to workers in a different order from run to run).
    """
    random.seed(0)
    np.random.seed(0)
    ms = sys.modules.get("mindspore")
    if ms is not None:
        ms.set_seed(0)


@pytest.fixture(autouse=True)
def _no_real_game_unless_marked(request, monkeypatch, tmp_path_factory):
    """Hide an installed StarCraft II from every test not marked ``sc2``.

    SMAC envs default to ``backend="auto"``, which plays the real game when it is installed; the suite must
    behave the same on a researcher's machine with the game as on CI without it.
    """
    if request.node.get_closest_marker("sc2") is None:
        monkeypatch.setenv("SC2PATH", str(tmp_path_factory.mktemp("no_sc2")))


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny fake-env QMIX run folder with three or more periodic checkpoints, trained once per worker.

    Shared by the untrusted-checkpoint, -input and -property tests (one xdist group, ``FILE_GROUPS``, so one
    worker trains it): a test that changes the folder copies it first (``shutil.copytree``).
    """
    from train_runs import train_checkpointed_run  # tests/ is on sys.path; MindSpore only when used

    return train_checkpointed_run(tmp_path_factory.mktemp("trained"))


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's wheel, built once per worker (tests that use it share the ``wheel`` xdist group)."""
    from wheels import build_wheel  # tests/ is on sys.path

    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def installed_wheel(built_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder ``built_wheel`` is installed in (``pip install --target``), with the checkout's compiled
    engine for Numba (``wheels.seed_numba_cache``: the same sources, compiled once): run it, never edit it."""
    from wheels import install_wheel, seed_numba_cache

    site = install_wheel(built_wheel, tmp_path_factory.mktemp("site"))
    seed_numba_cache(site, tmp_path_factory.mktemp("warm"))
    return site
