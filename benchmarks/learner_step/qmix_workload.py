"""The workload of the QMIX learner-step benchmarks: SMAC map sizes, synthetic padded episode batches,
the arrays every contender steps on, and the step's matmul FLOP count."""

from __future__ import annotations

import numpy as np

from marl.buffers.episode import EpisodeBatch, Scheme
from marl.config.schema import Config
from marl.controllers import build_agent_inputs, input_dim
from marl.envs.base import EnvInfo
from marl.learners.targets import transition_mask


def map_info(name: str) -> EnvInfo:
    """The ``EnvInfo`` of SMAC map ``name`` from the project's map data (embedded engine)."""
    from marl.envs.smac import StarCraft2Env

    env = StarCraft2Env(map_name=name, backend="sim", seed=0)
    try:
        return EnvInfo.from_dict(env.get_env_info())
    finally:
        env.close()


def synthetic_batch(
    info: EnvInfo, b: int, seed: int, max_len: int = 0, lengths: list[int] | None = None
) -> EpisodeBatch:
    """``b`` padded episodes of random length ``min(20, max_len)..max_len`` (default: the episode limit;
    the first episode is ``max_len`` long), or of the given ``lengths``; an episode shorter than the limit
    terminates, one of the limit's length timed out."""
    rng = np.random.default_rng(seed)
    eb = EpisodeBatch(Scheme(info), b)
    n, a = info.n_agents, info.n_actions
    max_len = max_len or info.episode_limit
    for row in range(b):
        if lengths is not None:
            ep_len = int(lengths[row])
        else:
            ep_len = max_len if row == 0 else int(rng.integers(min(20, max_len), max_len + 1))
        d = eb.data
        d["obs"][row, : ep_len + 1] = rng.normal(size=(ep_len + 1, n, info.obs_shape))
        d["state"][row, : ep_len + 1] = rng.normal(size=(ep_len + 1, info.state_shape))
        avail = (rng.random((ep_len + 1, n, a)) < 0.7).astype(np.int32)
        avail[..., 0] = 1
        d["avail_actions"][row, : ep_len + 1] = avail
        scores = np.where(avail[:ep_len] > 0, rng.random((ep_len, n, a)), -1.0)
        act = scores.argmax(2)
        d["actions"][row, :ep_len, :, 0] = act
        d["actions_onehot"][row, :ep_len] = np.eye(a, dtype=np.float32)[act]
        d["reward"][row, :ep_len, 0] = rng.normal(size=ep_len)
        d["terminated"][row, ep_len - 1, 0] = float(ep_len < info.episode_limit)
        d["filled"][row, : ep_len + 1, 0] = 1.0
    return eb


def batch_arrays(batch: EpisodeBatch, cfg: Config) -> list[np.ndarray]:
    """The same NumPy arrays the MindSpore learner builds (inputs, avail, actions, reward, terminated,
    mask, state), for the torch and JAX steps."""
    a = cfg.agent
    arrays = [
        build_agent_inputs(batch["obs"], batch["actions_onehot"], a.obs_last_action, a.obs_agent_id),
        batch["avail_actions"].astype(np.int64),
        batch["actions"][:, :-1].astype(np.int64),
        batch["reward"][:, :-1],
        batch["terminated"][:, :-1],
        transition_mask(batch["filled"], batch["terminated"]),
        batch["state"],
    ]
    return [np.ascontiguousarray(x) for x in arrays]


def step_matmul_flops(info: EnvInfo, cfg: Config, b: int, t: int) -> int:
    """Matmul FLOPs (2 m k n per ``(m, k) @ (k, n)``) of one QMIX step on ``b`` episodes of ``t`` slots.

    Forward: online and target agents over ``b t N`` rows (fc1, GRU input and hidden projections, fc2);
    target mixer over ``b t`` rows, online mixer over ``b (t-1)`` (hypernets, ``q^T W1`` and
    ``hidden . w_final``). Backward, online nets only: twice the forward for every matmul except those
    whose input is data (fc1 and the hypernets' first layers on the state: weight gradient only; the
    first step's hidden-state matmul: its input, the zero initial state, needs no gradient either).
    Element-wise work, the TD(lambda) targets, clipping and Adam are not counted: it is the model's
    work, the same for every contender, not what any one implementation executes.
    """
    n, a, hd = info.n_agents, info.n_actions, cfg.agent.hidden_dim
    s, e, hy, i = info.state_shape, cfg.mixer.embed_dim, cfg.mixer.hypernet_dim, input_dim(info, cfg.agent)
    rows = b * t * n
    agent_first = 2 * rows * i * hd  # fc1
    agent_rest = 2 * rows * (hd * 3 * hd * 2 + hd * a)  # GRU ih + hh, fc2

    def mixer(r: int) -> tuple[int, int]:  # (first layers on the state, the rest)
        first = 2 * r * (s * hy * 2 + s * e * 2)  # hyper_w_1[0], hyper_w_final[0], hyper_b_1, V[0]
        rest = 2 * r * (hy * e * n + hy * e + e + n * e + e)  # second layers, q^T W1, hidden . w_final
        return first, rest

    mf, mr = mixer(b * (t - 1))
    tf, tr = mixer(b * t)
    forward = 2 * (agent_first + agent_rest) + mf + mr + tf + tr
    first_dh = 2 * b * n * hd * 3 * hd  # no gradient flows into the zero initial hidden state
    backward = agent_first + 2 * agent_rest - first_dh + mf + 2 * mr
    return forward + backward
