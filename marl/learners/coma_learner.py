"""COMA (``learner.name: coma``): counterfactual multi-agent policy gradients.

Foerster et al. 2018, "Counterfactual Multi-Agent Policy Gradients" (AAAI). A centralised critic
``Q_a(s, u_-a, .)`` (:class:`~marl.modules.critics.COMACritic`) values every action of agent ``a`` with the
other agents' actions fixed; the actor's advantage is the taken action's value minus the counterfactual
baseline

    ``A_a = Q_a(s, u) - sum_u' pi_a(u' | tau_a) Q_a(s, (u_-a, u'))``

and the loss is ``-A_a log pi_a(u_a | tau_a)`` (masked mean) ``+ value_coef * (Q_a(s, u) - y)^2``
``- entropy_coef H`` with ``y`` the TD(lambda) target of a target critic (pymarl's ``coma_learner``).
Advantages and targets are NumPy (:func:`coma_advantages`, with the readable loop
:func:`coma_advantages_reference`).

The PPO learner hosts it (:class:`~marl.learners.ppo_learner.PPOLearner`: actor, action masking, controller,
fresh-episode batches, checkpoints), but COMA needs its own learner: the PPO critic is a ``V`` with one output
fed the state, while COMA's has one output per action, is fed the other agents' actions, is trained towards a
target critic's TD(lambda) targets and yields the advantage together with the policy's probabilities.
Differences from pymarl: one gradient step per batch on ``policy + critic`` loss (the two touch disjoint
parameters, so with Adam this is two optimizers of one learning rate, but gradients are clipped jointly)
instead of pymarl's backward sweep of one critic step per time slot; the advantage uses the critic before
the step; the target critic is copied every ``target_update_interval`` critic steps counted as pymarl does
(one per live time slot of each batch); an optional entropy bonus (0 in ``configs/algs/coma.yaml``).
As in pymarl, the policy acts and is scored with an epsilon floor, ``(1 - eps) pi + eps / |available|``
(the ``exploration`` section, eps annealed 0.5 -> 0.01 over 100k steps in ``coma.yaml``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config.schema import Config
from marl.controllers.mac import epsilon_at, input_dim
from marl.controllers.policy_controller import PolicyController
from marl.envs.base import EnvInfo
from marl.learners.optim import clip_and_apply
from marl.learners.ppo_learner import PPOLearner
from marl.learners.targets import bucketed_slots, td_lambda_targets_reference
from marl.modules.critics import COMACritic
from marl.modules.policies import PolicyNet, floored_categorical, floored_categorical_logp_entropy
from marl.registry import register
from marl.utils.ms import Tensor, jit, ms, nn, ops

STAT_NAMES = ("loss", "policy_loss", "critic_loss", "entropy", "grad_norm")


def coma_critic_inputs(
    state_BTS: np.ndarray, obs_BTNO: np.ndarray, actions_onehot_BTNA: np.ndarray
) -> np.ndarray:
    """Critic rows ``(B, T, N, S + O + 2 N A + N)``: state, own observation, the joint action with the agent's
    own action zeroed, the previous joint action (zeros at ``t = 0``) and the agent id one-hot."""
    b, t, n, a = actions_onehot_BTNA.shape
    joint = np.broadcast_to(actions_onehot_BTNA.reshape(b, t, 1, n * a), (b, t, n, n * a))
    others = joint * np.repeat(1.0 - np.eye(n, dtype=np.float32), a, axis=1)[None, None]
    last = np.concatenate([np.zeros_like(joint[:, :1]), joint[:, :-1]], axis=1)
    parts = [np.broadcast_to(state_BTS[:, :, None], (b, t, n, state_BTS.shape[2])), obs_BTNO, others, last]
    parts.append(np.broadcast_to(np.eye(n, dtype=np.float32), (b, t, n, n)))
    return np.ascontiguousarray(np.concatenate(parts, axis=3), dtype=np.float32)


def coma_advantages(pi_BTNA: np.ndarray, q_BTNA: np.ndarray, actions_BTN1: np.ndarray) -> np.ndarray:
    """``Q_a(s, u)[u_a] - sum_u' pi_a(u') Q_a(s, u_-a, u')`` for every transition and agent ``(B, T, N)``."""
    q_taken = np.take_along_axis(q_BTNA, actions_BTN1, axis=3)[..., 0]
    return q_taken - (pi_BTNA * q_BTNA).sum(axis=3)


def coma_advantages_reference(
    pi_BTNA: np.ndarray, q_BTNA: np.ndarray, actions_BTN1: np.ndarray
) -> np.ndarray:
    """The readable form of :func:`coma_advantages`: one agent and one counterfactual action at a time."""
    b, t, n, a = q_BTNA.shape
    adv = np.zeros((b, t, n), np.float64)
    for i in range(b):
        for j in range(t):
            for k in range(n):
                baseline = sum(pi_BTNA[i, j, k, u] * q_BTNA[i, j, k, u] for u in range(a))
                adv[i, j, k] = q_BTNA[i, j, k, actions_BTN1[i, j, k, 0]] - baseline
    return adv


class COMANets(nn.Cell):
    """Actor, critic and target critic under one parent Cell (unique parameter names)."""

    def __init__(self, actor: PolicyNet, critic: COMACritic, target_critic: COMACritic) -> None:
        super().__init__()
        self.actor, self.critic, self.target_critic = actor, critic, target_critic


@register("learner", "coma")
class COMALearner(PPOLearner):
    """COMA (Foerster et al. 2018); see the module docstring. One update per ``learner.batch_size``
    episodes."""

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        if not info.discrete:
            raise ValueError(
                "coma needs discrete actions (EnvInfo.discrete=True): its critic values each action"
            )
        lc = cfg.learner
        if not 0.0 <= lc.td_lambda <= 1.0 or lc.target_update_interval < 1:
            raise ValueError(
                f"coma needs 0 <= td_lambda <= 1 and target_update_interval >= 1, got {lc.td_lambda}, "
                f"{lc.target_update_interval}"
            )
        one_step = replace(lc, ppo_epochs=1, num_minibatches=1, value_clip=0.0)
        super().__init__(info, replace(cfg, learner=one_step))
        self.critic_steps, self.last_target_update = 0, 0
        self._hard_update()

    def _make_nets(self, info: EnvInfo, cfg: Config) -> nn.Cell:
        a, n, na = cfg.agent, info.n_agents, info.n_actions
        actor = PolicyNet(a.name, input_dim(info, a), a.hidden_dim, na, True)
        c_in = info.state_shape + info.obs_shape + 2 * n * na + n
        h = cfg.learner.critic_hidden_dim
        target = COMACritic(c_in, h, na)
        for p in target.trainable_params():
            p.requires_grad = False
        return COMANets(actor, COMACritic(c_in, h, na), target)

    def _hard_update(self) -> None:
        for tp, p in zip(
            self.nets.target_critic.get_parameters(), self.nets.critic.get_parameters(), strict=True
        ):
            ops.assign(tp, p)

    def _make_graphs(self):  # noqa: ANN202 (returns two compiled functions)
        lc, nets, optimizer = self.cfg.learner, self.nets, self.optimizer
        ent_coef, v_coef, max_norm = float(lc.entropy_coef), float(lc.value_coef), float(lc.grad_norm_clip)
        self.params = [p for p in self.params if p.requires_grad]

        def evaluate(actor_in, critic_in, avail, eps):
            logits = nets.actor.unroll(actor_in, need_grad=False)[:, :-1]
            pi = floored_categorical(logits, avail[:, :-1], eps)
            return pi, nets.critic(critic_in[:, :-1]), nets.target_critic(critic_in)

        def loss_fn(actor_in, critic_in, avail, actions, adv, targets, mask_BT1, eps):
            logp, entropy = floored_categorical_logp_entropy(
                nets.actor.unroll(actor_in)[:, :-1], avail[:, :-1], actions, eps
            )
            q_taken = ops.gather_elements(nets.critic(critic_in[:, :-1]), 3, actions).squeeze(3)
            mask = ops.broadcast_to(mask_BT1, logp.shape)
            n = mask.sum()
            policy_loss = -(logp * adv * mask).sum() / n
            td = (q_taken - targets) * mask
            critic_loss = (td * td).sum() / n
            ent = (entropy * mask).sum() / n
            loss = policy_loss + v_coef * critic_loss - ent_coef * ent
            return loss, ops.stack([policy_loss, critic_loss, ent])

        self.loss_fn = loss_fn
        grad_fn = ms.value_and_grad(loss_fn, None, weights=self.params, has_aux=True)

        def step(actor_in, critic_in, avail, actions, adv, targets, mask, eps):
            (loss, stats), grads = grad_fn(actor_in, critic_in, avail, actions, adv, targets, mask, eps)
            grad_norm = clip_and_apply(optimizer, grads, max_norm)
            return ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)])

        return (jit(evaluate), jit(step)) if lc.use_jit else (evaluate, step)

    def _coma_arrays(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """PPO's arrays with COMA's critic rows and the actions of every slot, cut to the bucketed length."""
        arr = self._arrays(batch)
        onehot = np.asarray(batch["actions_onehot"], np.float32)
        arr["critic_in"] = coma_critic_inputs(np.asarray(batch["state"], np.float32), batch["obs"], onehot)
        arr["actions_all"] = np.asarray(batch["actions"], np.int64)
        cut = bucketed_slots(batch["filled"], self.t_slots, self.cfg.learner.time_bucket)
        slots = ("actor_in", "critic_in", "avail", "actions_all")
        return {k: np.ascontiguousarray(v[:, : cut if k in slots else cut - 1]) for k, v in arr.items()}

    def policy_epsilon(self, t_env: int) -> float:
        """The policy's epsilon floor at ``t_env`` (pymarl's COMA); 0.0 without an exploration section."""
        return 0.0 if self.cfg.exploration is None else epsilon_at(self.cfg.exploration, t_env)

    def advantages_and_targets(
        self, batch: EpisodeBatch, epsilon: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, dict]:
        """Masked counterfactual advantages and TD(lambda) critic targets ``(B, T-1, N)`` of ``batch``, with
        the arrays they came from (the policy ``pi`` with its ``epsilon`` floor, the critic ``q`` and the
        step's inputs)."""
        lc, arr = self.cfg.learner, self._coma_arrays(batch)
        ins = [Tensor.from_numpy(arr[k]) for k in ("actor_in", "critic_in", "avail")]
        pi, q, target_q = (x.asnumpy() for x in self._eval(*ins, Tensor(epsilon, ms.float32)))
        target_taken = np.take_along_axis(target_q, arr["actions_all"], axis=3)[..., 0]
        targets = td_lambda_targets_reference(
            arr["reward"], arr["terminated"], arr["mask"], target_taken, lc.gamma, lc.td_lambda
        )
        adv = coma_advantages(pi, q, arr["actions"]) * arr["mask"]
        return adv.astype(np.float32), targets.astype(np.float32), {**arr, "pi": pi, "q": q}

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """One actor + critic step on a batch of fresh episodes; copies the target critic on schedule."""
        eps = self.policy_epsilon(t_env)
        adv, targets, arr = self.advantages_and_targets(batch, eps)
        mask = np.broadcast_to(arr["mask"], adv.shape) > 0
        self._hist = (mask, {"advantage": adv, "q_taken": adv + (arr["pi"] * arr["q"]).sum(axis=3)})
        keys = ("actor_in", "critic_in", "avail", "actions")
        ins = [Tensor.from_numpy(arr[k]) for k in keys] + [Tensor.from_numpy(x) for x in (adv, targets)]
        out = self._step(*ins, Tensor.from_numpy(arr["mask"]), Tensor(eps, ms.float32)).asnumpy()
        self.train_steps += 1
        self.critic_steps += int((arr["mask"].sum(axis=(0, 2)) > 0).sum())  # pymarl: one per live slot
        if self.critic_steps - self.last_target_update >= self.cfg.learner.target_update_interval:
            self._hard_update()
            self.last_target_update = self.critic_steps
        stats = {k: float(v) for k, v in zip(STAT_NAMES, out, strict=True)}
        stats.update(advantage_mean=float(adv[mask].mean()), target_mean=float(targets[mask].mean()))
        return stats

    def make_controller(self, seed: int) -> PolicyController:
        """The NumPy controller that samples this learner's policy with the same epsilon floor."""
        weights, explore = self.actor_weights(), self.cfg.exploration
        return PolicyController(self.info, self.cfg.agent, seed=seed, weights=weights, exploration=explore)

    def state_dict(self) -> dict[str, np.ndarray]:
        """PPO's state plus the critic-step counters of the target schedule."""
        sd = super().state_dict()
        sd["counters/critic_steps"] = np.array(self.critic_steps, np.int64)
        sd["counters/last_target_update"] = np.array(self.last_target_update, np.int64)
        return sd

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` saved (same config and EnvInfo)."""
        super().load_state_dict(sd)
        self.critic_steps = int(sd["counters/critic_steps"])
        self.last_target_update = int(sd["counters/last_target_update"])
