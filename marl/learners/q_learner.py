"""Value-based multi-agent learner: IQL (mixer ``none``), VDN (``vdn``) and QMIX (``qmix``).

The loss is pymarl's QLearner (Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for
Deep Multi-Agent Reinforcement Learning"; VDN: Sunehag et al. 2018; IQL: Tan 1993) with pymarl2's
TD(lambda) targets and 0.5 * masked MSE (Hu et al. 2021, "Rethinking the Implementation Tricks and
Monotonicity Constraint in Cooperative Multi-Agent Reinforcement Learning"): double-Q argmax from
the online network, a target agent and target mixer, BPTT over the whole padded episode.

The whole step -- both unrolls, targets, loss, ``value_and_grad``, gradient clipping and the optimizer --
is one ``ms.jit`` graph (``use_jit``) or the same Python function run eagerly. Target-update timing and
``.asnumpy()`` stay outside the graph. Like pymarl (``batch.max_t_filled()``), the step runs only over the
slots up to the batch's longest episode, rounded up to a multiple of ``learner.time_bucket`` so that a
handful of static shapes cover every batch (MindSpore compiles each shape once and caches it). Cutting
all-padding slots changes neither the loss nor the gradient: the RNN is causal and padding is masked.
With ``learner.length_groups: 2`` the batch's longest eighth trains apart from the rest, each part over its
own length, so a few episodes at the time limit do not pad the whole batch
(:mod:`marl.learners.length_groups`).
Long episodes train with chunked truncated BPTT (:mod:`marl.learners.q_chunked`).
"""

from __future__ import annotations

import time

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config.schema import Config
from marl.controllers.mac import MultiAgentController, input_dim
from marl.envs.base import EnvInfo
from marl.learners.compiled_lengths import LengthPlanner
from marl.learners.host_buffers import HostBuffers
from marl.learners.length_groups import LengthGroups, length_group_graphs
from marl.learners.optim import clip_and_apply, make_optimizer
from marl.learners.q_arrays import q_step_arrays
from marl.learners.q_chunked import HYBRID_MAX_SLOTS, ChunkedBPTT, resolve_bptt_chunk
from marl.learners.targets import (
    bucketed_slots,
    check_time_bucket,
    chosen_q_loss,
    lambda_return_matrices,
    make_bootstrap,
    mixer_uses_actions,
    td_lambda_targets,
)
from marl.modules.agents import RNNAgent
from marl.modules.gru_kernel import GRUProjSequenceKernel
from marl.registry import build, get, names, register
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

STAT_NAMES = ("loss", "td_error_abs", "q_taken_mean", "target_mean", "grad_norm")


class QNets(nn.Cell):
    """Online and target agent/mixer under one parent Cell, so parameter names are unique."""

    def __init__(
        self, agent: nn.Cell, target_agent: nn.Cell, mixer: nn.Cell | None, target_mixer: nn.Cell | None
    ) -> None:
        super().__init__()
        self.agent, self.target_agent = agent, target_agent
        self.mixer, self.target_mixer = mixer, target_mixer

    def online(self) -> list[nn.Cell]:
        return [self.agent] + ([self.mixer] if self.mixer is not None else [])

    def target(self) -> list[nn.Cell]:
        return [self.target_agent] + ([self.target_mixer] if self.target_mixer is not None else [])


def build_agent(info: EnvInfo, cfg: Config) -> nn.Cell:
    """A fresh agent network of ``cfg.agent`` for this env's inputs and actions."""
    a = cfg.agent
    in_dim = input_dim(info, a)
    return build("agent", a.name, input_dim=in_dim, hidden_dim=a.hidden_dim, n_actions=info.n_actions)


def q_train_step(loss_fn, params: list, optimizer: nn.Cell, clip: float, use_jit: bool):  # noqa: ANN001, ANN201
    """``(train_step, grad_fn)`` for a Q-learner loss ``loss_fn(*batch) -> (loss, stats)``: the step takes the
    gradient, clips and applies it (``clip_and_apply``) and returns ``[loss, *stats, grad_norm]``."""
    grad_fn = ms.value_and_grad(loss_fn, None, weights=params, has_aux=True)

    def train_step(
        inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
    ):
        (loss, stats), grads = grad_fn(
            inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
        )
        grad_norm = clip_and_apply(optimizer, grads, clip)
        return ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)])

    return (jit(train_step) if use_jit else train_step), grad_fn


