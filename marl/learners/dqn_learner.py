"""DQN on transitions (Mnih et al. 2015, "Human-level control through deep reinforcement learning"), with
double-Q targets (van Hasselt et al. 2016, "Deep Reinforcement Learning with Double Q-learning") and
dueling heads (Wang et al. 2016; ``agent.name=dueling_mlp`` / ``dueling_rnn``, see
:mod:`marl.modules.dueling`).

Replay: the trainer samples ``learner.batch_size`` episodes from the episode replay buffer; every train call
then draws ``updates_per_step x (new env steps)`` minibatches of ``transition_batch_size`` transitions
uniformly (with replacement) from the valid transitions of those episodes
(:class:`~marl.learners.transitions.TransitionUpdates`; the sampling RNG is checkpointed).
A minibatch always has the same shape, so the jitted step compiles once whatever the episode limit.
Transitions are feed-forward, so the agent must be an MLP (``mlp`` / ``dueling_mlp``); with several agents
this is independent DQN (IQL) with parameter sharing.

Target: ``y = r + gamma (1 - terminated) Q_target(s', argmax_a' Q(s', a'))`` (double) or
``max_a' Q_target(s', a')``, over available actions; a time-limit cut is stored as not terminated, so it
bootstraps. Loss: Huber (``td_loss=huber``, delta 1) or ``0.5 * MSE``. Target network: hard copy every
``target_update_interval`` episodes, or a Polyak update after every gradient step (fused into the jitted
step) when ``target_update_tau > 0``. Acting: :class:`~marl.controllers.mac.MultiAgentController` (masked
ε-greedy) with the online weights; dueling weights are folded into the plain MLP first (same Q-values).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config.schema import Config
from marl.controllers.mac import MultiAgentController, build_agent_inputs, input_dim
from marl.envs.base import EnvInfo
from marl.learners.optim import clip_and_apply, make_optimizer
from marl.learners.q_learner import QNets
from marl.learners.transitions import TransitionUpdates
from marl.learners.transitions import n_updates as n_updates  # re-exported (older imports)
from marl.learners.transitions import sample_transitions as sample_transitions
from marl.learners.transitions import valid_transitions as valid_transitions
from marl.modules.dueling import plain_agent_weights
from marl.registry import build, register
from marl.utils.ms import (
    jit,
    load_training_state,
    ms,
    ops,
    params_to_numpy,
    save_training_state,
)

STAT_NAMES = ("loss", "td_error_abs", "q_taken_mean", "target_mean", "grad_norm")
FEEDFORWARD_AGENTS = ("mlp", "dueling_mlp")


def polyak(pairs: list[tuple[ms.Parameter, ms.Parameter]], tau: float) -> bool:
    """``target <- tau * online + (1 - tau) * target`` for every ``(target, online)`` pair, in place
    (graph-safe: call it inside a jitted step to fuse the target update with the gradient step)."""
    for tp, p in pairs:
        ops.assign(tp, tau * p + (1.0 - tau) * tp)
    return True


def make_target_update(pairs: list[tuple[ms.Parameter, ms.Parameter]], tau: float, use_jit: bool):  # noqa: ANN201
    """A function doing :func:`polyak` (``tau = 1``: hard copy); one graph when jitted."""

    def update():
        return polyak(pairs, tau)

    return jit(update) if use_jit else update


def target_pairs(online: ms.nn.Cell, target: ms.nn.Cell) -> list[tuple[ms.Parameter, ms.Parameter]]:
    """``(target param, online param)`` matched by name; target params get ``requires_grad=False``."""
    on = dict(online.parameters_and_names())
    pairs = [(tp, on[name]) for name, tp in target.parameters_and_names()]
    for tp, _ in pairs:
        tp.requires_grad = False
    return pairs


def dqn_targets(
    next_online_MNA: ms.Tensor,
    next_target_MNA: ms.Tensor,
    next_avail_MNA: ms.Tensor,
    reward_M1: ms.Tensor,
    term_M1: ms.Tensor,
    gamma: float,
    double_q: bool,
) -> ms.Tensor:
    """One-step targets ``(M, N)``: ``r + gamma (1 - term) Q_target(s', a*)`` with ``a*`` the best available
    action of the online net (double Q) or of the target net (``max``). No gradient flows through them."""
    next_online_MNA, next_target_MNA = ops.stop_gradient(next_online_MNA), ops.stop_gradient(next_target_MNA)
    if double_q:  # argmax by the online net, value by the target net
        masked = ops.masked_fill(next_online_MNA, next_avail_MNA == 0, -9999999.0)
        best_MN1 = ops.argmax(masked, dim=2, keepdim=True)
        next_v_MN = ops.gather_elements(next_target_MNA, 2, best_MN1).squeeze(2)
    else:
        next_v_MN = ops.masked_fill(next_target_MNA, next_avail_MNA == 0, -9999999.0).max(axis=2)
    return reward_M1 + gamma * (1.0 - term_M1) * next_v_MN


@register("learner", "dqn")
class DQNLearner(TransitionUpdates):
    """DQN / double DQN / dueling DQN on transitions drawn from replayed episodes (papers above)."""

    on_policy = False

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc, a = cfg.learner, cfg.agent
        if not info.discrete:
            raise ValueError(
                "dqn needs discrete actions (EnvInfo.discrete=True); use ddpg/maddpg for continuous"
            )
        if a.name not in FEEDFORWARD_AGENTS:
            raise ValueError(
                f"dqn learns from single transitions: agent.name must be one of "
                f"{FEEDFORWARD_AGENTS}, got {a.name!r}"
            )
        if lc.td_loss not in ("huber", "mse"):
            raise ValueError(f"learner.td_loss must be huber or mse, got {lc.td_loss!r}")
        if not 0.0 <= lc.target_update_tau <= 1.0:
            raise ValueError(f"target_update_tau must be in [0, 1], got {lc.target_update_tau}")
        if lc.transition_batch_size < 1 or lc.updates_per_step <= 0:
            raise ValueError("transition_batch_size must be >= 1 and updates_per_step > 0")
        self.info, self.cfg = info, cfg
        in_dim = input_dim(info, a)

        def make_agent() -> ms.nn.Cell:
            return build("agent", a.name, input_dim=in_dim, hidden_dim=a.hidden_dim, n_actions=info.n_actions)

        self.nets = QNets(make_agent(), make_agent(), None, None)
        self._pairs = target_pairs(self.nets.agent, self.nets.target_agent)
        self.params = self.nets.agent.trainable_params()
        self.optimizer = make_optimizer(lc.optimizer, self.params, lc.lr, lc.optim_alpha, lc.optim_eps)
        self.rng = np.random.default_rng(cfg.seed + 7919)
        self.train_steps = self.grad_steps = 0
        self.last_target_update_episode = 0
        self.last_t_env: int | None = None
        self._hard = make_target_update(self._pairs, 1.0, False)  # rare: eager is enough
        self.soft_tau = float(lc.target_update_tau)  # > 0: Polyak update fused into every step
        self._hard()
        self._step = self._make_step()

    def _make_step(self):  # noqa: ANN202
        lc = self.cfg.learner
        agent, target_agent, optimizer = self.nets.agent, self.nets.target_agent, self.optimizer
        tau, pairs = self.soft_tau, self._pairs
        gamma, double_q, huber, clip = (
            float(lc.gamma),
            bool(lc.double_q),
            lc.td_loss == "huber",
            float(lc.grad_norm_clip),
        )
        n, m, i_dim = self.info.n_agents, lc.transition_batch_size, input_dim(self.info, self.cfg.agent)

        def q_of(net: ms.nn.Cell, x_MNI: ms.Tensor) -> ms.Tensor:
            return net.unroll(x_MNI.reshape(m, 1, n, i_dim)).reshape(m, n, -1)

        def loss_fn(x_MNI, next_x_MNI, next_avail_MNA, actions_MN1, reward_M1, term_M1):
            q_MNA = q_of(agent, x_MNI)
            chosen_MN = ops.gather_elements(q_MNA, 2, actions_MN1).squeeze(2)
            next_target_MNA = q_of(target_agent, next_x_MNI)
            next_online_MNA = q_of(agent, next_x_MNI) if double_q else next_target_MNA
            y_MN = ops.stop_gradient(
                dqn_targets(
                    next_online_MNA, next_target_MNA, next_avail_MNA, reward_M1, term_M1, gamma, double_q
                )
            )
            td = chosen_MN - y_MN
            if huber:
                abs_td = ops.abs(td)
                loss = ops.where(abs_td < 1.0, 0.5 * td * td, abs_td - 0.5).mean()
            else:
                loss = 0.5 * (td * td).mean()
            return loss, ops.stack([ops.abs(td).mean(), chosen_MN.mean(), y_MN.mean()])

        grad_fn = ms.value_and_grad(loss_fn, None, weights=self.params, has_aux=True)

        def train_step(x_MNI, next_x_MNI, next_avail_MNA, actions_MN1, reward_M1, term_M1):
            (loss, stats), grads = grad_fn(x_MNI, next_x_MNI, next_avail_MNA, actions_MN1, reward_M1, term_M1)
            grad_norm = clip_and_apply(optimizer, grads, clip)
            out = ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)])
            if tau > 0.0:  # after the optimizer (ordered by the side-effect chain)
                out = ops.depend(out, polyak(pairs, tau))
            return out

        return jit(train_step) if lc.use_jit else train_step

    def minibatch(
        self, batch: EpisodeBatch, inputs_BTNI: np.ndarray, b: np.ndarray, t: np.ndarray
    ) -> list[np.ndarray]:
        """The step's arrays for transitions ``(b, t)``: inputs at ``t`` and ``t + 1``, avail at ``t + 1``,
        actions, reward and terminated at ``t``."""
        return [
            inputs_BTNI[b, t],
            inputs_BTNI[b, t + 1],
            np.asarray(batch["avail_actions"][b, t + 1], np.int32),
            np.asarray(batch["actions"][b, t], np.int64),
            np.asarray(batch["reward"][b, t], np.float32),
            np.asarray(batch["terminated"][b, t], np.float32),
        ]

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """``n_updates`` gradient steps on transitions of ``batch``; updates targets on schedule."""
        lc, a = self.cfg.learner, self.cfg.agent
        inputs = build_agent_inputs(
            batch["obs"], batch.data.get("actions_onehot"), a.obs_last_action, a.obs_agent_id
        )
        stats = self.transition_updates(batch, inputs, t_env, STAT_NAMES)
        self.train_steps += 1
        if self.soft_tau == 0.0 and episode - self.last_target_update_episode >= lc.target_update_interval:
            self._hard()
            self.last_target_update_episode = episode
        return stats

    # ------------------------------------------------------------------------------ weights and state
    def make_controller(self, seed: int) -> MultiAgentController:
        """Masked ε-greedy NumPy controller acting with the online Q-network (dueling folded to plain)."""
        plain, weights = plain_agent_weights(self.cfg.agent.name, params_to_numpy(self.nets.agent))
        return MultiAgentController(
            self.info, replace(self.cfg.agent, name=plain), self.cfg.exploration, seed=seed, weights=weights
        )

    def actor_weights(self) -> dict[str, np.ndarray]:
        """Online Q-network weights in the plain agent's layout (``MultiAgentController.load_weights``)."""
        return plain_agent_weights(self.cfg.agent.name, params_to_numpy(self.nets.agent))[1]

    def state_dict(self) -> dict[str, np.ndarray]:
        """Online/target nets, optimizer state, counters and the sampling RNG (for checkpoints)."""
        sd = save_training_state(self.nets, {"": self.optimizer})
        sd["counters/steps"] = np.array(
            [
                self.train_steps,
                self.grad_steps,
                self.last_target_update_episode,
                -1 if self.last_t_env is None else self.last_t_env,
            ],
            np.int64,
        )
        return self.save_rng(sd)

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` saved (same config and EnvInfo)."""
        load_training_state(self.nets, {"": self.optimizer}, sd)
        steps, grads, last_ep, last_t = (int(x) for x in sd["counters/steps"])
        self.train_steps, self.grad_steps, self.last_target_update_episode = steps, grads, last_ep
        self.last_t_env = None if last_t < 0 else last_t
        self.load_rng(sd)
