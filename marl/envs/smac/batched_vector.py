"""``BatchedSmacVectorEnv``: a :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env` behind the runner's
vector-env interface (``marl/envs/vector.py``): per-row reset and step, masked engine steps for the rows not
stepped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.vector import Obs, Transition

# StarCraft2Env keywords that change nothing on the embedded engine (replays, the real game's AI level).
SIM_IGNORED = ("replay_dir", "replay_prefix", "difficulty", "step_mul")


class BatchedSmacVectorEnv:
    """The runner's vector-env interface (``reset``/``step`` per row, see ``marl/envs/vector.py``) over one
    :class:`BatchedStarCraft2Env`; row ``r`` equals ``StarCraft2Env(map, backend="sim", seed=seed + r)``.

    Rows not passed to :meth:`step` are not stepped (a masked engine step: no work, no randomness used).
    """

    def __init__(self, map_name: str, n_envs: int, seed: int | None = None, **smac_flags: Any) -> None:
        for k in SIM_IGNORED:
            smac_flags.pop(k, None)
        self.env = self._make(map_name, n_envs, seed, **smac_flags)
        self.n_envs = self.env.n_envs

    def _make(self, map_name: str, n_envs: int, seed: int | None, **smac_flags: Any) -> BatchedStarCraft2Env:
        """The batched env behind the rows."""
        return BatchedStarCraft2Env(map_name, n_envs, seed, **smac_flags)

    def _mask(self, rows: Sequence[int]) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.n_envs):
            raise ValueError(f"rows must lie in [0, {self.n_envs}), got {rows.tolist()}")
        mask = np.zeros(self.n_envs, dtype=bool)
        mask[rows] = True
        if mask.sum() != len(rows):
            raise ValueError(f"rows must be distinct, got {rows.tolist()}")
        return mask

    def _observe(self, rows: np.ndarray) -> list[Obs]:
        env = self.env
        obs, state = env.get_obs()[rows], env.get_state()[rows]
        avail = env.get_avail_actions()[rows].astype(np.int32)
        return [Obs(obs[k], state[k], avail[k]) for k in range(len(rows))]

    def reset(self, rows: Sequence[int]) -> list[Obs]:
        """Start a new episode in ``rows``; their observations."""
        mask = self._mask(rows)
        self.env.reset_envs(mask)
        return self._observe(np.asarray(rows, dtype=np.int64).reshape(-1))

    def step(self, actions_BN: np.ndarray, rows: Sequence[int]) -> list[Transition]:
        """Step ``rows`` with ``actions_BN[k]`` for row ``rows[k]``; one :class:`Transition` per row."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        mask = self._mask(rows)
        actions = np.asarray(actions_BN)
        if actions.shape != (len(rows), self.env.n_agents):
            raise ValueError(
                f"actions must have shape ({len(rows)}, {self.env.n_agents}) for rows "
                f"{rows.tolist()}, got {actions.shape}"
            )
        full = np.zeros((self.n_envs, self.env.n_agents), dtype=actions.dtype)
        full[rows] = actions
        reward, term, info = self.env.step(full, mask)
        nxt = self._observe(rows)
        won, da, de, lim = (
            info[k][rows].tolist() for k in ("battle_won", "dead_allies", "dead_enemies", "episode_limit")
        )
        out = []
        for k, r in enumerate(rows):
            i = {"battle_won": won[k], "dead_allies": da[k], "dead_enemies": de[k]}
            if lim[k]:  # as StarCraft2Env: the key is there only on a continuing-episode timeout
                i["episode_limit"] = True
            out.append(Transition(float(reward[r]), bool(term[r]), i, nxt[k]))
        return out

    def rng_states(self) -> list[int]:
        """Every row's engine random-stream state (for exact resume)."""
        return [int(x) for x in self.env.engine.rng]

    def set_rng_states(self, states: Sequence[int]) -> None:
        """Restore :meth:`rng_states`."""
        self.env.engine.rng[:] = np.asarray(states, dtype=np.uint64)

    def get_stats(self) -> list[dict[str, Any]]:
        """``get_stats()`` of every row."""
        return [self.env.env_stats(e) for e in range(self.n_envs)]

    def call(self, row: int, method: str, *args: Any) -> Any:
        """``get_stats``/``get_env_info`` of one row; other methods need real envs (SyncVectorEnv)."""
        if method == "get_stats":
            return self.env.env_stats(row)
        if method == "get_env_info":
            return self.env.get_env_info()
        raise NotImplementedError(
            f"BatchedSmacVectorEnv.call supports 'get_stats' and 'get_env_info', "
            f"not {method!r}; use StarCraft2Env envs (SyncVectorEnv) for it"
        )

    def close(self) -> None:
        self.env.close()
