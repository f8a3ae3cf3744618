"""The value-based learners' batch -> input arrays of one whole-episode train step (checked against EnvInfo).

One place turns an :class:`~marl.buffers.episode.EpisodeBatch` into the seven arrays the Q-learner's graph
takes (agent inputs, available actions, actions, rewards, terminations, transition mask, states), cut to the
first ``t`` slots and to the episodes ``rows`` before anything is copied, so padding beyond ``t`` is never
converted. :class:`~marl.learners.q_learner.QLearner` and its subclasses call it through ``_arrays``.
"""

from __future__ import annotations

import numpy as np

from marl.buffers.episode import EpisodeBatch, check_slots
from marl.config.schema import AgentConfig
from marl.controllers.mac import build_agent_inputs, input_dim
from marl.envs.base import EnvInfo
from marl.learners.host_buffers import HostBuffers, agent_inputs_into, copy_rows
from marl.learners.targets import transition_mask


def check_batch(batch: EpisodeBatch, info: EnvInfo, t_slots: int) -> tuple[int, int]:
    """(episodes, slots) of ``batch`` after checking every array's shape against ``info`` and the learner's
    compiled ``t_slots`` (episode_limit + 1); a ``ValueError`` names the array and the shape expected."""
    b, t_all = check_slots(batch, t_slots)
    want = {
        "obs": (info.n_agents, info.obs_shape),
        "state": (info.state_shape,),
        "avail_actions": (info.n_agents, info.n_actions),
        "actions": (info.n_agents, 1),
        "actions_onehot": (info.n_agents, info.n_actions),
    }
    for key, shape in want.items():
        if batch[key].shape != (b, t_all) + shape:
            expected = (b, t_all) + shape
            raise ValueError(f"batch[{key!r}] has shape {batch[key].shape}, expected {expected}")
    return b, t_all


def q_step_arrays(
    batch: EpisodeBatch,
    info: EnvInfo,
    agent: AgentConfig,
    t_slots: int,
    t: int | None = None,
    rows: np.ndarray | None = None,
    host: HostBuffers | None = None,
    part: int | None = None,
    rows_inputs: bool = False,
) -> list[np.ndarray]:
    """The step's input arrays of the episodes ``rows`` (None = all) over the first ``t`` slots (None = all).

    With ``host`` (and the ``part`` of a train call they feed) the agent inputs, available actions and
    states are written into its reused arrays (:mod:`marl.learners.host_buffers`), valid until the next call
    with that part; else new arrays (the readable form, :func:`~marl.controllers.mac.build_agent_inputs`).
    ``rows_inputs``: agent inputs as time-major rows ``(T*B*N, I)`` (``RNNAgent.unroll_rows``: the layout of
    the recurrence, written so here rather than transposed in the graph), only with ``host``.
    """
    b, t_all = check_batch(batch, info, t_slots)
    whole = rows is None
    t, rows = (t_all if t is None else t), (slice(None) if rows is None else rows)

    def get(key: str) -> np.ndarray:
        return batch[key][rows, :t]

    mask = transition_mask(get("filled"), get("terminated"))
    if whole and mask.sum() <= 0:  # a group (rows) of a batch with transitions may have none
        raise ValueError("batch holds no transitions (filled mask is empty)")
    if host is None:
        onehot = get("actions_onehot")
        inputs = build_agent_inputs(get("obs"), onehot, agent.obs_last_action, agent.obs_agent_id)
        avail, state = np.asarray(get("avail_actions"), np.int32), np.asarray(get("state"), np.float32)
    else:  # the large arrays, filled into this part's reused host arrays
        b_rows, n = (b if whole else len(rows)), info.n_agents
        width = input_dim(info, agent)
        buf, cut = host.take, (None if whole else rows)
        if rows_inputs:  # written through a (B, T, N, I) view of the time-major buffer
            rows_TBNI = buf((part, "inputs"), (t, b_rows, n, width), np.float32)
            out = rows_TBNI.transpose(1, 0, 2, 3)
        else:
            out = buf((part, "inputs"), (b_rows, t, n, width), np.float32)
        inputs = agent_inputs_into(
            out, batch["obs"], batch["actions_onehot"], cut, agent.obs_last_action, agent.obs_agent_id
        )
        if rows_inputs:
            inputs = rows_TBNI.reshape(t * b_rows * n, width)  # a view of the contiguous buffer
        shape = (b_rows, t, n, info.n_actions)
        avail = copy_rows(buf((part, "avail"), shape, np.int32), batch["avail_actions"], cut, t)
        shape = (b_rows, t, info.state_shape)
        state = copy_rows(buf((part, "state"), shape, np.float32), batch["state"], cut, t)
    arrays = [
        inputs,
        avail,
        np.asarray(get("actions")[:, :-1], np.int64),
        np.asarray(get("reward")[:, :-1], np.float32),
        np.asarray(get("terminated")[:, :-1], np.float32),
        mask,
        state,
    ]
    return [np.ascontiguousarray(x) for x in arrays]
