"""BatchedSMACv2Env / BatchedSMACv2VectorEnv: row e equals SMACv2Env(seed + e) step for step."""

from __future__ import annotations

import numpy as np
import pytest
from batched_parity import play_against_singles

from marl.buffers import Scheme
from marl.envs.base import EnvInfo
from marl.envs.factory import EnvFactory
from marl.envs.smac.smacv2.batched import BatchedSMACv2Env, BatchedSMACv2VectorEnv
from marl.envs.smac.smacv2.env import SMACv2Env
from marl.runners import ParallelRunner


def _play(name: str, n: int, seed: int, steps: int, limit: int | None = None, threads: int = 1, **flags):
    """``play_against_singles`` on ``n`` rows of ``name`` against per-row ``SMACv2Env(seed + e)``, also
    checking before every step that each row drew the same team and start positions."""
    batch = BatchedSMACv2Env(name, n, seed, threads=threads, **flags)
    singles = [SMACv2Env(name, seed=seed + e, **flags) for e in range(n)]

    def same_draws(t: int) -> None:
        for e, s in enumerate(singles):
            assert batch.env_stats(e) == s.get_stats(), (name, t, e)
        np.testing.assert_array_equal(batch.units.pos, np.stack([s._units.pos[0] for s in singles]))

    play_against_singles(batch, singles, seed, steps, limit, each_step=same_draws)
    for e, s in enumerate(singles):
        assert batch.max_reward[e] == s.max_reward
    return batch, singles


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("protoss_5_vs_5", {}),
        ("terran_10_vs_11", dict(prob_obs_enemy=0.5, action_mask=False)),  # EPO and a Medivac race
        ("zerg_10_vs_10", dict(prob_obs_enemy=0.0, obs_last_action=True)),
        ("protoss_10_vs_11", dict(conic_fov=True, action_mask=False)),
    ],
)
def test_batched_env_equals_per_row_envs_over_many_episodes(name: str, flags: dict) -> None:
    batch, _ = _play(name, 4, seed=5, steps=220, **flags)
    assert batch.get_stats()["battles_game"] >= 6
    teams = {tuple(batch.env_stats(e)["ally_team"]) for e in range(4)}
    assert len(teams) > 1  # the rows drew different teams


def test_batched_env_equals_per_row_envs_timeouts_threads_and_options() -> None:
    batch, _ = _play(
        "protoss_10_vs_11", 3, seed=1, steps=40, limit=7, threads=2, continuing_episode=True,
        reward_only_positive=False, obs_instead_of_state=True, fully_observable=True,
    )  # fmt: skip
    assert batch.get_stats()["timeouts"] >= 3
    _play("terran_5_vs_5", 2, seed=9, steps=40, reward_sparse=True, reward_scale=False, obs_pathing_grid=True)


class _Deterministic:
    """Test controller: for each agent, the available action picked by a fixed hash of (t, row, agent)."""

    def init_hidden(self, batch_size):
        self.t = 0

    def select_actions(self, obs_BNO, avail_BNA, t_env, test_mode, rows=None):
        rows = np.arange(len(avail_BNA)) if rows is None else rows
        out = np.zeros(avail_BNA.shape[:2], dtype=np.int64)
        for b, row in enumerate(rows):
            for i in range(avail_BNA.shape[1]):
                ok = np.flatnonzero(avail_BNA[b, i])
                out[b, i] = ok[(7 * self.t + 3 * int(row) + 5 * i + int(1e3 * obs_BNO[b, i].sum())) % len(ok)]
        self.t += 1
        return out


def test_runner_with_the_batched_vector_env_gives_the_same_episode_batch() -> None:
    name, n, seed = "zerg_5_vs_5", 3, 40
    scheme = Scheme(EnvInfo.from_dict(SMACv2Env(name).get_env_info()))
    fns = [lambda e=e: SMACv2Env(name, seed=seed + e) for e in range(n)]
    ref = ParallelRunner(fns, scheme, _Deterministic())
    venv = BatchedSMACv2VectorEnv(name, n, seed=seed)
    ours = ParallelRunner(fns, scheme, _Deterministic(), venv=venv)
    for _ in range(2):  # the second rollout starts from envs reset with their streams gone on
        b_ref, s_ref = ref.run(0)
        b_ours, s_ours = ours.run(0)
        for k in b_ref.data:
            np.testing.assert_array_equal(b_ours[k], b_ref[k], err_msg=k)
        assert s_ours == s_ref
    assert ours.env_stats() == ref.env_stats()
    assert venv.call(2, "get_env_info") == ref.call(2, "get_env_info")


def test_the_factory_gives_the_batched_path_and_exact_resume_of_the_draws() -> None:
    factory = EnvFactory("sc2", "terran_5_vs_5", "sim", {"prob_obs_enemy": 0.5}, seed=2, offset=5)
    venv = factory.batched(3)
    assert isinstance(venv, BatchedSMACv2VectorEnv) and venv.n_envs == 3
    row1 = factory(1)
    assert isinstance(row1, SMACv2Env)
    venv.reset([0, 1, 2])
    row1.reset()
    assert venv.call(1, "get_stats") == row1.get_stats()  # row r is the factory's env r
    # exact resume: restore the generators into a new batch and the next episodes are the same
    states = venv.rng_states()
    fresh = EnvFactory("sc2", "terran_5_vs_5", "sim", {"prob_obs_enemy": 0.5}, seed=7, offset=0).batched(3)
    fresh.set_rng_states(states)
    a = venv.reset([0, 1, 2])
    b = fresh.reset([0, 1, 2])
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.obs_NO, y.obs_NO)
        np.testing.assert_array_equal(x.state_S, y.state_S)
    single = SMACv2Env("terran_5_vs_5", seed=99, prob_obs_enemy=0.5)
    single.set_rng_state(states[1])
    single.reset()
    assert single.get_stats()["ally_team"] == fresh.call(1, "get_stats")["ally_team"]
    np.testing.assert_array_equal(np.array(single.get_obs()), b[1].obs_NO)


def test_bad_input_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="heuristic_ai"):
        BatchedSMACv2Env("protoss_5_vs_5", 2, heuristic_ai=True)
    with pytest.raises(ValueError, match="unknown SMACv2 scenario"):
        BatchedSMACv2Env("protoss_5v5", 2)
    with pytest.raises(ValueError, match="n_envs"):
        BatchedSMACv2Env("protoss_5_vs_5", 0)
    batch = BatchedSMACv2Env("terran_5_vs_5", 2, seed=0)
    batch.reset()
    assert batch.env_stats(1)["ally_team"][4] == "medivac" != batch.env_stats(0)["ally_team"][4]
    acts = np.ones((2, 5), dtype=int)
    acts[1, 4] = 10  # slot 4 at the start: out of range (env 1's agent 4 is a Medivac: it heals)
    with pytest.raises(ValueError, match=r"env 1, agent 4 cannot take action 10 \(heal ally 4\)"):
        batch.step(acts)
    acts[1, 4], acts[0, 4] = 1, 10
    with pytest.raises(ValueError, match=r"env 0, agent 4 cannot take action 10 \(attack enemy 4\)"):
        batch.step(acts)
