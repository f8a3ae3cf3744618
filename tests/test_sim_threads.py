"""The multi-threaded engine and observation kernels give bit-identical results to the serial ones."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.fast_features import observe_kernel_parallel
from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.avail import sample_available
from marl.envs.smac.sim.engine import BatchedSimEngine
from marl.envs.smac.sim.stepper import sim_step_parallel
from marl.envs.smac.threads import resolve_threads

# marines only, Medivac healing and MMM's end rule, splash + suicide units, a ranged mix, cliffs
MAPS = ("3m", "MMM", "bane_vs_bane", "3s5z", "2c_vs_64zg")


def _play(make, n_steps: int = 60, seed: int = 0) -> list[np.ndarray]:
    """Random available actions for ``n_steps``; finished envs reset; every intermediate array recorded."""
    env = make()
    rs = np.random.default_rng(seed)
    out = []
    for _ in range(n_steps):
        actions = sample_available(env.avail(), rs.random(env.shape()))
        out.extend(env.advance(actions))
    return out


class _Engine:
    def __init__(self, name: str, threads: int) -> None:
        self.eng = BatchedSimEngine(load_map(name), 6, seed=11, threads=threads)
        self.eng.reset()

    def avail(self) -> np.ndarray:
        return self.eng.avail_actions()

    def shape(self) -> tuple[int, int]:
        return self.eng.n_envs, self.eng.n_agents

    def advance(self, actions: np.ndarray) -> list[np.ndarray]:
        self.eng.step(actions)
        done = self.eng.battle_status() != 0
        if done.any():
            self.eng.reset_envs(done)
        return [self.eng.S.copy(), self.eng.rng.copy()]


class _Env:
    def __init__(self, name: str, threads: int) -> None:
        self.env = BatchedStarCraft2Env(name, 5, seed=4, threads=threads, obs_last_action=True)
        self.env.reset()

    def avail(self) -> np.ndarray:
        return self.env.get_avail_actions().astype(bool)

    def shape(self) -> tuple[int, int]:
        return self.env.n_envs, self.env.n_agents

    def advance(self, actions: np.ndarray) -> list[np.ndarray]:
        reward, term, _ = self.env.step(actions)
        out = [reward.copy(), term.copy(), self.env.get_obs().copy(), self.env.get_state().copy()]
        if term.any():
            self.env.reset_envs(term)
        return out


@pytest.mark.parametrize("name", MAPS)
def test_parallel_engine_matches_serial_bit_for_bit(name: str) -> None:
    serial = _play(lambda: _Engine(name, 1))
    parallel = _play(lambda: _Engine(name, 2))
    assert sim_step_parallel.signatures, "threads=2 must run the parallel kernel"
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ("3m", "MMM"))
def test_parallel_env_matches_serial_bit_for_bit(name: str) -> None:
    serial = _play(lambda: _Env(name, 1), n_steps=40)
    parallel = _play(lambda: _Env(name, 2), n_steps=40)
    assert observe_kernel_parallel.signatures, "threads=2 must run the parallel observation kernel"
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a, b)


def test_masked_step_with_threads_matches_serial() -> None:
    envs = [BatchedStarCraft2Env("8m", 4, seed=2, threads=t) for t in (1, 2)]
    mask = np.array([True, False, True, True])
    outs = []
    for env in envs:
        env.reset()
        actions = np.ones((4, env.n_agents), dtype=np.int64)
        env.step(actions, mask)
        outs.append((env.get_obs().copy(), env.engine.S.copy()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("bad", (-1, 1.5, "2", True))
def test_threads_must_be_a_non_negative_int(bad: object) -> None:
    with pytest.raises(ValueError, match="threads must be an int >= 0"):
        resolve_threads(bad)  # type: ignore[arg-type]


def test_threads_zero_means_the_whole_pool() -> None:
    import numba

    assert resolve_threads(0) == numba.config.NUMBA_NUM_THREADS
    assert resolve_threads(1) == 1
    assert resolve_threads(10_000) == numba.config.NUMBA_NUM_THREADS
