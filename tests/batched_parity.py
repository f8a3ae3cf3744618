"""The shared check of a batched SMAC env against one single env per row (SMAC and SMACv2 tests)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from marl.envs.smac.sim.avail import sample_available


def assert_same_view(batch: Any, singles: Sequence[Any], where: str) -> None:
    """Observations, state and available actions of every row equal its single env's, exactly."""
    for e, s in enumerate(singles):
        np.testing.assert_array_equal(batch.get_obs()[e], np.array(s.get_obs()), err_msg=f"obs {where} {e}")
        np.testing.assert_array_equal(batch.get_state()[e], s.get_state(), err_msg=f"state {where} {e}")
        np.testing.assert_array_equal(
            batch.get_avail_actions()[e], np.array(s.get_avail_actions()), err_msg=f"avail {where} {e}"
        )


def play_against_singles(
    batch: Any,
    singles: Sequence[Any],
    seed: int,
    steps: int,
    limit: int | None = None,
    each_step: Callable[[int], None] | None = None,
) -> None:
    """Random available actions, a random subset of rows stepped each time, ended rows reset; every output of
    the batch (view, reward, end, infos, stats) compared exactly with the single envs. ``limit`` shortens
    the episodes (timeouts); ``each_step(t)`` runs extra checks before step ``t``."""
    if limit is not None:
        batch.episode_limit = limit
        for s in singles:
            s.episode_limit = limit
    batch.reset()
    for s in singles:
        s.reset()
    rs = np.random.default_rng(seed)
    n = len(singles)
    for t in range(steps):
        assert_same_view(batch, singles, f"step {t}")
        if each_step is not None:
            each_step(t)
        actions = sample_available(batch.get_avail_actions().astype(bool), rs.random((n, batch.n_agents)))
        mask = rs.random(n) < 0.7
        reward, term, info = batch.step(actions, mask)
        for e, s in enumerate(singles):
            if not mask[e]:
                assert reward[e] == 0 and not term[e]
                continue
            r, done, i = s.step(actions[e])
            assert (reward[e], term[e]) == (r, done), f"step {t} env {e}"
            for k in ("battle_won", "dead_allies", "dead_enemies"):
                assert info[k][e] == i[k], (k, t, e)
            assert info["episode_limit"][e] == i.get("episode_limit", False)
        if term.any():
            batch.reset_envs(term)
            for e in np.flatnonzero(term):
                singles[e].reset()
    for e, s in enumerate(singles):
        assert batch.env_stats(e) == s.get_stats()
