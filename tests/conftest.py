"""Test-session setup shared by every test file: the tiers, the seeding, and the hidden game.

Every test belongs to exactly one tier (a pytest marker, registered in ``pyproject.toml``; docs/testing.md
says what each holds and its time budget). A test's tier is, in this order:

1. a tier marker on the test or its module (``@pytest.mark.conformance``, ``pytestmark = ...``);
2. ``external`` when it is marked ``sc2`` or ``mindinsight`` (it needs something a ``make`` install lacks);
3. its file's entry in :data:`FILE_TIERS`;
4. :data:`DEFAULT_TIER` for a file not listed there, so a new test file runs in ``make test`` at once.

A ``slow`` test in a ``unit`` file is moved to ``integration``: the unit tier is the 90-second loop.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

TIERS = ("unit", "integration", "conformance", "learning", "benchmarks", "external")
DEFAULT_TIER = "integration"
EXTERNAL_MARKERS = ("sc2", "mindinsight")
# Per-test ceilings (pytest-timeout) of the tiers whose tests train for real; the rest use pyproject's 300 s.
TIER_TIMEOUT_S = {"learning": 900, "external": 900}

_UNIT = """
buffers config config_sections dense gru_kernel gym_env gym_view logging modules mpe numba_cache_guard
pettingzoo_view pettingzoo_suite report records sim_batched sim_engine sim_jit sim_targeting sim_threads
sim_weapons smac_batched_env smac_env smac_env_fused smac_features smac_fused smac_maps smac_rollout
smacv2_distributions smacv2_engine smacv2_env smacv2_fast smacv2_game smacv2_obs_reference unit_data
q_learner coma qplex qtran wqmix dqn maddpg pg maa2c gru_bptt length_groups compiled_lengths update_rows
learner_protocol q_learner_long
"""
_INTEGRATION = """
train_integration faults faults_cli overlap sweep checkpoint controller runner ray_runner baselines_eval
engine_only imports ms_setup sc2_engine smacv2_batched readme_tables ppo
"""
_LEARNING = "learning smacv2_train_seeded"
_BENCHMARKS = """
acting_threads_bench epymarl_bench fidelity_bench fidelity_smaclite heuristic_sensitivity learner_step_bench
map_ordering paper_runs recorded_cooldowns recorded_features recorded_movement recorded_rewards
recorded_spawns recorded_turns replay_recorded sim_paired_bench smacv2_baselines smacv2_throughput_bench
spawn_layout_bench suite_page unit_data_check
"""
_EXTERNAL = "mindinsight"

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
    tier = FILE_TIERS.get(item.path.name, DEFAULT_TIER)
    if tier == "unit" and item.get_closest_marker("slow") is not None:
        return "integration"
    return tier


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test its tier marker, so that ``-m unit`` (and the other tiers) select it."""
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
        if tier in TIER_TIMEOUT_S and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIER_TIMEOUT_S[tier]))


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
