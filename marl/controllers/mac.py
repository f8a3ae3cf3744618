"""Multi-agent controller: agent inputs, per-env hidden state and masked epsilon-greedy action selection.

Acting runs on a NumPy copy of the agent network (:mod:`marl.controllers.numpy_actor`). MindSpore is
imported lazily, only to initialise weights when none are given and for the reference forward
(``forward_ms``) used in parity checks, so rollout workers that receive weights never load it. The
learner owns the trained network and pushes its weights with :meth:`load_weights`.
"""

from __future__ import annotations

import numpy as np

from marl.config.schema import AgentConfig, ExplorationConfig
from marl.controllers.numpy_actor import numpy_agent
from marl.envs.base import EnvInfo
from marl.registry import build


def linear_anneal(t: int, start: float, finish: float, steps: int) -> float:
    """``start -> finish`` linearly over ``steps`` env steps, then ``finish`` (pymarl's linear schedule)."""
    frac = min(max(t, 0) / max(steps, 1), 1.0)
    return float(start + frac * (finish - start))


def epsilon_at(exploration: ExplorationConfig, t_env: int) -> float:
    """The exploration section's epsilon after ``t_env`` env steps."""
    e = exploration
    return linear_anneal(t_env, e.epsilon_start, e.epsilon_finish, e.epsilon_anneal_time)


def input_dim(info: EnvInfo, agent_cfg: AgentConfig) -> int:
    """Agent input size: obs (+ last-action one-hot) (+ agent-id one-hot)."""
    return (
        info.obs_shape
        + (info.n_actions if agent_cfg.obs_last_action else 0)
        + (info.n_agents if agent_cfg.obs_agent_id else 0)
    )


def build_agent_inputs(
    obs_BTNO: np.ndarray,
    actions_onehot_BTNA: np.ndarray | None,
    obs_last_action: bool,
    obs_agent_id: bool,
    prev_action_BNA: np.ndarray | None = None,
) -> np.ndarray:
    """Concatenate obs, the previous step's action one-hot and the agent id one-hot -> ``inputs_BTNI``.

    ``actions_onehot_BTNA[:, t]`` is the action taken at slot ``t``; the input at slot ``t`` carries the
    action of slot ``t - 1``, and at ``t = 0`` it carries ``prev_action_BNA`` (zeros when not given:
    the start of an episode). Acting calls this with ``T = 1`` and the controller's stored last action;
    learning calls it with the whole padded episode.
    """
    obs_BTNO = np.asarray(obs_BTNO, dtype=np.float32)
    if obs_BTNO.ndim != 4:
        raise ValueError(f"obs must be (B, T, N, obs_dim), got shape {obs_BTNO.shape}")
    b, t, n, _ = obs_BTNO.shape
    parts = [obs_BTNO]
    if obs_last_action:
        if actions_onehot_BTNA is None:
            raise ValueError("obs_last_action=True needs actions_onehot_BTNA (B, T, N, n_actions)")
        act = np.asarray(actions_onehot_BTNA, dtype=np.float32)
        if act.shape[:3] != (b, t, n):
            raise ValueError(f"actions_onehot shape {act.shape} does not match obs shape {obs_BTNO.shape}")
        last = np.empty_like(act)
        last[:, 0] = 0.0 if prev_action_BNA is None else prev_action_BNA
        last[:, 1:] = act[:, :-1]
        parts.append(last)
    if obs_agent_id:
        parts.append(np.broadcast_to(np.eye(n, dtype=np.float32), (b, t, n, n)))
    return np.concatenate(parts, axis=3) if len(parts) > 1 else obs_BTNO


