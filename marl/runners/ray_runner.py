"""The Ray runner (``runner.name=ray``): env workers are Ray actors, on this machine or across a cluster.

It is the local :class:`~marl.runners.episode_runner.ParallelRunner` (same step loop, same
:class:`EpisodeBatch`, same env seeds per row, so the same episodes under the same seeds) with its envs in
a :class:`~marl.envs.ray_vector.RayVectorEnv`. Where Ray runs comes from ``ray.address``: empty = the
cluster in ``$RAY_ADDRESS`` if set, else a local Ray started in this process (and stopped by
:meth:`RayRunner.close`); ``auto`` = the cluster this machine joined with ``ray start``; ``ray://host:port``
= a remote cluster through Ray Client. Every node needs this package installed (same Python, ``pip
install -e .``).

Worker failure: Ray restarts the dead actor (``ray.max_restarts``); :meth:`RayRunner.run` waits until it
is back and plays the batch of episodes in progress again from reset (``ray.max_episode_retries`` times
at most; an actor dead for good is an error at once). Episodes
already returned, and so already in the replay buffer of the driver, are never touched.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from marl.buffers import EpisodeBatch, Scheme
from marl.config.schema import Config, RayConfig
from marl.envs.base import MultiAgentEnv
from marl.envs.ray_vector import RayVectorEnv, WorkerFailure
from marl.registry import register
from marl.runners.episode_runner import Controller, ParallelRunner, RolloutStats, _Bound, runner_size

INSTALL_HINT = "pip install 'ray[client]>=2.40,<3'"


def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(f"runner.name=ray and scripts/sweep.py need Ray: {INSTALL_HINT}") from err
    return ray


START_TRIES = 2  # a local Ray whose node times out at start (Ray's fixed 30 s wait) is started again once


class RayStartError(RuntimeError):
    """A local Ray whose node did not come up in :data:`START_TRIES` tries."""


def connect(address: str = "", num_cpus: int | None = None) -> bool:
    """Make sure Ray is initialised; returns True when this call started it (the caller then shuts it down).

    ``address``: ``""`` ($RAY_ADDRESS, else a new local Ray with ``num_cpus`` CPUs, no dashboard), ``local``,
    ``auto``, ``host:port`` or ``ray://host:port``. A Ray already initialised in this process is reused.
    """
    ray = _ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS", "") or "local"
    kwargs: dict[str, Any] = {"logging_level": "WARNING", "configure_logging": True}
    if address == "local":
        kwargs.update(num_cpus=num_cpus, include_dashboard=False)
    elif num_cpus is not None:
        raise ValueError(f"num_cpus is set by the cluster, not by a driver joining it (address={address!r})")
    for attempt in range(1, START_TRIES + 1):
        try:
            ray.init(address=address, **kwargs)
            return True
        except ConnectionError as err:
            raise ConnectionError(
                f"cannot reach a Ray cluster at ray.address={address!r} ({err}); start one with "
                "`ray start --head`, or leave ray.address empty for a local Ray in this process"
            ) from err
        except Exception as err:  # Ray raises a bare Exception when its local node does not come up
            if address != "local" or "timed out during startup" not in str(err):
                raise
            ray.shutdown()  # the processes of the half-started node
            print(f"[ray] a local Ray did not start in time (try {attempt} of {START_TRIES}): {err}")
            failed = err
    raise RayStartError(
        f"a local Ray did not start in {START_TRIES} tries: Ray waits 30 s for its node, which a machine "
        "busy with other work can exceed. Nothing has run: run the same command again, or start Ray once "
        "with `ray start --head` and pass its address"
    ) from failed


class RayRunner(ParallelRunner):
    """:class:`ParallelRunner` over Ray env actors, replaying a batch after a worker failure."""

    def __init__(
        self,
        env_fns: list[Callable[[], MultiAgentEnv]],
        scheme: Scheme,
        controller: Controller,
        ray_cfg: RayConfig | None = None,
    ) -> None:
        cfg = ray_cfg or RayConfig()
        if cfg.max_episode_retries < 0:
            raise ValueError(f"ray.max_episode_retries must be >= 0, got {cfg.max_episode_retries}")
        self.max_episode_retries = cfg.max_episode_retries
        self.owns_ray = connect(cfg.address)
        try:
            venv = RayVectorEnv(env_fns, cfg.num_workers, cfg.worker_cpus, cfg.max_restarts)
        except BaseException:
            self._shutdown()
            raise
        super().__init__(env_fns, scheme, controller, venv=venv)
        self.replayed_batches = 0  # batches played again after a worker failure

    def run(self, t_env: int, test_mode: bool = False) -> tuple[EpisodeBatch, RolloutStats]:
        """Play one episode in every env, as :meth:`ParallelRunner.run`; a worker failure replays the batch.

        The whole batch is played again (envs step in lockstep, so this costs the same wall time as
        replaying only the lost episodes, and the surviving workers' partial episodes are not reused).
        """
        for attempt in range(self.max_episode_retries + 1):
            try:
                return super().run(t_env, test_mode)
            except WorkerFailure as err:
                if attempt == self.max_episode_retries:
                    raise RuntimeError(
                        f"{err}; gave up after {attempt} replays (raise ray.max_episode_retries or "
                        "ray.max_restarts, or look at the worker's log under /tmp/ray/session_latest/logs)"
                    ) from err
                print(
                    f"[ray] {err}; waiting for Ray to restart it, then replaying the batch "
                    f"({attempt + 1}/{self.max_episode_retries})",
                    file=sys.stderr,
                )
                self.venv.wait_alive(err.worker)
                self.replayed_batches += 1
        raise AssertionError("unreachable")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self.owns_ray:
            _ray().shutdown()
            self.owns_ray = False


@register("runner", "ray")
def make_ray_runner(
    env_fn: Callable[[int], MultiAgentEnv],
    scheme: Scheme,
    controller: Controller,
    cfg: Config | None = None,
    batch_size_run: int | None = None,
    subprocess: bool | None = None,
    ray_cfg: RayConfig | None = None,
) -> RayRunner:
    """``runner.batch_size_run`` envs in Ray actors; ``env_fn(i)`` builds env ``i`` (seeded as locally).

    ``ray_cfg`` defaults to ``cfg.ray``; ``subprocess`` is ignored (actors are processes already).
    """
    n, _ = runner_size(cfg, batch_size_run, subprocess)
    ray_cfg = ray_cfg if ray_cfg is not None else (cfg.ray if cfg is not None else None)
    return RayRunner([_Bound(env_fn, i) for i in range(n)], scheme, controller, ray_cfg)
