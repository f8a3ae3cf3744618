"""Scheme and padded episode batches (NumPy only).

A :class:`Scheme` is built from :class:`~marl.envs.base.EnvInfo` alone. An :class:`EpisodeBatch`
holds ``B`` episodes padded to ``T = episode_limit + 1`` time slots, so every learner call sees the
same shapes and the compiled train step is reused.

Time convention (pymarl's): slot ``t`` holds what the agents saw at step ``t`` (obs, state, avail)
and what followed it (actions, reward, terminated). An episode of ``L`` steps fills slots ``0..L``
(``filled = 1``); slot ``L`` holds only the final obs/state/avail. The learner therefore uses
``filled[:, :-1]`` and zeroes the steps after a ``terminated`` one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marl.envs.base import EnvInfo


@dataclass(frozen=True)
class Field:
    """One stored quantity: per-slot shape (without B, T) and dtype."""

    shape: tuple[int, ...]
    dtype: type


class Scheme:
    """Field layout of an episode, sized only from ``EnvInfo``."""

    def __init__(self, info: EnvInfo) -> None:
        n, a = info.n_agents, info.n_actions
        act_shape, act_dtype = ((n, 1), np.int64) if info.discrete else ((n, a), np.float32)
        self.info = info
        self.max_seq_length = info.episode_limit + 1
        self.fields: dict[str, Field] = {
            "obs": Field((n, info.obs_shape), np.float32),
            "state": Field((info.state_shape,), np.float32),
            "avail_actions": Field((n, a), np.int32),
            "actions": Field(act_shape, act_dtype),
            "reward": Field((1,), np.float32),
            "terminated": Field((1,), np.float32),
            "filled": Field((1,), np.float32),
        }
        if info.discrete:
            self.fields["actions_onehot"] = Field((n, a), np.float32)

    def bytes_per_episode(self) -> int:
        """Memory of one padded episode."""
        t = self.max_seq_length
        return sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize * t for f in self.fields.values())


class EpisodeBatch:
    """``B`` padded episodes: ``data[name]`` has shape ``(B, T) + field.shape``."""

    def __init__(self, scheme: Scheme, batch_size: int, data: dict[str, np.ndarray] | None = None) -> None:
        self.scheme = scheme
        self.batch_size = batch_size
        self.max_seq_length = scheme.max_seq_length
        if data is None:
            data = {
                k: np.zeros((batch_size, self.max_seq_length) + f.shape, dtype=f.dtype)
                for k, f in scheme.fields.items()
            }
        self.data = data

    def __getitem__(self, key: str) -> np.ndarray:
        return self.data[key]

    def update(self, values: dict[str, np.ndarray], t: int, rows: np.ndarray | slice = slice(None)) -> None:
        """Write per-slot values at time ``t`` for episodes ``rows``; marks the slot filled.

        ``actions_onehot`` is derived from ``actions`` for discrete action spaces.
        """
        for k, v in values.items():
            if k not in self.data:
                raise KeyError(f"unknown episode field {k!r}; fields: {sorted(self.data)}")
            f = self.scheme.fields[k]
            self.data[k][rows, t] = np.asarray(v, dtype=f.dtype).reshape((-1,) + f.shape)
        if "actions" in values and "actions_onehot" in self.data:
            act = self.data["actions"][rows, t, :, 0]
            n_act = self.scheme.info.n_actions
            self.data["actions_onehot"][rows, t] = np.eye(n_act, dtype=np.float32)[act]
        self.data["filled"][rows, t] = 1.0

    @classmethod
    def concat(cls, batches: list[EpisodeBatch]) -> EpisodeBatch:
        """One batch holding the episodes of ``batches`` (same scheme) in order."""
        data = {k: np.concatenate([b.data[k] for b in batches]) for k in batches[0].data}
        return cls(batches[0].scheme, sum(b.batch_size for b in batches), data)

    def select(self, idx: np.ndarray) -> EpisodeBatch:
        """A new batch with the episodes ``idx`` (copies)."""
        return EpisodeBatch(self.scheme, len(idx), {k: v[idx] for k, v in self.data.items()})

    def episode_lengths(self) -> np.ndarray:
        """Steps per episode (filled slots minus the final observation slot)."""
        return self.data["filled"][:, :, 0].sum(1).astype(np.int64) - 1

    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.data.values())


def check_slots(batch: EpisodeBatch, t_slots: int) -> tuple[int, int]:
    """(episodes, slots) of ``batch``, whose episodes a learner compiled for ``t_slots`` (episode_limit + 1)
    needs padded to exactly that many slots; a ``ValueError`` says so otherwise."""
    b, t = batch["filled"].shape[:2]
    if t != t_slots:
        raise ValueError(
            f"batch has {t} time slots; this learner is compiled for episode_limit + 1 = "
            f"{t_slots} (pad episodes with EpisodeBatch, do not truncate)"
        )
    return b, t
