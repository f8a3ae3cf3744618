"""The env factory the trainer hands to runners: ``env_fn(row)`` builds env ``row`` of the configured kind.

One seed formula for every env of a run (:meth:`EnvFactory.row_seed`): row ``r`` gets
``seed * 10_000 + offset + r``, distinct per row, per run seed, and per resume (``offset``).
"""

from __future__ import annotations

from typing import Any

from marl import registry
from marl.config import Config
from marl.envs.base import EnvInfo, MultiAgentEnv


class EnvFactory:
    """Picklable ``env_fn(row)``: builds env ``row`` seeded :meth:`row_seed` (``row``)."""

    def __init__(self, name: str, map_name: str, backend: str, args: dict[str, Any], seed: int, offset: int):
        self.name, self.map_name, self.backend, self.args = name, map_name, backend, args
        self.seed, self.offset = seed, offset

    def row_seed(self, row: int) -> int:
        """The seed of env ``row`` (the one formula; a batched engine seeds row ``r`` ``row_seed(0) + r``)."""
        return self.seed * 10_000 + self.offset + row

    def batched(self, n_envs: int) -> Any:
        """The env's own batched fast path for rows ``0 .. n_envs - 1`` (one env stepping them all, the same
        episodes as ``[self(r) for r in range(n_envs)]``), if the env registers one under
        ``("batched_env", name)`` and it applies to this config; else None (the runner steps ``n_envs`` envs).
        It has ``SyncVectorEnv``'s interface (``reset``, ``step``, ``get_stats``, ``call``, ``close``)."""
        if self.name not in registry.names("batched_env"):
            return None
        return registry.build(
            "batched_env",
            self.name,
            map_name=self.map_name,
            backend=self.backend,
            n_envs=n_envs,
            seed=self.row_seed(0),
            **self.args,
        )

    def __call__(self, row: int) -> MultiAgentEnv:
        return registry.build(
            "env",
            self.name,
            map_name=self.map_name,
            backend=self.backend,
            seed=self.row_seed(row),
            **self.args,
        )


def make_env_fn(cfg: Config, seed_offset: int = 0) -> EnvFactory:
    """The :class:`EnvFactory` of ``cfg``'s environment."""
    return EnvFactory(
        cfg.env.name, cfg.env.map_name, cfg.env.backend, dict(cfg.env.args), cfg.seed, seed_offset
    )


def probe_env(cfg: Config) -> tuple[EnvInfo, dict[str, Any]]:
    """Build one env, read its :class:`EnvInfo` and its engine record (``engine_info()``: version and
    resolved backend; empty for envs without a versioned engine), close it."""
    env = make_env_fn(cfg)(0)
    try:
        engine = env.engine_info() if hasattr(env, "engine_info") else {}
        return env.env_info(), dict(engine)
    finally:
        env.close()


def probe_env_info(cfg: Config) -> EnvInfo:
    """Build one env, read its :class:`EnvInfo`, close it."""
    return probe_env(cfg)[0]
