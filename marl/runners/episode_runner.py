"""Runners: play whole episodes in ``batch_size_run`` envs at once and fill an :class:`EpisodeBatch`.

One class serves both registry names: ``episode`` (one env) and ``parallel`` (several, stepped in this
process or, with ``subprocess=True``, in worker processes). Envs that finish early drop out of the
step loop; the controller keeps hidden state and last actions per env row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from marl.buffers import EpisodeBatch, Scheme
from marl.config.schema import Config
from marl.envs.base import MultiAgentEnv
from marl.envs.factory import EnvFactory
from marl.envs.vector import Obs, SubprocVectorEnv, SyncVectorEnv
from marl.registry import register


class Controller(Protocol):
    """What a runner needs from a multi-agent controller."""

    def init_hidden(self, batch_size: int) -> None: ...

    def select_actions(
        self,
        obs_BNO: np.ndarray,
        avail_BNA: np.ndarray,
        t_env: int,
        test_mode: bool,
        rows: np.ndarray | None = None,
    ) -> np.ndarray: ...


@dataclass
class RolloutStats:
    """Per-episode results of one :meth:`ParallelRunner.run` call."""

    returns: list[float] = field(default_factory=list)
    won: list[bool] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    dead_allies: list[int] = field(default_factory=list)
    dead_enemies: list[int] = field(default_factory=list)

    def extend(self, other: RolloutStats) -> None:
        for k in self.__dataclass_fields__:
            getattr(self, k).extend(getattr(other, k))

    def summary(self, prefix: str = "") -> dict[str, float]:
        """Means of the episode results (``return_mean``, ``win_rate``, ``ep_length_mean``, ...)."""
        if not self.returns:
            return {}
        return {
            f"{prefix}return_mean": float(np.mean(self.returns)),
            f"{prefix}return_std": float(np.std(self.returns)),
            f"{prefix}win_rate": float(np.mean(self.won)),
            f"{prefix}ep_length_mean": float(np.mean(self.lengths)),
            f"{prefix}dead_allies_mean": float(np.mean(self.dead_allies)),
            f"{prefix}dead_enemies_mean": float(np.mean(self.dead_enemies)),
        }


class ParallelRunner:
    """Collect ``n_envs`` episodes per :meth:`run`, one env step per controller call for all running envs."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], MultiAgentEnv]],
        scheme: Scheme,
        controller: Controller,
        subprocess: bool = False,
        venv: Any = None,
    ) -> None:
        self.n_envs = len(env_fns)
        self.scheme = scheme
        self.controller = controller
        self.episode_limit = scheme.info.episode_limit
        if venv is None:  # else a ready-made vector env over the same env_fns (e.g. Ray actors)
            venv = SubprocVectorEnv(env_fns) if subprocess and self.n_envs > 1 else SyncVectorEnv(env_fns)
        self.venv = venv

    @staticmethod
    def _pre(obs: Sequence[Obs]) -> dict[str, np.ndarray]:
        return {
            "obs": np.stack([o.obs_NO for o in obs]),
            "state": np.stack([o.state_S for o in obs]),
            "avail_actions": np.stack([o.avail_NA for o in obs]),
        }

    def run(self, t_env: int, test_mode: bool = False) -> tuple[EpisodeBatch, RolloutStats]:
        """Play one episode in every env; returns the padded batch and per-episode results.

        ``t_env`` is the number of env steps before this call (for ε annealing). A step that ends an
        episode by the time limit (``info["episode_limit"]`` or reaching ``episode_limit`` without the env
        saying so) is stored as not terminated, so the learner bootstraps from the last state.
        """
        batch = EpisodeBatch(self.scheme, self.n_envs)
        rows = np.arange(self.n_envs)
        pre = self._pre(self.venv.reset(rows))
        self.controller.init_hidden(self.n_envs)
        ep_return = np.zeros(self.n_envs)
        stats = RolloutStats()
        t = 0
        batch.update(pre, t, rows)
        while len(rows):
            actions_BN = self.controller.select_actions(
                pre["obs"], pre["avail_actions"], t_env, test_mode, rows=rows
            )
            outs = self.venv.step(actions_BN, rows)
            reward = np.array([o.reward for o in outs], dtype=np.float32)
            done = np.array([o.terminated for o in outs])
            cut = t + 1 >= self.episode_limit
            timeout = np.array([o.info.get("episode_limit", False) for o in outs]) | (cut & ~done)
            done |= cut
            batch.update(
                {
                    "actions": actions_BN.reshape((len(rows),) + self.scheme.fields["actions"].shape),
                    "reward": reward.reshape(-1, 1),
                    "terminated": (done & ~timeout).astype(np.float32).reshape(-1, 1),
                },
                t,
                rows,
            )
            ep_return[rows] += reward
            t += 1
            # The observation after the last step goes to slot t for every env stepped, finished or not.
            pre = self._pre([o.next for o in outs])
            batch.update(pre, t, rows)
            for k, o in enumerate(outs):
                if done[k]:
                    stats.returns.append(float(ep_return[rows[k]]))
                    stats.won.append(bool(o.info.get("battle_won", False)))
                    stats.lengths.append(t)
                    stats.dead_allies.append(int(o.info.get("dead_allies", 0)))
                    stats.dead_enemies.append(int(o.info.get("dead_enemies", 0)))
            keep = ~done
            rows = rows[keep]
            pre = {k: v[keep] for k, v in pre.items()}
        return batch, stats

    def env_stats(self) -> list[dict[str, Any]]:
        """``get_stats()`` of every env."""
        return self.venv.get_stats()

    def call(self, row: int, method: str, *args: Any) -> Any:
        """Call a method on one env (e.g. ``save_replay``)."""
        return self.venv.call(row, method, *args)

    def close(self) -> None:
        self.venv.close()


