"""Helpers shared by several test files (tests/ is on ``sys.path`` under pytest); not a test file itself.

Test files import what they share from here (or from the other helper modules beside it: ``sc2_fakes``,
``batched_parity``, ``learner_batches``, ``train_runs``, ``gru_truth``), never from another ``test_*.py``:
importing a test file runs its module-level code again and ties the two files' fates together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from marl.envs.smac.maps import list_maps

# The per-map checks of the unit tier run on these four maps; the conformance tier runs them on all 23.
# Marines only; a Terran mix with a healer (ally-targeted actions); Zerg banelings (area damage, suicide
# attacks); and the largest map (64 enemies, Protoss colossi with shields and cliff walking).
REPRESENTATIVE_MAPS = ("3m", "MMM", "bane_vs_bane", "2c_vs_64zg")


def on_every_map(check: Callable[[str], object]) -> None:
    """Run ``check(map_name)`` on all 23 maps in one test and fail naming every map that failed.

    The conformance tier's form of a per-map check: one test item per check, not one per map.
    """
    maps = list_maps()
    assert len(maps) == 23, maps
    failed: dict[str, str] = {}
    for name in maps:
        try:
            check(name)
        except Exception as err:  # noqa: BLE001 - every map is checked, then every failure is reported
            failed[name] = f"{type(err).__name__}: {err}"
    assert not failed, "\n".join(f"{m}: {why}" for m, why in failed.items())


def last_action_rewards(env: Any, steps: int) -> list[float]:
    """Reset a SMAC env and play up to ``steps`` steps in which every agent takes its last available action
    (an attack on its highest-numbered enemy in range when it has one); the rewards, in order."""
    env.reset()
    rewards = []
    for _ in range(steps):
        avail = np.asarray(env.get_avail_actions())
        reward, terminated, _ = env.step([int(np.flatnonzero(a)[-1]) for a in avail])
        rewards.append(reward)
        if terminated:
            break
    return rewards
