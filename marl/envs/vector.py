"""Several copies of a multi-agent env stepped together: in this process or in worker processes.

Both classes answer in the same form, per env row: ``reset`` → :class:`Obs`, ``step`` → :class:`Transition`.
``SubprocVectorEnv`` puts each env in its own process (``multiprocessing``, spawn context) and is worth it
when one env step is slow compared to the pipe round trip (the real game); ``SyncVectorEnv`` steps them in
turn in this process (best for the embedded engine on a small machine).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl.envs.base import MultiAgentEnv

EnvFn = Callable[[], MultiAgentEnv]


@dataclass
class Obs:
    """What the agents see at one step of one env."""

    obs_NO: np.ndarray
    state_S: np.ndarray
    avail_NA: np.ndarray


@dataclass
class Transition:
    """The outcome of one step of one env, followed by what the agents see next."""

    reward: float
    terminated: bool
    info: dict[str, Any]
    next: Obs


def _observe(env: MultiAgentEnv) -> Obs:
    return Obs(
        np.asarray(env.get_obs(), dtype=np.float32),
        np.asarray(env.get_state(), dtype=np.float32),
        np.asarray(env.get_avail_actions(), dtype=np.int32),
    )


def _reset(env: MultiAgentEnv) -> Obs:
    env.reset()
    return _observe(env)


def _step(env: MultiAgentEnv, actions_N: np.ndarray) -> Transition:
    reward, terminated, info = env.step(actions_N)
    return Transition(float(reward), bool(terminated), dict(info), _observe(env))


class SyncVectorEnv:
    """``n_envs`` envs stepped one after another in this process."""

    def __init__(self, env_fns: Sequence[EnvFn]) -> None:
        self.envs = [fn() for fn in env_fns]
        self.n_envs = len(self.envs)

    def reset(self, rows: Sequence[int]) -> list[Obs]:
        return [_reset(self.envs[r]) for r in rows]

    def step(self, actions_BN: np.ndarray, rows: Sequence[int]) -> list[Transition]:
        return [_step(self.envs[r], a) for r, a in zip(rows, actions_BN, strict=True)]

    def get_stats(self) -> list[dict[str, Any]]:
        return [env.get_stats() for env in self.envs]

    def call(self, row: int, method: str, *args: Any) -> Any:
        """Call ``method`` on env ``row`` (e.g. ``save_replay``)."""
        return getattr(self.envs[row], method)(*args)

    def rng_states(self) -> list[Any] | None:
        """Every env's random-stream state (exact resume), or None if an env cannot tell it."""
        if not all(hasattr(env, "get_rng_state") for env in self.envs):
            return None
        states = [env.get_rng_state() for env in self.envs]
        return None if any(s is None for s in states) else states

    def set_rng_states(self, states: Sequence[Any]) -> None:
        """Restore :meth:`rng_states`."""
        for env, state in zip(self.envs, states, strict=True):
            env.set_rng_state(state)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _worker(conn: Any, env_fn: EnvFn) -> None:
    env = env_fn()
    try:
        while True:
            cmd, arg = conn.recv()
            if cmd == "reset":
                conn.send(_reset(env))
            elif cmd == "step":
                conn.send(_step(env, arg))
            elif cmd == "call":
                method, args = arg
                conn.send(getattr(env, method)(*args))
            elif cmd == "close":
                break
    except EOFError:
        pass
    finally:
        env.close()
        conn.close()


class SubprocVectorEnv:
    """``n_envs`` envs, each in a worker process; requests to all rows go out before any answer is read."""

    def __init__(self, env_fns: Sequence[EnvFn]) -> None:
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for fn in env_fns:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, fn), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        self.n_envs = len(self.conns)

    def _ask(self, rows: Sequence[int], cmd: str, args: Sequence[Any]) -> list[Any]:
        for r, a in zip(rows, args, strict=True):
            self.conns[r].send((cmd, a))
        return [self.conns[r].recv() for r in rows]

    def reset(self, rows: Sequence[int]) -> list[Obs]:
        return self._ask(rows, "reset", [None] * len(rows))

    def step(self, actions_BN: np.ndarray, rows: Sequence[int]) -> list[Transition]:
        return self._ask(rows, "step", list(actions_BN))

    def get_stats(self) -> list[dict[str, Any]]:
        rows = range(self.n_envs)
        return self._ask(rows, "call", [("get_stats", ())] * self.n_envs)

    def call(self, row: int, method: str, *args: Any) -> Any:
        return self._ask([row], "call", [(method, args)])[0]

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