def runner_size(cfg: Config | None, batch_size_run: int | None, subprocess: bool | None) -> tuple[int, bool]:
    """Env count and process mode: explicit arguments win, else ``cfg.runner``, else 8 in-process envs."""
    n = batch_size_run if batch_size_run is not None else (cfg.runner.batch_size_run if cfg else 8)
    sub = subprocess if subprocess is not None else (cfg.runner.subprocess if cfg else False)
    if n < 1:
        raise ValueError(f"runner.batch_size_run must be >= 1, got {n}")
    return int(n), bool(sub)


@register("runner", "parallel")
def make_parallel_runner(
    env_fn: Callable[[int], MultiAgentEnv],
    scheme: Scheme,
    controller: Controller,
    cfg: Config | None = None,
    batch_size_run: int | None = None,
    subprocess: bool | None = None,
    batched: bool = True,
) -> ParallelRunner:
    """``runner.batch_size_run`` envs; ``env_fn(i)`` builds env ``i`` (seeded per row).

    When ``env_fn`` is the trainer's :class:`~marl.envs.factory.EnvFactory` and its env has a batched fast
    path (:meth:`~marl.envs.factory.EnvFactory.batched`; SMAC maps on the embedded engine), the rows are
    stepped as one batched env (same episodes as per-row envs) unless ``batched=False`` (per-env replays)
    or ``subprocess``.
    """
    n, sub = runner_size(cfg, batch_size_run, subprocess)
    venv = None
    if batched and not sub and isinstance(env_fn, EnvFactory):
        venv = env_fn.batched(n)
    fns = [_Bound(env_fn, i) for i in range(n)]
    return ParallelRunner(fns, scheme, controller, subprocess=sub, venv=venv)


@register("runner", "episode")
def make_episode_runner(
    env_fn: Callable[[int], MultiAgentEnv],
    scheme: Scheme,
    controller: Controller,
    cfg: Config | None = None,
    batch_size_run: int | None = None,
    subprocess: bool | None = None,
) -> ParallelRunner:
    """One env, stepped in this process (``cfg.runner.batch_size_run`` is not used)."""
    if batch_size_run not in (None, 1):
        raise ValueError(
            f"runner 'episode' steps one env; got batch_size_run={batch_size_run} (use 'parallel')"
        )
    return ParallelRunner([_Bound(env_fn, 0)], scheme, controller, subprocess=False)


@dataclass(frozen=True)
class _Bound:
    """``env_fn`` with its row index bound (picklable, for worker processes)."""

    env_fn: Callable[[int], MultiAgentEnv]
    index: int

    def __call__(self) -> MultiAgentEnv:
        return self.env_fn(self.index)
