"""SMACv2's compiled kernels (marl/envs/smac/smacv2/fast_kernels.py) against the NumPy reference
(``V2Observer`` + ``SmacFeatures(compiled=False)``): two ``SMACv2Env`` with the same seed, one compiled and
one not, play the same actions through many steps and resets and must agree element for element."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.sim.avail import sample_available
from marl.envs.smac.smacv2.env import SMACv2Env

CASES = [
    ("protoss_5_vs_5", {}),  # SMACv2's standard config
    ("terran_10_vs_11", dict(prob_obs_enemy=0.5, action_mask=False)),  # sc2_gen_terran_epo.yaml's flags
    ("zerg_5_vs_5", dict(prob_obs_enemy=0.0, obs_last_action=True, obs_timestep_number=True)),
    ("protoss_10_vs_11", dict(prob_obs_enemy=0.3, obs_pathing_grid=True, obs_terrain_height=True)),
    ("terran_5_vs_5", dict(fully_observable=True, state_timestep_number=True, reward_only_positive=False)),
    ("zerg_10_vs_10", dict(use_unit_ranges=False, obs_own_pos=False, obs_all_health=False)),
    ("protoss_5_vs_5", dict(obs_instead_of_state=True, state_last_action=False, reward_sparse=True)),
    ("terran_10_vs_11", dict(obs_all_health=False, obs_own_health=False, min_attack_range=4.0)),
    ("protoss_10_vs_10", dict(conic_fov=True, obs_last_action=True)),  # SMACv2's conic field of view
    ("terran_5_vs_5", dict(conic_fov=True, num_fov_actions=6, action_mask=False, prob_obs_enemy=0.5)),
    ("zerg_10_vs_11", dict(conic_fov=True, fully_observable=True, state_timestep_number=True)),
]


def _same_view(a: SMACv2Env, b: SMACv2Env, where: str) -> None:
    for got, want, what in (
        (a.get_obs(), b.get_obs(), "obs"),
        (a.get_state(), b.get_state(), "state"),
        (a.get_avail_actions(), b.get_avail_actions(), "avail"),
    ):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, (what, where)
        np.testing.assert_array_equal(got, want, err_msg=f"{what} {where}")


@pytest.mark.parametrize(("name", "flags"), CASES)
def test_compiled_equals_numpy_reference_over_episodes(name: str, flags: dict) -> None:
    fast, ref = SMACv2Env(name, seed=11, **flags), SMACv2Env(name, seed=11, compiled=False, **flags)
    fast.reset()
    ref.reset()
    rs = np.random.default_rng(5)
    episodes, tagged, observed_some = 0, 0, 0
    for t in range(400):
        _same_view(fast, ref, f"{name} {flags} step {t}")
        np.testing.assert_array_equal(fast._fast.obs_enemies[0], ref._observer.obs_enemies)
        np.testing.assert_array_equal(fast._fast.tag_owner[0], ref._observer.tag_owner)
        tagged += int((ref._observer.tag_owner >= 0).sum())
        observed_some += int(ref._observer.obs_enemies.any(axis=0).sum())
        avail = np.asarray(fast.get_avail_actions(), dtype=bool)[None]
        acts = sample_available(avail, rs.random((1, fast.n_agents)))[0]
        r_fast, done_fast, info_fast = fast.step(acts)
        r_ref, done_ref, info_ref = ref.step(acts)
        assert r_fast == pytest.approx(r_ref, rel=1e-12, abs=1e-12)  # unit-by-unit vs pairwise sums
        assert (done_fast, info_fast) == (done_ref, info_ref)
        if done_fast:
            episodes += 1
            fast.reset()
            ref.reset()
            assert fast.get_stats() == ref.get_stats()
    assert episodes >= 2 and tagged > 0 and observed_some > 0  # several episodes; EPO tags were used


def test_epo_draws_change_who_observes_and_the_seed_fixes_them() -> None:
    """With prob_obs_enemy < 1 the compiled path draws which agents observe a tagged enemy: the same seed
    gives the same observations, other seeds other ones, and some agent misses an enemy a teammate tagged."""

    def run(seed: int) -> tuple[np.ndarray, bool]:
        env = SMACv2Env("protoss_10_vs_10", seed=seed, prob_obs_enemy=0.3)
        env.reset()
        rs = np.random.default_rng(0)
        out, partial = [], False
        for _ in range(30):
            out.append(np.asarray(env.get_obs()))
            seen = env._fast.obs_enemies[0][env._fast.tag_owner[0] >= 0]  # observers of tagged enemies
            partial |= bool(seen.size and not seen.all())
            avail = np.asarray(env.get_avail_actions(), dtype=bool)[None]
            _, done, _ = env.step(sample_available(avail, rs.random((1, env.n_agents)))[0])
            if done:
                env.reset()
        return np.stack(out), partial

    a, partial = run(3)
    np.testing.assert_array_equal(a, run(3)[0])
    assert not np.array_equal(a, run(4)[0])
    assert partial
