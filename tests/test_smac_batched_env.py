"""BatchedStarCraft2Env / BatchedSmacVectorEnv: env e equals StarCraft2Env(seed + e) step for step.

The single envs run StarCraft2Env's table-by-table path (``fused=False``): its default on the embedded
engine is a batch of one (``env_fused.py``), which would compare the batch with itself."""

from __future__ import annotations

import numpy as np
import pytest
from batched_parity import play_against_singles

from marl.buffers import Scheme
from marl.envs.base import EnvInfo
from marl.envs.factory import EnvFactory
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.batched_vector import BatchedSmacVectorEnv
from marl.envs.smac.env import StarCraft2Env
from marl.envs.smac.features import SmacFeatures, SmacOptions, Units
from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.avail import sample_available
from marl.runners import ParallelRunner

ALL_OBS_FLAGS = dict(
    obs_last_action=True,
    obs_pathing_grid=True,
    obs_terrain_height=True,
    obs_timestep_number=True,
    state_timestep_number=True,
)


def _singles(name: str, n: int, seed: int, **flags) -> list[StarCraft2Env]:
    return [StarCraft2Env(name, backend="sim", seed=seed + e, fused=False, **flags) for e in range(n)]


def _play_against_singles(
    name: str, n: int, seed: int, steps: int, limit: int | None = None, **flags
) -> tuple[BatchedStarCraft2Env, list[StarCraft2Env]]:
    """``play_against_singles`` on ``n`` rows of ``name`` against ``StarCraft2Env(seed + e)``."""
    batch = BatchedStarCraft2Env(name, n, seed, **flags)
    singles = _singles(name, n, seed, **flags)
    play_against_singles(batch, singles, seed, steps, limit)
    total = batch.get_stats()
    assert total["battles_game"] == sum(s.get_stats()["battles_game"] for s in singles)
    assert batch.max_reward == singles[0].max_reward
    return batch, singles


def test_batched_env_equals_single_envs_3m_with_masks_and_resets():
    batch, _ = _play_against_singles("3m", 4, seed=5, steps=160)
    assert batch.get_stats()["battles_game"] >= 8  # several episodes ended and were reset


def test_batched_env_equals_single_envs_mmm_all_optional_features():
    _play_against_singles("MMM", 3, seed=7, steps=60, **ALL_OBS_FLAGS)


def test_batched_env_equals_single_envs_timeouts_negative_reward_continuing():
    batch, singles = _play_against_singles(
        "2s3z", 3, seed=1, steps=40, limit=6, reward_only_positive=False, continuing_episode=True
    )
    assert batch.get_stats()["timeouts"] >= 3


def test_batched_env_equals_single_envs_sparse_unscaled_and_heuristic():
    _play_against_singles("3s_vs_3z", 2, seed=3, steps=40, reward_sparse=True, reward_scale=False)
    _play_against_singles("3m", 2, seed=2, steps=40, heuristic_ai=True, obs_instead_of_state=True)


def test_features_of_a_batch_equal_features_of_each_table():
    """The batched code on E stacked tables gives what it gives on each table alone (E = 1)."""
    spec = load_map("2s3z")
    f = SmacFeatures(spec, SmacOptions(obs_last_action=True, obs_pathing_grid=True))
    batch = BatchedStarCraft2Env("2s3z", 5, seed=4)
    batch.reset()
    rs = np.random.default_rng(0)
    for _ in range(6):
        batch.step(sample_available(batch.get_avail_actions().astype(bool), rs.random((5, batch.n_agents))))
    table = batch.engine.snapshot()
    u = table.units()
    geo = f.batch_geometry(u)
    last = np.eye(f.n_actions, dtype=np.float32)[rs.integers(0, f.n_actions, (5, f.n_agents))]
    avail = f.batch_avail(u, geo)
    obs = f.batch_obs(u, avail, last, np.arange(5), geo)
    state = f.batch_state(u, last, np.arange(5), obs)
    codes = f.batch_end_code(u)
    for e in range(5):
        t = table.table(e)
        np.testing.assert_array_equal(avail[e], f.avail_actions(t))
        np.testing.assert_array_equal(obs[e], f.observations(t, f.avail_actions(t), last[e], e))
        np.testing.assert_array_equal(state[e], f.state(t, last[e], e))
        assert f.end_code(t) == (None if codes[e] == 2 else codes[e])
    one = Units.from_table(table.table(2))
    np.testing.assert_array_equal(one.pos[0], u.pos[2])


