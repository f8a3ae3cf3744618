"""On-policy actor-critic learner: MAPPO / IPPO / single-agent PPO (``learner.name: ppo``).

PPO's clipped surrogate (Schulman et al. 2017, "Proximal Policy Optimization Algorithms") with GAE
(Schulman et al. 2016), an entropy bonus, a clipped value loss and value normalisation, as MAPPO uses them
(Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games"). One config key
picks the critic: ``learner.critic: central`` is MAPPO (``V(s, agent id)`` on the global state),
``local`` is IPPO (de Witt et al. 2020, ``V`` on the agent's own input); with a 1-agent environment (the
Gymnasium adapter) ``local`` is plain PPO. Actors share parameters across agents (``agent.name``: ``rnn`` or
``mlp``); unavailable actions are masked out of the logits; continuous actions use a Gaussian head.

A ``train`` call gets ``learner.batch_size`` fresh episodes collected with exactly the current weights:
1. a jitted evaluation (one per part of a split update) gives the old log-probs and values (no stored
   behaviour statistics needed);
2. NumPy computes GAE on de-normalised values, updates the running return statistics and normalises
   the value targets and the advantages;
3. ``ppo_epochs`` passes over ``num_minibatches`` random minibatches of whole episodes, each one jitted
   step (loss, ``value_and_grad``, clipping, Adam). The RNN actor is trained by BPTT over the whole padded
   episode (the "recurrent chunk" is the episode: ``episode_limit + 1`` slots, so shapes never change).

:class:`marl.learners.pg_learner.PGLearner` reuses everything here with the REINFORCE objective.
"""

from __future__ import annotations

import time

import numpy as np

from marl.buffers.episode import EpisodeBatch, check_slots
from marl.config.schema import Config
from marl.controllers.mac import build_agent_inputs, input_dim
from marl.controllers.policy_controller import PolicyController
from marl.envs.base import EnvInfo
from marl.learners.compiled_lengths import LengthPlanner
from marl.learners.length_groups import GroupSplit, group_tensors, grouped_update, length_group_graphs
from marl.learners.optim import clip_and_apply, make_optimizer
from marl.learners.returns import RunningMeanStd, gae
from marl.learners.targets import bucketed_slots, check_time_bucket, transition_mask
from marl.modules.policies import (
    ActorCritic,
    CentralValueNet,
    PolicyNet,
    ValueNet,
    categorical_logp_entropy,
    gaussian_logp_entropy,
)
from marl.registry import register
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

ALL = slice(None)
SLOT_KEYS = ("actor_in", "critic_in", "avail")  # arrays over all T slots (the rest cover T - 1 transitions)
STAT_NAMES = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm")
CRITICS = ("central", "local")
AGENTS = ("rnn", "mlp")