def _build_nets(info: EnvInfo, cfg: Config) -> QNets:
    m = cfg.mixer
    mixers = ["none", *names("mixer")]
    if m is None or m.name not in mixers:
        got = "no mixer section" if m is None else f"unknown mixer {m.name!r}"
        raise ValueError(f"{got} for {cfg.learner.name}; mixer.name must be one of {', '.join(mixers)}")

    def make_agent() -> nn.Cell:
        return build_agent(info, cfg)

    def make_mixer() -> nn.Cell | None:
        if m.name == "none":
            return None
        kw = {"embed_dim": m.embed_dim, "hypernet_layers": m.hypernet_layers, "hypernet_dim": m.hypernet_dim}
        if mixer_uses_actions(get("mixer", m.name)):
            kw["n_actions"] = info.n_actions
        return build("mixer", m.name, n_agents=info.n_agents, state_dim=info.state_shape, **kw)

    return QNets(make_agent(), make_agent(), make_mixer(), make_mixer())


@register("learner", "q_learner")
class QLearner(ChunkedBPTT, LengthGroups):
    """IQL / VDN / QMIX learner over padded episode batches (see the module docstring for papers)."""

    stat_names = STAT_NAMES  # what the step returns, in order (a subclass with another loss extends it)

    def _make_nets(self, info: EnvInfo, cfg: Config) -> QNets:
        """The online and target networks (a subclass adds its own; ``online()``/``target()`` pair them)."""
        return _build_nets(info, cfg)

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc = cfg.learner
        if not info.discrete:
            raise ValueError("q_learner needs discrete actions (EnvInfo.discrete=True)")
        if not 0.0 <= lc.target_update_tau <= 1.0:
            raise ValueError(f"target_update_tau must be in [0, 1], got {lc.target_update_tau}")
        if lc.target_update_tau == 0.0 and lc.target_update_interval < 1:
            raise ValueError(f"target_update_interval must be >= 1, got {lc.target_update_interval}")
        self.info, self.cfg = info, cfg
        self.t_slots = info.episode_limit + 1
        self.nets = self._make_nets(info, cfg)
        self._target_pairs = [
            (tp, dict(on.parameters_and_names())[name])
            for on, tg in zip(self.nets.online(), self.nets.target(), strict=True)
            for name, tp in tg.parameters_and_names()
        ]
        for tp, _ in self._target_pairs:
            tp.requires_grad = False
        self.params = [p for cell in self.nets.online() for p in cell.trainable_params()]
        self.optimizer = make_optimizer(lc.optimizer, self.params, lc.lr, lc.optim_alpha, lc.optim_eps)
        self.train_steps = 0
        self.last_target_update_episode = 0
        self._hard_update()
        check_time_bucket(lc.time_bucket)
        self._lambda_consts: dict[int, tuple[ms.Tensor, ms.Tensor]] = {}
        self.bptt_chunk = resolve_bptt_chunk(
            lc.bptt_chunk,
            info.episode_limit,
            bool(getattr(self.nets.agent, "recurrent", False)),
            compiled=isinstance(getattr(self.nets.agent, "sequence", None), GRUProjSequenceKernel),
        )
        if self.bptt_chunk and not isinstance(self.nets.agent, RNNAgent):
            raise ValueError(
                f"learner.bptt_chunk={lc.bptt_chunk} needs an RNNAgent-based agent "
                f"(rnn, dueling_rnn), got {cfg.agent.name!r}; use bptt_chunk=-1"
            )
        # auto chunks + buckets: short batches take the whole-episode step, long ones the chunked one
        auto_hybrid = lc.bptt_chunk == 0 and self.bptt_chunk and lc.time_bucket > 0
        self.hybrid_slots = HYBRID_MAX_SLOTS if auto_hybrid else 0
        if self.bptt_chunk:
            self._forward, self._targets_fn, self._grad_fn, self._apply = self._make_chunked()
        if not self.bptt_chunk or self.hybrid_slots:
            self._step, self._whole_grad_fn = self._make_step()
        own_loss = type(self)._make_step is QLearner._make_step  # WQMIX and QTRAN bring their own
        self.rows_splittable = own_loss and not self.bptt_chunk  # learner.update_rows can split its update
        self._groups = length_group_graphs(
            lc, self._loss_fn(), self.params, self.optimizer, own_loss, not self.bptt_chunk
        )
        self._soft = self._make_soft_update()
        self.length_plan = LengthPlanner(info.n_agents, lc.pad_to_compiled, lc.use_jit)  # graph lengths
        self._host = HostBuffers()  # the train call's large input arrays, reused from call to call
        self._rows_inputs = own_loss and hasattr(self.nets.agent, "unroll_rows")  # time-major rows

    # ------------------------------------------------------------------------------- the train step
    def _make_step(self):  # noqa: ANN202 (returns a compiled function)
        lc = self.cfg.learner
        clip = float(lc.grad_norm_clip)
        return q_train_step(self._loss_fn(), self.params, self.optimizer, clip, lc.use_jit)

    def _loss_fn(self):  # noqa: ANN202 (a graph function)
        """The whole-episode loss over padded episodes: ``loss_fn(*batch, m_t, pow_vec, n_valid=None)``
        (``n_valid``: the transition count to divide by, when the batch is a part of one)."""
        lc, nets = self.cfg.learner, self.nets
        agent, target_agent = nets.agent, nets.target_agent
        mixer, target_mixer = nets.mixer, nets.target_mixer
        gamma, lam, double_q = float(lc.gamma), float(lc.td_lambda), bool(lc.double_q)
        bootstrap = make_bootstrap(target_mixer, double_q)
        uses_actions = mixer_uses_actions(mixer)

        def loss_fn(
            inputs_BTNI,
            avail_BTNA,
            actions_BTN1,
            reward_BT1,
            term_BT1,
            mask_BT1,
            state_BTS,
            m_t,
            pow_vec,
            n_valid=None,
        ):
            if inputs_BTNI.ndim == 2:  # time-major rows (T*B*N, I): see QLearner._arrays
                b, t, n = avail_BTNA.shape[:3]
                q_BTNA = agent.unroll_rows(inputs_BTNI, b, t, n)
                target_q_BTNA = ops.stop_gradient(target_agent.unroll_rows(inputs_BTNI, b, t, n, False))
            else:
                q_BTNA = agent.unroll(inputs_BTNI)
                target_q_BTNA = ops.stop_gradient(target_agent.unroll(inputs_BTNI, need_grad=False))
            target_max = bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS)
            targets = ops.stop_gradient(
                td_lambda_targets(reward_BT1, term_BT1, mask_BT1, target_max, m_t, pow_vec, gamma, lam)
            )
            return chosen_q_loss(
                mixer,
                uses_actions,
                q_BTNA[:, :-1],
                actions_BTN1,
                avail_BTNA[:, :-1],
                state_BTS[:, :-1],
                targets,
                mask_BT1,
                n_valid,
            )

        return loss_fn

    def _arrays(
        self,
        batch: EpisodeBatch,
        t: int | None = None,
        rows: np.ndarray | None = None,
        part: int | None = None,
    ) -> list[np.ndarray]:
        """:func:`~marl.learners.q_arrays.q_step_arrays` for this learner: with ``part`` into its reused
        host arrays, agent inputs as time-major rows where its own loss takes them so."""
        host = None if part is None else self._host
        rows_inputs = part is not None and self._rows_inputs
        return q_step_arrays(batch, self.info, self.cfg.agent, self.t_slots, t, rows, host, part, rows_inputs)

    def train_slots(self, filled_BT1: np.ndarray) -> int:
        """Slots the whole-episode step runs over for a batch with this ``filled`` mask
        (:func:`~marl.learners.targets.bucketed_slots` with ``learner.time_bucket``)."""
        return bucketed_slots(filled_BT1, self.t_slots, self.cfg.learner.time_bucket)

    def _lambda_tensors(self, t_slots: int) -> tuple[ms.Tensor, ms.Tensor]:
        """The TD(lambda) constants for ``t_slots`` slots (built once per length)."""
        if t_slots not in self._lambda_consts:
            lc = self.cfg.learner
            m_np, pow_np = lambda_return_matrices(t_slots, float(lc.gamma), float(lc.td_lambda))
            self._lambda_consts[t_slots] = (Tensor(m_np), Tensor(pow_np))
        return self._lambda_consts[t_slots]

    def _tensors(self, batch: EpisodeBatch) -> list[ms.Tensor]:
        """NumPy batch -> the whole-episode step's input tensors, cut to :meth:`train_slots` slots, plus the
        TD(lambda) constants for that length (the one NumPy -> Tensor crossing per train call)."""
        return self._cut(batch, self.train_slots(batch["filled"]))

    def _cut(
        self, batch: EpisodeBatch, t: int, rows: np.ndarray | None = None, part: int | None = None
    ) -> list[ms.Tensor]:
        """:meth:`_arrays` of the episodes ``rows`` over ``t`` slots as tensors, plus the TD(lambda)
        constants for ``t`` slots (the one NumPy -> Tensor crossing per train call); ``part``: see
        :meth:`_arrays` (the tensors share the reused host arrays)."""
        arrays = self._arrays(batch, t, rows, part)
        return [Tensor.from_numpy(x) for x in arrays] + list(self._lambda_tensors(t))

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """One gradient step on ``batch``; updates targets on schedule. Returns the step's statistics."""
        start, plan = time.perf_counter(), self.length_plan
        if self._use_chunks(batch):
            loss, stats, grads = self._chunked_loss_and_grads(batch)
            grad_norm = self._apply(*grads)
            out = ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)]).asnumpy()
        elif self._groups and (groups := self._group_split(batch["filled"])):
            out = self._grouped_step(batch, plan.groups(groups))
        else:
            b = batch["filled"].shape[0]
            t = plan.slots(("batch", b), b, self.train_slots(batch["filled"]))
            out = self._step(*self._cut(batch, t, part=0)).asnumpy()
        plan.record(time.perf_counter() - start)
        self.train_steps += 1
        tau = self.cfg.learner.target_update_tau
        if tau > 0.0:
            self._soft()
        elif (episode - self.last_target_update_episode) / self.cfg.learner.target_update_interval >= 1.0:
            self._hard_update()
            self.last_target_update_episode = episode
        return {k: float(v) for k, v in zip(self.stat_names, out, strict=True)}

    # --------------------------------------------------------------------------------------- targets
    def _hard_update(self) -> None:
        """Copy the online agent/mixer into the targets."""
        for tp, p in self._target_pairs:
            ops.assign(tp, p)  # in place: set_data is not seen by already compiled graphs

    def _make_soft_update(self):  # noqa: ANN202
        """Polyak update ``target <- tau * online + (1 - tau) * target`` (one graph when jitted)."""
        tau, pairs = float(self.cfg.learner.target_update_tau), self._target_pairs

        def soft_update():
            for tp, p in pairs:
                ops.assign(tp, tau * p + (1.0 - tau) * tp)
            return True

        return jit(soft_update) if self.cfg.learner.use_jit else soft_update

    def histograms(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Distributions the trainer logs to MindInsight every ``log.histogram_interval`` env steps."""
        return {"q_taken": self.q_values_for_histogram(batch)}

    def q_values_for_histogram(self, batch: EpisodeBatch) -> np.ndarray:
        """Online Q-values of the actions taken at every real transition of ``batch`` (1-D, for logging
        histograms). Runs eagerly (no extra compile); meant for occasional calls."""
        inputs, _, actions, _, _, mask, _ = self._arrays(batch)
        if self.bptt_chunk:  # chunked no-grad pass (a whole-episode unroll would be hundreds of steps)
            q_BTNA = self._forward_chunks(inputs, batch["filled"])[0]
        else:
            q_BTNA = self.nets.agent.unroll(Tensor.from_numpy(inputs), need_grad=False).asnumpy()
        chosen_BTN = np.take_along_axis(q_BTNA[:, :-1], actions, axis=3)[..., 0]
        return chosen_BTN[mask[..., 0] > 0].reshape(-1)

    def loss_and_grads(self, batch: EpisodeBatch) -> tuple[float, list[np.ndarray]]:
        """Loss and (unclipped) gradients w.r.t. ``self.params`` on ``batch``, without an update -- for
        tests and diagnostics (with chunks, the gradient is the truncated one)."""
        if self._use_chunks(batch):
            loss, _, grads = self._chunked_loss_and_grads(batch)
        else:
            (loss, _), grads = self._whole_grad_fn(*self._tensors(batch))
        return float(loss.asnumpy()), [g.asnumpy() for g in grads]

    # ------------------------------------------------------------------------------ weights and state
    on_policy = False  # the trainer samples replayed episodes for every train call

    def make_controller(self, seed: int) -> MultiAgentController:
        """The ε-greedy NumPy controller that acts with this learner's agent weights."""
        return MultiAgentController(
            self.info, self.cfg.agent, self.cfg.exploration, seed=seed, weights=self.actor_weights()
        )

    def actor_weights(self) -> dict[str, np.ndarray]:
        """Online agent weights for the NumPy actor (``MultiAgentController.load_weights``)."""
        return params_to_numpy(self.nets.agent)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Online and target nets, optimizer state and counters as NumPy arrays (for checkpoints)."""
        sd = save_training_state(self.nets, {"": self.optimizer})
        sd["counters/train_steps"] = np.array(self.train_steps, np.int64)
        sd["counters/last_target_update_episode"] = np.array(self.last_target_update_episode, np.int64)
        return sd | self.length_plan.state()

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` saved (same config and EnvInfo)."""
        load_training_state(self.nets, {"": self.optimizer}, sd)
        self.train_steps = int(sd["counters/train_steps"])
        self.last_target_update_episode = int(sd["counters/last_target_update_episode"])
        self.length_plan.load_state(sd)