def test_unavailable_or_bad_actions_fail_naming_env_agent_and_action():
    batch = BatchedStarCraft2Env("3m", 3, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        batch.step(np.ones((3, 3), dtype=int))
    batch.reset()
    acts = np.ones((3, 3), dtype=int)  # stop: always available to the living
    acts[2, 1] = 6 + 2  # attack enemy 2: out of range at the start
    with pytest.raises(ValueError, match=r"env 2, agent 1 cannot take action 8 \(attack enemy 2\)"):
        batch.step(acts)
    acts[2, 1] = 9
    with pytest.raises(ValueError, match="env 2, agent 1: action 9 is out of range 0..8"):
        batch.step(acts)
    with pytest.raises(ValueError, match="shape"):
        batch.step(np.ones((2, 3), dtype=int))
    with pytest.raises(ValueError, match="integers"):
        batch.step(np.full((3, 3), 1.5))
    # the unavailable action of a masked-out env is ignored
    acts[2, 1] = 8
    batch.step(acts, np.array([True, True, False]))
    with pytest.raises(ValueError, match="mask"):
        batch.step(np.ones((3, 3), dtype=int), np.array([1, 0, 1]))


def test_stepping_an_ended_env_fails_until_it_is_reset():
    batch = BatchedStarCraft2Env("3m", 2, seed=0)
    batch.episode_limit = 2
    batch.reset()
    batch.step(np.ones((2, 3), dtype=int))
    _, term, _ = batch.step(np.ones((2, 3), dtype=int))
    assert term.all() and batch.get_stats()["timeouts"] == 2
    with pytest.raises(RuntimeError, match=r"env\(s\) \[0, 1\] are not running"):
        batch.step(np.ones((2, 3), dtype=int))
    batch.reset_envs(np.array([False, True]))
    batch.step(np.ones((2, 3), dtype=int), np.array([False, True]))  # only the reset env
    with pytest.raises(RuntimeError, match=r"\[0\]"):
        batch.step(np.ones((2, 3), dtype=int))


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


def test_runner_with_batched_vector_env_gives_the_same_episode_batch():
    name, n, seed = "3m", 3, 40
    info = EnvInfo.from_dict(StarCraft2Env(name, backend="sim").get_env_info())
    scheme = Scheme(info)
    fns = [lambda e=e: StarCraft2Env(name, backend="sim", seed=seed + e, fused=False) for e in range(n)]
    ref = ParallelRunner(fns, scheme, _Deterministic())
    venv = BatchedSmacVectorEnv(name, n, seed=seed)
    ours = ParallelRunner(fns, scheme, _Deterministic(), venv=venv)
    for _ in range(2):  # two rollouts: the second starts from reset envs whose streams went on
        b_ref, s_ref = ref.run(0)
        b_ours, s_ours = ours.run(0)
        assert sorted(b_ref.data) == sorted(b_ours.data)
        for k in b_ref.data:
            np.testing.assert_array_equal(b_ours[k], b_ref[k], err_msg=k)
        assert s_ours == s_ref
    assert ours.env_stats() == ref.env_stats()
    assert venv.call(1, "get_stats") == ref.call(1, "get_stats")
    with pytest.raises(NotImplementedError, match="save_replay"):
        venv.call(0, "save_replay")
    with pytest.raises(ValueError, match="distinct"):
        venv.reset([0, 0])


def test_the_trainers_env_factory_owns_the_batched_fast_path():
    factory = EnvFactory("sc2", "3m", "sim", {"obs_last_action": True}, seed=2, offset=5)
    venv = factory.batched(4)
    assert isinstance(venv, BatchedSmacVectorEnv) and venv.n_envs == 4
    assert venv.env.engine.base_seed == factory.row_seed(0) == 2 * 10_000 + 5
    assert venv.env.opts.obs_last_action
    factory.name = "mpe"  # no batched path registered
    assert factory.batched(4) is None


@pytest.mark.parametrize("name", ["3m", "MMM", "2s3z", "corridor", "bane_vs_bane", "2s_vs_1sc"])
def test_compiled_observe_equals_the_numpy_reference(name):
    """fast_features' kernel gives exactly the NumPy methods' avail/obs/state, under every flag set."""
    flag_sets = [
        {},
        ALL_OBS_FLAGS,
        dict(obs_all_health=False, obs_own_health=False, state_last_action=False),
        dict(obs_all_health=False),
        dict(obs_instead_of_state=True),
    ]
    for flags in flag_sets:
        batch = BatchedStarCraft2Env(name, 3, seed=1, **flags)
        batch.reset()
        fast = SmacFeatures(batch.spec, batch.opts, compiled=True)
        ref = SmacFeatures(batch.spec, batch.opts, compiled=False)
        rs = np.random.default_rng(0)
        n_ag = batch.n_agents
        for t in range(12):
            last = np.eye(batch.n_actions, dtype=np.float32)[rs.integers(0, batch.n_actions, (3, n_ag))]
            steps = rs.integers(0, 100, 3)
            got, want = fast.observe(batch._units, last, steps), ref.observe(batch._units, last, steps)
            for x, y, what in zip(got, want, ("avail", "obs", "state"), strict=True):
                assert x.dtype == y.dtype
                np.testing.assert_array_equal(x, y, err_msg=f"{name} {flags} step {t} {what}")
            acts = sample_available(batch.get_avail_actions().astype(bool), rs.random((3, batch.n_agents)))
            _, term, _ = batch.step(acts)
            if term.any():
                batch.reset_envs(term)


@pytest.mark.parametrize(
    "name,flags",
    [("3m", {}), ("MMM", dict(reward_only_positive=False)), ("2s3z", dict(reward_sparse=True)), ("8m", {})],
)
def test_compiled_reward_and_end_equal_the_numpy_reference(name, flags):
    batch = BatchedStarCraft2Env(name, 4, seed=2, **flags)
    batch.reset()
    fast = SmacFeatures(batch.spec, batch.opts, compiled=True)
    ref = SmacFeatures(batch.spec, batch.opts, compiled=False)
    dead_fast = np.zeros((4, batch.n_agents + batch.n_enemies), dtype=bool)
    dead_ref = dead_fast.copy()
    rs = np.random.default_rng(1)
    codes = set()
    for _ in range(80):
        prev = batch._units
        acts = sample_available(batch.get_avail_actions().astype(bool), rs.random((4, batch.n_agents)))
        _, term, _ = batch.step(acts)
        got, want = (
            fast.reward_and_end(prev, batch._units, dead_fast),
            ref.reward_and_end(prev, batch._units, dead_ref),
        )
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)  # unit-by-unit vs pairwise sums
        for x, y in zip(got[1:], want[1:], strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(dead_fast, dead_ref)
        codes.update(got[1].tolist())
        if term.any():
            batch.reset_envs(term)
            dead_fast[term] = dead_ref[term] = False
    assert len(codes) >= 2  # battles ended during the run