@register("learner", "ppo")
class PPOLearner(GroupSplit):
    """MAPPO / IPPO / PPO by configuration (see the module docstring for papers and the procedure)."""

    on_policy = True
    objective = "clip"  # "pg" in PGLearner

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc, a = cfg.learner, cfg.agent
        if lc.critic not in CRITICS:
            raise ValueError(f"learner.critic={lc.critic!r}; allowed: {', '.join(CRITICS)}")
        if a.name not in AGENTS:
            raise ValueError(f"agent.name={a.name!r} for an on-policy learner; allowed: {', '.join(AGENTS)}")
        if lc.ppo_epochs < 1 or lc.num_minibatches < 1 or lc.batch_size % lc.num_minibatches:
            raise ValueError(
                f"need ppo_epochs >= 1 and num_minibatches >= 1 dividing batch_size; got "
                f"{lc.ppo_epochs}, {lc.num_minibatches}, batch_size {lc.batch_size}"
            )
        if lc.batch_size % cfg.runner.batch_size_run:
            raise ValueError(
                f"learner.batch_size ({lc.batch_size}) must be a multiple of runner.batch_size_run "
                f"({cfg.runner.batch_size_run}): every train call must see the same batch shape"
            )
        if not (0.0 <= lc.gae_lambda <= 1.0 and lc.ppo_clip > 0.0 and lc.value_clip >= 0.0):
            raise ValueError("need 0 <= gae_lambda <= 1, ppo_clip > 0 and value_clip >= 0")
        self.info, self.cfg = info, cfg
        self.t_slots = info.episode_limit + 1
        check_time_bucket(lc.time_bucket)
        self.discrete = bool(info.discrete)
        self.nets = self._make_nets(info, cfg)
        self.params = list(self.nets.trainable_params())
        self.optimizer = make_optimizer(lc.optimizer, self.params, lc.lr, lc.optim_alpha, lc.optim_eps)
        self.value_norm = RunningMeanStd()
        self.train_steps = 0
        self._hist: tuple[np.ndarray, dict[str, np.ndarray]] | None = None  # for histograms()
        self._eval, self._step = self._make_graphs()
        own_loss = type(self)._make_graphs is PPOLearner._make_graphs  # COMA brings its own loss
        self.rows_splittable = own_loss and lc.num_minibatches == 1  # learner.update_rows can split it
        self._groups = length_group_graphs(  # the SMAC setting, one minibatch per epoch: the whole batch
            lc,
            self.loss_fn,
            self.params,
            self.optimizer,
            own_loss,
            lc.num_minibatches == 1,
        )
        self.length_plan = LengthPlanner(info.n_agents, lc.pad_to_compiled, lc.use_jit)  # graph lengths

    def _make_nets(self, info: EnvInfo, cfg: Config) -> nn.Cell:
        """The actor and critic (``nets.actor`` is the policy; a subclass may bring another critic)."""
        lc, a = cfg.learner, cfg.agent
        actor = PolicyNet(
            a.name, input_dim(info, a), a.hidden_dim, info.n_actions, self.discrete, lc.init_log_std
        )
        if lc.critic == "central":
            critic = CentralValueNet(info.state_shape, info.n_agents, a.obs_agent_id, lc.critic_hidden_dim)
        else:
            critic = ValueNet(info.obs_shape + (info.n_agents if a.obs_agent_id else 0), lc.critic_hidden_dim)
        return ActorCritic(actor, critic)

    # -------------------------------------------------------------------------------------- graphs
    def _dist(self, out_BTNA: ms.Tensor, avail_BTNA: ms.Tensor, actions: ms.Tensor):  # noqa: ANN202
        if self.discrete:
            return categorical_logp_entropy(out_BTNA, avail_BTNA, actions)
        return gaussian_logp_entropy(out_BTNA, self.nets.actor.log_std, actions)

    def _make_graphs(self):  # noqa: ANN202 (returns two compiled functions)
        lc, nets, optimizer, pg = self.cfg.learner, self.nets, self.optimizer, self.objective == "pg"
        clip, vclip = float(lc.ppo_clip), float(lc.value_clip)
        ent_coef, v_coef, max_norm = float(lc.entropy_coef), float(lc.value_coef), float(lc.grad_norm_clip)
        dist = self._dist

        def evaluate(actor_in, critic_in, avail, actions):
            out = nets.actor.unroll(actor_in, need_grad=False)
            logp, entropy = dist(out[:, :-1], avail[:, :-1], actions)
            return logp, entropy, nets.critic(critic_in)

        def loss_fn(actor_in, critic_in, avail, actions, old_logp, adv, ret, old_v, mask_BT1, n_valid=None):
            logp, entropy = dist(nets.actor.unroll(actor_in)[:, :-1], avail[:, :-1], actions)
            v = nets.critic(critic_in)[:, :-1]
            mask = ops.broadcast_to(mask_BT1, logp.shape)
            n = mask.sum() if n_valid is None else n_valid  # a group of a batch divides by the batch's count
            ratio = ops.exp(logp - old_logp)
            if pg:  # REINFORCE with a baseline: -log pi(a|s) * (G - V)
                policy_loss = -(logp * adv * mask).sum() / n
            else:  # clipped surrogate: zero gradient once the ratio leaves [1-eps, 1+eps] in adv's direction
                surr = ops.minimum(ratio * adv, ops.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv)
                policy_loss = -(surr * mask).sum() / n
            err = (v - ret) ** 2
            if vclip > 0.0:
                v_clipped = old_v + ops.clamp(v - old_v, -vclip, vclip)
                err = ops.maximum(err, (v_clipped - ret) ** 2)
            value_loss = 0.5 * (err * mask).sum() / n
            ent = (entropy * mask).sum() / n
            loss = policy_loss + v_coef * value_loss - ent_coef * ent
            approx_kl = ((ratio - 1.0 - (logp - old_logp)) * mask).sum() / n  # k3 estimator (Schulman 2020)
            clip_frac = ((ops.abs(ratio - 1.0) > clip).astype(ms.float32) * mask).sum() / n
            return loss, ops.stack([policy_loss, value_loss, ent, approx_kl, clip_frac])

        self.loss_fn = loss_fn  # the pure loss (tests check its gradients)
        grad_fn = ms.value_and_grad(loss_fn, None, weights=self.params, has_aux=True)

        def step(idx, actor_in, critic_in, avail, actions, old_logp, adv, ret, old_v, mask):
            mb = [
                ops.gather(x, idx, 0)
                for x in (actor_in, critic_in, avail, actions, old_logp, adv, ret, old_v, mask)
            ]
            (loss, stats), grads = grad_fn(*mb)
            grad_norm = clip_and_apply(optimizer, grads, max_norm)
            return ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)])

        if lc.use_jit:
            return jit(evaluate), jit(step)
        return evaluate, step

    # ---------------------------------------------------------------------------------------- data
    def _arrays(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """The NumPy inputs of both graphs (actor/critic inputs, masks, actions) from a padded batch."""
        self._check_batch(batch)
        inputs = dict(zip((*SLOT_KEYS, "actions"), self._inputs(batch), strict=True))
        return inputs | self._transitions(batch)

    def _check_batch(self, batch: EpisodeBatch) -> None:
        """A batch of ``learner.batch_size`` episodes padded to ``episode_limit + 1`` slots, else an error."""
        b, _ = check_slots(batch, self.t_slots)
        if b != self.cfg.learner.batch_size:
            raise ValueError(f"batch holds {b} episodes; learner.batch_size is {self.cfg.learner.batch_size}")

    def _inputs(
        self, batch: EpisodeBatch, rows: np.ndarray | slice = ALL, slots: int = 0
    ) -> list[np.ndarray]:
        """(actor_in, critic_in, avail over ``slots`` slots, actions over ``slots - 1``) of the episodes
        ``rows`` (0 slots: all of them), built for those rows and slots only. The central critic's input is
        the state: :class:`CentralValueNet` adds the agent ids in the graph (repeating the state for every
        agent took 2.3 GiB a batch on bane_vs_bane)."""
        a = self.cfg.agent
        t = slots or self.t_slots
        obs = np.asarray(batch["obs"][rows, :t], np.float32)
        last = (batch["actions_onehot"] if self.discrete else batch["actions"])[rows, :t]
        actor_in = build_agent_inputs(obs, last, a.obs_last_action, a.obs_agent_id)
        if self.cfg.learner.critic == "central":  # the state (B, T, S): CentralValueNet adds the agent ids
            critic_in = np.asarray(batch["state"][rows, :t], np.float32)
        else:
            critic_in = build_agent_inputs(obs, None, False, a.obs_agent_id)
        avail = np.ascontiguousarray(batch["avail_actions"][rows, :t], np.int32)
        actions = np.ascontiguousarray(
            batch["actions"][rows, : t - 1], np.int64 if self.discrete else np.float32
        )
        return [np.ascontiguousarray(actor_in), np.ascontiguousarray(critic_in), avail, actions]

    def _transitions(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Reward, terminated and transition mask ``(B, T - 1, 1)`` of the whole batch (small arrays)."""
        mask = transition_mask(batch["filled"], batch["terminated"])
        if mask.sum() <= 0:
            raise ValueError("batch holds no transitions (filled mask is empty)")
        return {
            "reward": np.asarray(batch["reward"][:, :-1], np.float32),
            "terminated": np.asarray(batch["terminated"][:, :-1], np.float32),
            "mask": mask,
        }

    def _targets(self, arr: dict[str, np.ndarray], values_BTN: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Advantages and (de-normalised) return targets ``(B, T-1, N)``; PGLearner overrides this."""
        lc = self.cfg.learner
        return gae(arr["reward"], arr["terminated"], arr["mask"], values_BTN, lc.gamma, lc.gae_lambda)

    def _evaluate(
        self, batch: EpisodeBatch, parts: list, cut: int
    ) -> tuple[list[list[ms.Tensor]], np.ndarray, np.ndarray, np.ndarray]:
        """Each part's ``(rows, slots)`` input tensors, and the old log-probs, entropies ``(B, cut - 1, N)``
        and values ``(B, cut, N)`` of the whole batch from one no-grad evaluation per part (zero beyond a
        part's slots, which no loss reads). The evaluation's memory follows the part size; every part's
        inputs (the whole batch, each part over its own slots) are kept for the epochs."""
        n, inputs = self.info.n_agents, []
        logp, entropy = np.zeros((2, len(batch["filled"]), cut - 1, n), np.float32)
        values = np.zeros((len(batch["filled"]), cut, n), np.float32)
        for rows, t in parts:
            x = [Tensor.from_numpy(a) for a in self._inputs(batch, rows, t)]
            lp, en, v = (y.asnumpy() for y in self._eval(*x))
            logp[rows, : t - 1], entropy[rows, : t - 1], values[rows, :t] = lp, en, v
            inputs.append(x)
        return inputs, logp, entropy, values

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """Several epochs of minibatch updates on a batch of fresh on-policy episodes; returns mean stats."""
        lc, plan, start = self.cfg.learner, self.length_plan, time.perf_counter()
        self._check_batch(batch)
        # only the slots up to the longest episode (bucketed): exact, and far fewer unrolled steps; a
        # longer length already compiled where the planner says so (compiled_lengths.py)
        b, epochs = lc.batch_size, lc.ppo_epochs
        groups = self._groups and self._group_split(batch["filled"])
        if groups:  # each group's (row part's) inputs built and evaluated apart, then stepped every epoch
            groups = plan.groups(groups, repeats=epochs)
        need = bucketed_slots(batch["filled"], self.t_slots, lc.time_bucket)
        need = max([need, *(t for _, t in groups or [])])  # a group may run longer than the batch needs
        cut = plan.slots(("batch", b), b if groups else b * (1 + epochs), need)
        arr = {k: v[:, : cut - 1] for k, v in self._transitions(batch).items()}
        inputs, old_logp, entropy, v_raw = self._evaluate(batch, groups or [(ALL, cut)], cut)
        use_norm = lc.value_norm
        values = self.value_norm.denormalize(v_raw) if use_norm else v_raw
        adv, ret = self._targets(arr, values)
        mask = np.broadcast_to(arr["mask"], adv.shape) > 0
        self._hist = (mask, {"policy_entropy": entropy, "advantage": adv, "value": values[:, :-1]})
        old_v = v_raw[:, :-1]  # the critic's own outputs: the value clip bounds how far they move
        if use_norm:  # targets use the statistics including this batch (MAPPO's ValueNorm order)
            self.value_norm.update(ret[mask])
            ret = self.value_norm.normalize(ret)
        if lc.adv_norm:
            sel = adv[mask]
            adv = (adv - sel.mean()) / (sel.std() + 1e-8)
        adv = np.where(mask, adv, 0.0).astype(np.float32)
        host = [old_logp, adv, ret, old_v, arr["mask"]]
        if groups:  # one minibatch per epoch: the batch in parts (length groups, update_rows)
            parts = [[*x, *group_tensors(host, rows, t)] for x, (rows, t) in zip(inputs, groups, strict=True)]
            n_valid = Tensor(np.float32(mask.sum()))
            outs = [grouped_update(self._groups, parts, n_valid) for _ in range(epochs)]
        else:
            whole = [*inputs[0], *group_tensors(host, ALL, cut)]
            n_mb = lc.num_minibatches
            rng = np.random.default_rng([self.cfg.seed, self.train_steps])  # reproducible across resumes
            outs = []
            for _ in range(epochs):
                perm = rng.permutation(b).astype(np.int32)
                for chunk in perm.reshape(n_mb, b // n_mb):
                    outs.append(self._step(Tensor.from_numpy(np.ascontiguousarray(chunk)), *whole).asnumpy())
        plan.record(time.perf_counter() - start)
        self.train_steps += 1
        stats = {k: float(v) for k, v in zip(STAT_NAMES, np.mean(outs, axis=0), strict=True)}
        stats["value_target_mean"] = float(self.value_norm.mean) if use_norm else float(ret[mask].mean())
        return stats

    def histograms(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Per-transition distributions of the batch the last :meth:`train` used (``batch`` is that batch):
        the policy's entropy and the critic's value before the update, and the advantages (GAE, or G - V
        for the policy gradient) before normalisation."""
        if self._hist is None:
            return {}
        mask, arrays = self._hist
        return {k: v[mask] for k, v in arrays.items()}

    # ------------------------------------------------------------------------------ weights and state
    def make_controller(self, seed: int) -> PolicyController:
        """The NumPy controller that samples from this learner's policy."""
        return PolicyController(self.info, self.cfg.agent, seed=seed, weights=self.actor_weights())

    def actor_weights(self) -> dict[str, np.ndarray]:
        """Actor weights (``agent.*`` trunk, ``log_std``) for :class:`PolicyController.load_weights`."""
        return params_to_numpy(self.nets.actor)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Networks, optimizer state, value-normaliser statistics and counters (for checkpoints)."""
        sd = save_training_state(self.nets, {"": self.optimizer})
        sd["value_norm"] = self.value_norm.state()
        sd["counters/train_steps"] = np.array(self.train_steps, np.int64)
        return sd | self.length_plan.state()

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` saved (same config and EnvInfo)."""
        load_training_state(self.nets, {"": self.optimizer}, sd)
        self.value_norm.load(sd["value_norm"])
        self.train_steps = int(sd["counters/train_steps"])
        self.length_plan.load_state(sd)
