"""MADDPG (Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive Environments");
with one agent it is DDPG (Lillicrap et al. 2016, "Continuous control with deep reinforcement learning").

* Actors: one deterministic MLP shared by all agents (parameter sharing; the agent-id one-hot in the input,
  ``agent.obs_agent_id``, lets behaviour differ). Discrete actions use the straight-through Gumbel-softmax
  (Jang et al. 2017): forward a one-hot sample, backward the gradient of ``softmax((logits + g) / tau)``
  over the available actions. Continuous actions are ``low + (tanh(z) + 1) / 2 (high - low)``.
* Critic: one centralised ``Q_i(s, a_1..a_n)`` shared by all agents with an agent-id input
  (:class:`~marl.modules.critics.MADDPGCritic`); ``s`` is the env state.
* Critic target ``y_i = r + gamma (1 - terminated) Q'_i(s', mu'_1(o'_1)..mu'_n(o'_n))`` with target actors
  (discrete: the best available action of the target actor, one-hot); loss ``MSE``.
* Actor loss for agent ``i``: ``-Q_i(s, a_1..mu_i(o_i)..a_n)`` with the other agents' actions from the
  replay (as Lowe et al.), plus ``actor_reg * mean(z^2)`` on the actor outputs (their regulariser).
* Targets: Polyak ``target <- tau * online + (1 - tau) * target`` after every gradient step
  (``learner.target_update_tau``).
* Replay: transitions drawn from the replayed episodes exactly as the DQN learner does
  (:class:`~marl.learners.transitions.TransitionUpdates`; static minibatch shapes; the sampling RNG,
  which also draws the Gumbel noise, is checkpointed). The critic step and the actor step and the soft
  target update are one ``ms.jit`` graph.
"""

from __future__ import annotations

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config.schema import Config, NoiseExplorationConfig
from marl.controllers.deterministic_controller import DeterministicController
from marl.controllers.mac import build_agent_inputs, input_dim
from marl.envs.base import EnvInfo
from marl.learners.dqn_learner import make_target_update, polyak, target_pairs
from marl.learners.optim import clip_and_apply, make_optimizer
from marl.learners.transitions import TransitionUpdates
from marl.registry import build, register
from marl.utils.ms import (
    Tensor,
    jit,
    load_training_state,
    ms,
    nn,
    ops,
    params_to_numpy,
    save_training_state,
)

STAT_NAMES = (
    "critic_loss",
    "actor_loss",
    "q_taken_mean",
    "target_mean",
    "critic_grad_norm",
    "actor_grad_norm",
)


class MADDPGNets(nn.Cell):
    """Actor, critic and their targets under one parent Cell (unique parameter names)."""

    def __init__(
        self, actor: nn.Cell, target_actor: nn.Cell, critic: nn.Cell, target_critic: nn.Cell
    ) -> None:
        super().__init__()
        self.actor, self.target_actor, self.critic, self.target_critic = (
            actor,
            target_actor,
            critic,
            target_critic,
        )


def gumbel_softmax_st(
    logits_MNA: ms.Tensor, avail_MNA: ms.Tensor, gumbel_MNA: ms.Tensor, tau: float
) -> ms.Tensor:
    """Straight-through Gumbel-softmax over the available actions: the value is the one-hot of
    ``argmax(logits + g)``, the gradient that of ``softmax((logits + g) / tau)``."""
    z = ops.masked_fill(logits_MNA + gumbel_MNA, avail_MNA == 0, -1e10)
    soft = ops.softmax(z / tau, axis=-1)
    hard = ops.one_hot(
        ops.argmax(z, dim=-1), soft.shape[-1], Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)
    )
    return ops.stop_gradient(hard - soft) + soft


def soft_update_reference(target: np.ndarray, online: np.ndarray, tau: float) -> np.ndarray:
    """NumPy Polyak update (the arithmetic the learner's target update does; used by tests)."""
    return tau * online + (1.0 - tau) * target


