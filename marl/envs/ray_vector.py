"""Env copies held by Ray actors, answering like :class:`~marl.envs.vector.SyncVectorEnv`.

``RayVectorEnv`` splits ``n_envs`` env rows into ``n_workers`` contiguous slices; each slice lives in one
Ray actor (a :class:`~marl.envs.vector.SyncVectorEnv` inside it), so one actor can hold one env or a batch
of the embedded engine. Requests to every actor go out before any answer is read. Env row ``r`` is always
built by the same ``env_fns[r]`` as in the local runners, so the same seeds give the same episodes.

Worker failure: actors are created with ``max_restarts`` so Ray starts a dead one again (its ``__init__``
rebuilds its envs from the same factories). An actor that restarted has lost its episodes in progress; a
step sent to it, or to a dead one, raises :class:`WorkerFailure` naming the worker, and the caller (the Ray
runner) plays those episodes again from ``reset``. Ray is imported only when this class is built.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from marl.envs.vector import EnvFn, Obs, SyncVectorEnv, Transition


class WorkerFailure(RuntimeError):
    """A Ray env worker died or restarted; the episodes of ``rows`` in progress are lost."""

    def __init__(self, worker: int, rows: Sequence[int], cause: BaseException) -> None:
        lines = [ln for ln in str(cause).strip().splitlines() if ln.strip()] or [""]
        name = type(cause).__name__.replace("RayTaskError(", "").rstrip(")")
        super().__init__(f"Ray env worker {worker} (env rows {list(rows)}) failed: {name}: {lines[-1]}")
        self.worker, self.rows, self.cause = worker, list(rows), cause

    def __reduce__(self) -> tuple[type, tuple[int, list[int], BaseException]]:
        return type(self), (self.worker, self.rows, self.cause)


class EpisodeLost(RuntimeError):
    """Raised inside a worker asked to step an env that was not reset since the worker (re)started."""


class EnvWorker:
    """The body of one Ray env actor: a slice of env rows stepped in turn (rows are local indices)."""

    def __init__(self, env_fns: Sequence[EnvFn]) -> None:
        self.venv = SyncVectorEnv(env_fns)
        self.ready = np.zeros(self.venv.n_envs, dtype=bool)  # reset since this process started

    def pid(self) -> int:
        return os.getpid()

    def reset(self, rows: Sequence[int]) -> list[Obs]:
        out = self.venv.reset(rows)
        self.ready[list(rows)] = True
        return out

    def step(self, actions_BN: np.ndarray, rows: Sequence[int]) -> list[Transition]:
        lost = [r for r in rows if not self.ready[r]]
        if lost:
            raise EpisodeLost(f"local env rows {lost} were not reset since this worker (re)started")
        return self.venv.step(actions_BN, rows)

    def get_stats(self) -> list[dict[str, Any]]:
        return self.venv.get_stats()

    def call(self, row: int, method: str, args: tuple[Any, ...]) -> Any:
        return self.venv.call(row, method, *args)

    def close(self) -> None:
        self.venv.close()


def split_rows(n_envs: int, n_workers: int) -> list[range]:
    """Contiguous, near-equal slices of ``range(n_envs)``, one per worker (the first ones one longer)."""
    if n_envs < 1:
        raise ValueError(f"need at least one env, got n_envs={n_envs}")
    if not 1 <= n_workers <= n_envs:
        raise ValueError(f"ray.num_workers must be in [1, {n_envs}] (0 = one per env), got {n_workers}")
    base, extra = divmod(n_envs, n_workers)
    out, start = [], 0
    for w in range(n_workers):
        size = base + (1 if w < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


class RayVectorEnv:
    """``n_envs`` envs spread over ``n_workers`` Ray actors (``ray.init`` must have been called)."""

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        n_workers: int = 0,
        worker_cpus: float = 0.0,
        max_restarts: int = 3,
    ) -> None:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("RayVectorEnv needs a running Ray (see ray_runner.connect)")
        if worker_cpus < 0 or max_restarts < -1:
            raise ValueError(
                f"ray.worker_cpus must be >= 0 and ray.max_restarts >= -1 (-1 = forever), got "
                f"{worker_cpus}, {max_restarts}"
            )
        self._ray = ray
        self.n_envs = len(env_fns)
        self.slices = split_rows(self.n_envs, n_workers or self.n_envs)
        self.n_workers = len(self.slices)
        self.owner = np.concatenate([np.full(len(s), w) for w, s in enumerate(self.slices)])
        self.local = np.concatenate([np.arange(len(s)) for s in self.slices])
        actor_cls = ray.remote(EnvWorker).options(num_cpus=worker_cpus, max_restarts=max_restarts)
        self.actors = [actor_cls.remote([env_fns[r] for r in s]) for s in self.slices]
        self.failures = 0  # worker failures seen so far

    # -- fan out / gather ------------------------------------------------------------------------
    def _ask(self, rows: Sequence[int], call: Callable[[Any, list[int], list[int]], Any]) -> list[Any]:
        """``call(actor, local_rows, positions)`` per worker; answers put back in ``rows`` order."""
        rows = np.asarray(rows, dtype=np.int64)
        pending = []
        for w in np.unique(self.owner[rows]):
            pos = np.flatnonzero(self.owner[rows] == w)
            pending.append((int(w), pos, call(self.actors[w], self.local[rows[pos]].tolist(), pos)))
        out: list[Any] = [None] * len(rows)
        failure: WorkerFailure | None = None
        for w, pos, ref in pending:  # read every answer, so no reply is left behind for the next call
            try:
                for p, item in zip(pos, self._ray.get(ref), strict=True):
                    out[p] = item
            except (self._ray.exceptions.RayActorError, EpisodeLost) as err:
                failure = failure or WorkerFailure(w, list(self.slices[w]), err)
        if failure is not None:
            self.failures += 1
            raise failure
        return out

    def reset(self, rows: Sequence[int]) -> list[Obs]:
        return self._ask(rows, lambda actor, local, pos: actor.reset.remote(local))

    def step(self, actions_BN: np.ndarray, rows: Sequence[int]) -> list[Transition]:
        actions_BN = np.asarray(actions_BN)
        return self._ask(rows, lambda actor, local, pos: actor.step.remote(actions_BN[pos], local))

    def get_stats(self) -> list[dict[str, Any]]:
        refs = [a.get_stats.remote() for a in self.actors]
        return [s for ref in refs for s in self._ray.get(ref)]

    def call(self, row: int, method: str, *args: Any) -> Any:
        """Call ``method`` on env ``row`` inside its worker (e.g. ``save_replay``)."""
        w = int(self.owner[row])
        return self._ray.get(self.actors[w].call.remote(int(self.local[row]), method, args))

    def wait_alive(self, worker: int, timeout: float = 120.0) -> int:
        """Block until Ray has restarted ``worker`` (returns its pid); fails if it is dead for good."""
        ray = self._ray
        deadline = time.monotonic() + timeout
        while True:
            try:
                left = max(1.0, deadline - time.monotonic())
                return ray.get(self.actors[worker].pid.remote(), timeout=left)
            except ray.exceptions.ActorDiedError as err:
                raise RuntimeError(
                    f"Ray env worker {worker} is dead for good (ray.max_restarts used up, or its envs fail "
                    f"to build): {str(err).strip().splitlines()[0]}"
                ) from err
            except (ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError) as err:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Ray env worker {worker} did not come back in {timeout:g} s") from err
                time.sleep(0.2)

    def pids(self) -> list[int]:
        """Process id of every worker (changes when Ray restarts one)."""
        return self._ray.get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        """Close the envs and end the actors (for good: no restart)."""
        ray = self._ray
        refs = [a.close.remote() for a in self.actors]
        try:
            ray.get(refs, timeout=30)
        except (ray.exceptions.RayError, TimeoutError):
            pass
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