class MultiAgentController:
    """Shared-parameter agents acting with masked epsilon-greedy over ``batch_size`` parallel envs."""

    def __init__(
        self,
        info: EnvInfo,
        agent_cfg: AgentConfig,
        exploration: ExplorationConfig,
        seed: int,
        weights: dict[str, np.ndarray] | None = None,
    ) -> None:
        if not info.discrete:
            raise ValueError("MultiAgentController needs a discrete action space (EnvInfo.discrete=True)")
        if exploration.epsilon_anneal_time <= 0:
            raise ValueError(f"epsilon_anneal_time must be > 0, got {exploration.epsilon_anneal_time}")
        self.info, self.agent_cfg, self.exploration = info, agent_cfg, exploration
        self.n_agents, self.n_actions = info.n_agents, info.n_actions
        self.input_dim = input_dim(info, agent_cfg)
        self._agent = None  # MindSpore agent, built on demand
        self._weights = self.agent_ms_weights() if weights is None else dict(weights)
        self._ms_stale = True  # the MindSpore copy is synced lazily, only for forward_ms
        self.actor = numpy_agent(agent_cfg.name, self._weights)
        self.rng = np.random.default_rng(seed)
        self.init_hidden(1)

    # ----------------------------------------------------------------------------------------- state
    def init_hidden(self, batch_size: int) -> None:
        """Zero the hidden state and last action of ``batch_size`` envs (call at every episode start)."""
        self.batch_size = int(batch_size)
        self.hidden_BNH = np.zeros((batch_size, self.n_agents, self.agent_cfg.hidden_dim), np.float32)
        self.last_action_BNA = np.zeros((batch_size, self.n_agents, self.n_actions), np.float32)

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Take the learner's agent weights (``QLearner.actor_weights()``) for acting."""
        self.actor.load(weights)
        self._weights, self._ms_stale = dict(weights), True

    def epsilon(self, t_env: int) -> float:
        """Linearly annealed epsilon: ``start -> finish`` over ``epsilon_anneal_time`` env steps."""
        return epsilon_at(self.exploration, t_env)

    # --------------------------------------------------------------------------------------- acting
    def _rows(self, rows: np.ndarray | None) -> np.ndarray:
        if rows is None:
            return np.arange(self.batch_size)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= self.batch_size):
            raise IndexError(f"rows {rows.tolist()} out of range for {self.batch_size} envs")
        return rows

    def _aligned(self, x: np.ndarray, rows: np.ndarray, name: str, last_dim: int) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[1:] != (self.n_agents, last_dim):
            raise ValueError(f"{name} must be (envs, {self.n_agents}, {last_dim}), got {x.shape}")
        if x.shape[0] == len(rows):
            return x
        if x.shape[0] == self.batch_size:
            return x[rows]
        raise ValueError(f"{name} has {x.shape[0]} envs; expected len(rows)={len(rows)} or {self.batch_size}")

    def forward(self, obs_BNO: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Q-values ``(len(rows), N, A)`` for one step; advances the hidden state of ``rows``."""
        rows = self._rows(rows)
        obs = self._aligned(obs_BNO, rows, "obs", self.info.obs_shape).astype(np.float32, copy=False)
        m = len(rows)
        if self.agent_cfg.obs_last_action:
            last = self.last_action_BNA[rows]
            inputs = build_agent_inputs(
                obs[:, None], last[:, None], True, self.agent_cfg.obs_agent_id, prev_action_BNA=last
            )
        else:
            inputs = build_agent_inputs(obs[:, None], None, False, self.agent_cfg.obs_agent_id)
        h = self.hidden_BNH[rows].reshape(m * self.n_agents, -1)
        q, h = self.actor.step(inputs.reshape(m * self.n_agents, self.input_dim), h)
        self.hidden_BNH[rows] = h.reshape(m, self.n_agents, -1)
        return q.reshape(m, self.n_agents, self.n_actions)

    def select_actions(
        self,
        obs_BNO: np.ndarray,
        avail_BNA: np.ndarray,
        t_env: int,
        test_mode: bool = False,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Masked epsilon-greedy actions ``(len(rows), N)`` int64 for the running envs ``rows``.

        ``obs_BNO``/``avail_BNA`` hold either only the ``rows`` envs (row-aligned; assumed whenever their
        length equals ``len(rows)``) or all ``batch_size`` envs (then indexed by ``rows``). A random
        action is uniform over the agent's AVAILABLE actions; greedy picks the best available one;
        ``test_mode`` is greedy. Hidden state and last action of envs not in ``rows`` are untouched.
        """
        rows = self._rows(rows)
        avail = self._aligned(avail_BNA, rows, "avail_actions", self.n_actions) > 0
        if not avail.any(axis=2).all():
            bad = np.argwhere(~avail.any(axis=2)).tolist()
            raise ValueError(f"every agent needs at least one available action; none for (env, agent) {bad}")
        q = self.forward(obs_BNO, rows)
        greedy = np.where(avail, q, -np.inf).argmax(axis=2)
        eps = 0.0 if test_mode else self.epsilon(t_env)
        if eps > 0.0:
            # i.i.d. uniform scores on available actions only -> argmax is uniform over them.
            scores = np.where(avail, self.rng.random(avail.shape), -1.0)
            explore = self.rng.random(greedy.shape) < eps
            actions = np.where(explore, scores.argmax(axis=2), greedy)
        else:
            actions = greedy
        actions = actions.astype(np.int64)
        onehot = np.zeros((len(rows), self.n_agents, self.n_actions), np.float32)
        np.put_along_axis(onehot, actions[..., None], 1.0, axis=2)
        self.last_action_BNA[rows] = onehot
        return actions

    # ------------------------------------------------------------------------------------ reference
    @property
    def agent(self):  # noqa: ANN201 (an nn.Cell; MindSpore is imported only here)
        """The MindSpore agent network (same class and sizes as the learner's), built on first use."""
        if self._agent is None:
            self._agent = build(
                "agent",
                self.agent_cfg.name,
                input_dim=self.input_dim,
                hidden_dim=self.agent_cfg.hidden_dim,
                n_actions=self.n_actions,
            )
        return self._agent

    def agent_ms_weights(self) -> dict[str, np.ndarray]:
        """Weights of the MindSpore agent (freshly initialised unless loaded) as NumPy arrays."""
        from marl.utils.ms import params_to_numpy

        return params_to_numpy(self.agent)

    def forward_ms(self, inputs_MI: np.ndarray, h_MH: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The MindSpore agent's step on the same weights as the NumPy actor (for parity checks)."""
        from marl.utils.ms import load_numpy_into, ms

        if self._ms_stale:
            load_numpy_into(self.agent, self._weights)
            self._ms_stale = False
        x = ms.Tensor(np.asarray(inputs_MI, np.float32))
        q, h = self.agent(x, ms.Tensor(np.asarray(h_MH, np.float32)))
        return q.asnumpy(), h.asnumpy()