@register("learner", "maddpg")
class MADDPGLearner(TransitionUpdates):
    """MADDPG / DDPG over transitions drawn from replayed episodes (papers in the module docstring)."""

    on_policy = False

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc, a = cfg.learner, cfg.agent
        if a.name != "mlp" or a.obs_last_action:
            raise ValueError(
                f"maddpg actors are feed-forward: set agent.name=mlp and agent.obs_last_action="
                f"false (got {a.name!r}, {a.obs_last_action})"
            )
        if not 0.0 < lc.target_update_tau <= 1.0:
            raise ValueError(
                f"maddpg needs soft target updates: target_update_tau in (0, 1], got {lc.target_update_tau}"
            )
        if not isinstance(cfg.exploration, NoiseExplorationConfig):
            raise ValueError(
                "maddpg acts with the exploration section's epsilon and noise fields: pass a "
                f"NoiseExplorationConfig, got {type(cfg.exploration).__name__}"
            )
        if lc.transition_batch_size < 1 or lc.updates_per_step <= 0 or lc.critic_lr <= 0:
            raise ValueError("transition_batch_size must be >= 1, updates_per_step > 0 and critic_lr > 0")
        if lc.gumbel_tau <= 0:
            raise ValueError(f"gumbel_tau must be > 0, got {lc.gumbel_tau}")
        self.info, self.cfg = info, cfg
        n, act = info.n_agents, info.n_actions
        in_dim = input_dim(info, a)

        def actor() -> nn.Cell:
            return build("agent", "mlp", input_dim=in_dim, hidden_dim=a.hidden_dim, n_actions=act)

        def critic() -> nn.Cell:
            return build(
                "critic",
                "maddpg",
                state_dim=info.state_shape,
                n_agents=n,
                action_dim=act,
                hidden_dim=lc.critic_hidden_dim,
            )

        self.nets = MADDPGNets(actor(), actor(), critic(), critic())
        self._pairs = target_pairs(self.nets.actor, self.nets.target_actor) + target_pairs(
            self.nets.critic, self.nets.target_critic
        )
        self.actor_params = self.nets.actor.trainable_params()
        self.critic_params = self.nets.critic.trainable_params()
        self.actor_opt = make_optimizer(lc.optimizer, self.actor_params, lc.lr, lc.optim_alpha, lc.optim_eps)
        self.critic_opt = make_optimizer(
            lc.optimizer, self.critic_params, lc.critic_lr, lc.optim_alpha, lc.optim_eps
        )
        for prefix, opt in (("actor", self.actor_opt), ("critic", self.critic_opt)):
            for name, param in opt.parameters_and_names():  # two optimizers in one graph: unique names
                if not param.name.startswith(("actor", "critic", "target")):
                    param.name = f"{prefix}_opt.{name}"
        self.rng = np.random.default_rng(cfg.seed + 104729)
        self.train_steps = self.grad_steps = 0
        self.last_t_env: int | None = None
        make_target_update(self._pairs, 1.0, False)()
        self._step = self._make_step()

    # ------------------------------------------------------------------------------- the train step
    def _make_step(self):  # noqa: ANN202
        lc, info, nets = self.cfg.learner, self.info, self.nets
        n, act, m = info.n_agents, info.n_actions, lc.transition_batch_size
        gamma, tau_g, reg = float(lc.gamma), float(lc.gumbel_tau), float(lc.actor_reg)
        clip, discrete = float(lc.grad_norm_clip), info.discrete
        low, high = float(info.action_low), float(info.action_high)
        eye_NN = Tensor(np.eye(n, dtype=np.float32))
        ids_RN = Tensor(np.tile(np.eye(n, dtype=np.float32), (m, 1)))  # R = M * N critic rows
        actor_opt, critic_opt = self.actor_opt, self.critic_opt
        tau, pairs = float(lc.target_update_tau), self._pairs

        def policy(net: nn.Cell, x_MNI: ms.Tensor) -> ms.Tensor:
            return net.unroll(x_MNI.reshape(m, 1, n, -1)).reshape(m, n, act)

        def rows(state_MS: ms.Tensor) -> ms.Tensor:  # the state once per agent row: (M * N, S)
            return ops.broadcast_to(state_MS.reshape(m, 1, -1), (m, n, state_MS.shape[-1])).reshape(m * n, -1)

        def joint(a_MNA: ms.Tensor) -> ms.Tensor:  # everyone's action for every agent row: (M * N, N * A)
            return ops.broadcast_to(a_MNA.reshape(m, 1, n * act), (m, n, n * act)).reshape(m * n, n * act)

        def greedy_action(z_MNA: ms.Tensor, avail_MNA: ms.Tensor) -> ms.Tensor:
            if discrete:
                best = ops.argmax(ops.masked_fill(z_MNA, avail_MNA == 0, -1e10), dim=-1)
                return ops.one_hot(best, act, Tensor(1.0, ms.float32), Tensor(0.0, ms.float32))
            return low + (ops.tanh(z_MNA) + 1.0) * (0.5 * (high - low))

        def critic_loss_fn(x, next_x, avail, next_avail, state, next_state, actions, reward, term, gumbel):
            next_a = ops.stop_gradient(greedy_action(policy(nets.target_actor, next_x), next_avail))
            next_q = ops.stop_gradient(nets.target_critic(rows(next_state), joint(next_a), ids_RN))
            r_rows = ops.broadcast_to(reward.reshape(m, 1), (m, n)).reshape(m * n, 1)
            t_rows = ops.broadcast_to(term.reshape(m, 1), (m, n)).reshape(m * n, 1)
            y = ops.stop_gradient(r_rows + gamma * (1.0 - t_rows) * next_q)
            q = nets.critic(rows(state), joint(actions), ids_RN)
            td = q - y
            return (td * td).mean(), ops.stack([q.mean(), y.mean()])

        def actor_loss_fn(x, next_x, avail, next_avail, state, next_state, actions, reward, term, gumbel):
            z = policy(nets.actor, x)
            if discrete:
                pi = gumbel_softmax_st(z, avail, gumbel, tau_g)
            else:
                pi = greedy_action(z, avail)
            # row i: agent i's action from the current policy, the others' from the replay
            own = eye_NN.reshape(1, n, n, 1)
            mixed = actions.reshape(m, 1, n, act) * (1.0 - own) + pi.reshape(m, 1, n, act) * own
            q = nets.critic(rows(state), mixed.reshape(m * n, n * act), ids_RN)
            return -q.mean() + reg * (z * z).mean()

        critic_grad = ms.value_and_grad(critic_loss_fn, None, weights=self.critic_params, has_aux=True)
        actor_grad = ms.value_and_grad(actor_loss_fn, None, weights=self.actor_params)

        def train_step(*arrays):
            (c_loss, stats), c_grads = critic_grad(*arrays)
            c_norm = clip_and_apply(critic_opt, c_grads, clip)
            a_loss, a_grads = actor_grad(*arrays)
            a_norm = clip_and_apply(actor_opt, a_grads, clip)
            out = ops.concat(
                [c_loss.reshape(1), a_loss.reshape(1), stats, c_norm.reshape(1), a_norm.reshape(1)]
            )
            return ops.depend(out, polyak(pairs, tau))  # soft targets after both optimizer steps

        return jit(train_step) if lc.use_jit else train_step

    def minibatch(
        self, batch: EpisodeBatch, inputs_BTNI: np.ndarray, b: np.ndarray, t: np.ndarray
    ) -> list[np.ndarray]:
        """Arrays of the step for transitions ``(b, t)`` (``t + 1`` is the next slot), plus Gumbel noise."""
        key = "actions_onehot" if self.info.discrete else "actions"
        m, n, act = len(b), self.info.n_agents, self.info.n_actions
        gumbel = -np.log(-np.log(self.rng.uniform(1e-10, 1.0, size=(m, n, act))))
        return [
            inputs_BTNI[b, t],
            inputs_BTNI[b, t + 1],
            np.asarray(batch["avail_actions"][b, t], np.int32),
            np.asarray(batch["avail_actions"][b, t + 1], np.int32),
            np.asarray(batch["state"][b, t], np.float32),
            np.asarray(batch["state"][b, t + 1], np.float32),
            np.asarray(batch[key][b, t], np.float32),
            np.asarray(batch["reward"][b, t], np.float32),
            np.asarray(batch["terminated"][b, t], np.float32),
            gumbel.astype(np.float32),
        ]

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """``n_updates`` critic + actor steps (each followed by a soft target update) on ``batch``."""
        inputs = build_agent_inputs(batch["obs"], None, False, self.cfg.agent.obs_agent_id)
        stats = self.transition_updates(batch, inputs, t_env, STAT_NAMES)
        self.train_steps += 1
        return stats

    # ------------------------------------------------------------------------------ weights and state
    def make_controller(self, seed: int) -> DeterministicController:
        """NumPy actor with exploration (Gumbel sampling / Gaussian noise) for the runner."""
        return DeterministicController(
            self.info,
            self.cfg.agent,
            self.cfg.exploration,
            seed=seed,
            weights=self.actor_weights(),
            gumbel_tau=self.cfg.learner.gumbel_tau,
        )

    def actor_weights(self) -> dict[str, np.ndarray]:
        """Online actor weights (``DeterministicController.load_weights``)."""
        return params_to_numpy(self.nets.actor)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Actor, critic, targets, both optimizers' state, counters and the sampling RNG (for checkpoints)."""
        sd = save_training_state(self.nets, {"actor/": self.actor_opt, "critic/": self.critic_opt})
        sd["counters/steps"] = np.array(
            [self.train_steps, self.grad_steps, -1 if self.last_t_env is None else self.last_t_env], np.int64
        )
        return self.save_rng(sd)

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` saved (same config and EnvInfo)."""
        load_training_state(self.nets, {"actor/": self.actor_opt, "critic/": self.critic_opt}, sd)
        self.train_steps, self.grad_steps, last_t = (int(x) for x in sd["counters/steps"])
        self.last_t_env = None if last_t < 0 else last_t
        self.load_rng(sd)
