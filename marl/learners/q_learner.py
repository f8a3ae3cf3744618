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

Long episodes (``learner.bptt_chunk``, see :func:`resolve_bptt_chunk`): the time loop is unrolled at
compile time, so compile time grows with ``T`` and ~500 steps hit MindSpore's call-depth limit
(benchmarks/results/long_episodes.md). Above ``WHOLE_EPISODE_MAX_LIMIT`` the learner switches to
truncated BPTT in chunks of ``C`` transitions: a no-grad chunk-by-chunk pass gives both nets' Q-values
and the exact hidden state at every chunk start; double-Q + TD(lambda) targets are computed over the
whole episode from them; the loss then runs over the live chunks as rows, each starting from its exact
hidden state. The loss value is the whole-episode loss; the gradient lacks only the terms that flow
back through a chunk's starting hidden state (exact when ``C >= episode_limit``). Every graph has at
most ``C`` unrolled steps and static shapes, so each compiles once whatever the episode limit. In auto
mode (``bptt_chunk = 0``, with time buckets) a batch whose episodes all fit in ``HYBRID_MAX_SLOTS``
bucketed slots -- most batches once the agents fight -- still takes the exact whole-episode step.
"""

from __future__ import annotations

import numpy as np

from marl.buffers.episode import EpisodeBatch
from marl.config_schema import Config
from marl.controllers.mac import MultiAgentController, build_agent_inputs, input_dim
from marl.envs.base import EnvInfo
from marl.learners.optim import clip_grad_norm, make_optimizer
from marl.learners.targets import (
    bucketed_slots,
    chunk_view,
    lambda_return_matrices,
    live_chunks,
    td_lambda_targets,
    transition_mask,
)
from marl.modules.agents import RNNAgent
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

STAT_NAMES = ("loss", "td_error_abs", "q_taken_mean", "target_mean", "grad_norm")
MIXERS = ("qmix", "vdn", "none")
# Auto BPTT mode (learner.bptt_chunk = 0), chosen by measurement (benchmarks/results/long_episodes.md):
# whole-episode BPTT up to this episode limit, chunks of about AUTO_CHUNK transitions above it.
WHOLE_EPISODE_MAX_LIMIT = 100
AUTO_CHUNK = 50
# Auto mode with chunks and time buckets: a batch whose bucketed length is at most this many slots (its
# episodes are all short) still takes the exact whole-episode step, compiled at that length.
HYBRID_MAX_SLOTS = 64


def resolve_bptt_chunk(bptt_chunk: int, episode_limit: int, recurrent: bool) -> int:
    """Transitions per truncated-BPTT chunk for ``learner.bptt_chunk``; 0 = whole-episode BPTT.

    ``-1`` = whole episode; ``0`` = auto (whole episode when ``episode_limit <= WHOLE_EPISODE_MAX_LIMIT``,
    else the episode split evenly into chunks of at most ``AUTO_CHUNK``); ``C > 0`` = chunks of ``C``.
    A feed-forward agent has no loop over time, so it always trains on the whole episode.
    """
    if not isinstance(bptt_chunk, int) or bptt_chunk < -1:
        raise ValueError(
            f"learner.bptt_chunk must be -1 (whole episode), 0 (auto) or a positive chunk "
            f"length, got {bptt_chunk!r}"
        )
    if not recurrent or bptt_chunk == -1:
        return 0
    if bptt_chunk == 0:
        if episode_limit <= WHOLE_EPISODE_MAX_LIMIT:
            return 0
        n_chunks = -(-episode_limit // AUTO_CHUNK)
        return -(-episode_limit // n_chunks)
    return bptt_chunk


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


def chunk_group_sizes(n_rows: int, batch_size: int) -> list[int]:
    """Row counts of the groups the chunked loss runs over ``n_rows`` live chunk rows in: full groups of
    ``batch_size``, then the rest padded up to the smallest of ``batch_size / 2^k`` (at least
    ``batch_size / 8``) that holds it -- at most four shapes to compile, and a few rows more than a batch
    cost a small group, not a second full one."""
    full, rest = divmod(n_rows, batch_size)
    sizes = [batch_size] * full
    if rest:
        size, floor = batch_size, max(1, batch_size // 8)
        while size // 2 >= max(rest, floor):
            size //= 2
        sizes.append(size)
    return sizes


def _build_nets(info: EnvInfo, cfg: Config) -> QNets:
    a, m = cfg.agent, cfg.mixer
    in_dim = input_dim(info, a)

    def make_agent() -> nn.Cell:
        return build("agent", a.name, input_dim=in_dim, hidden_dim=a.hidden_dim, n_actions=info.n_actions)

    def make_mixer() -> nn.Cell | None:
        if m.name == "none":
            return None
        return build(
            "mixer",
            m.name,
            n_agents=info.n_agents,
            state_dim=info.state_shape,
            embed_dim=m.embed_dim,
            hypernet_layers=m.hypernet_layers,
            hypernet_dim=m.hypernet_dim,
        )

    return QNets(make_agent(), make_agent(), make_mixer(), make_mixer())


def _make_bootstrap(target_mixer: nn.Cell | None, double_q: bool):  # noqa: ANN202 (a graph function)
    """``bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS) -> (B, T, K)``: the target network's value
    of every slot, the action picked by the online net (double Q) or by the target net, then mixed."""

    def bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS):
        if double_q:  # action chosen by the online net, valued by the target net
            q_det = ops.masked_fill(ops.stop_gradient(q_BTNA), avail_BTNA == 0, -9999999.0)
            best_BTN1 = ops.argmax(q_det, dim=3, keepdim=True)
            target_max_BTN = ops.gather_elements(target_q_BTNA, 3, best_BTN1).squeeze(3)
        else:
            target_max_BTN = ops.masked_fill(target_q_BTNA, avail_BTNA == 0, -9999999.0).max(axis=3)
        if target_mixer is not None:
            return target_mixer(target_max_BTN, state_BTS)
        return target_max_BTN

    return bootstrap


def masked_td_loss(
    chosen: ms.Tensor, targets: ms.Tensor, mask_BT1: ms.Tensor, n_valid: ms.Tensor | None = None
) -> tuple[ms.Tensor, ms.Tensor]:
    """``0.5 * sum(mask * (chosen - targets)^2) / n_valid`` and the stats (|td|, chosen Q, target), with
    ``n_valid = sum(mask)`` unless given (a part of a batch divides by the count of the whole batch)."""
    mask = ops.broadcast_to(mask_BT1, chosen.shape)
    if n_valid is None:
        n_valid = mask.sum()
    td = (chosen - targets) * mask
    loss = 0.5 * (td * td).sum() / n_valid
    stats = ops.stack(
        [ops.abs(td).sum() / n_valid, (chosen * mask).sum() / n_valid, (targets * mask).sum() / n_valid]
    )
    return loss, stats


@register("learner", "q_learner")
class QLearner:
    """IQL / VDN / QMIX learner over padded episode batches (see the module docstring for papers)."""

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc = cfg.learner
        if cfg.mixer.name not in MIXERS:
            raise ValueError(f"unknown mixer {cfg.mixer.name!r} for q_learner; allowed: {', '.join(MIXERS)}")
        if not info.discrete:
            raise ValueError("q_learner needs discrete actions (EnvInfo.discrete=True)")
        if not 0.0 <= lc.target_update_tau <= 1.0:
            raise ValueError(f"target_update_tau must be in [0, 1], got {lc.target_update_tau}")
        if lc.target_update_tau == 0.0 and lc.target_update_interval < 1:
            raise ValueError(f"target_update_interval must be >= 1, got {lc.target_update_interval}")
        self.info, self.cfg = info, cfg
        self.t_slots = info.episode_limit + 1
        self.nets = _build_nets(info, cfg)
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
        bucketed_slots(np.ones((1, 2, 1)), 2, lc.time_bucket)  # checks learner.time_bucket early
        self._lambda_consts: dict[int, tuple[ms.Tensor, ms.Tensor]] = {}
        self.bptt_chunk = resolve_bptt_chunk(
            lc.bptt_chunk, info.episode_limit, bool(getattr(self.nets.agent, "recurrent", False))
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
        self._soft = self._make_soft_update()

    # ------------------------------------------------------------------------------- the train step
    def _make_step(self):  # noqa: ANN202 (returns a compiled function)
        lc, nets = self.cfg.learner, self.nets
        agent, target_agent = nets.agent, nets.target_agent
        mixer, target_mixer = nets.mixer, nets.target_mixer
        gamma, lam, double_q = float(lc.gamma), float(lc.td_lambda), bool(lc.double_q)
        clip = float(lc.grad_norm_clip)
        optimizer = self.optimizer

        bootstrap = _make_bootstrap(target_mixer, double_q)

        def loss_fn(
            inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
        ):
            q_BTNA = agent.unroll(inputs_BTNI)
            target_q_BTNA = ops.stop_gradient(target_agent.unroll(inputs_BTNI))
            chosen_BTN = ops.gather_elements(q_BTNA[:, :-1], 3, actions_BTN1).squeeze(3)
            chosen = mixer(chosen_BTN, state_BTS[:, :-1]) if mixer is not None else chosen_BTN
            target_max = bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS)
            targets = ops.stop_gradient(
                td_lambda_targets(reward_BT1, term_BT1, mask_BT1, target_max, m_t, pow_vec, gamma, lam)
            )
            return masked_td_loss(chosen, targets, mask_BT1)

        grad_fn = ms.value_and_grad(loss_fn, None, weights=self.params, has_aux=True)

        def train_step(
            inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
        ):
            (loss, stats), grads = grad_fn(
                inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
            )
            grads, grad_norm = clip_grad_norm(grads, clip)
            optimizer(grads)
            return ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)])

        return (jit(train_step) if lc.use_jit else train_step), grad_fn

    def _make_chunked(self):  # noqa: ANN202 (returns compiled functions)
        """Truncated BPTT in chunks of ``C = bptt_chunk`` transitions: four graphs, none with a loop over
        ``T`` slots. ``forward``: online + target unroll of one chunk from given hidden states, no
        gradient, compiled once. ``targets``: double-Q bootstrap + TD(lambda) over the whole episode,
        loop-free. ``grad_fn``: value_and_grad of the chosen-Q loss over ``B`` chunk rows that start from
        the exact hidden states of the no-grad pass; fixed shape, so compiled once; summed over groups of
        rows. ``apply``: clip + optimizer. The loss equals the whole-episode loss; only the gradient
        through a chunk's starting hidden state is cut."""
        lc, nets = self.cfg.learner, self.nets
        agent, target_agent, mixer = nets.agent, nets.target_agent, nets.mixer
        gamma, lam, clip = float(lc.gamma), float(lc.td_lambda), float(lc.grad_norm_clip)
        m_t, pow_vec = self._lambda_tensors(self.t_slots)
        optimizer = self.optimizer
        bootstrap = _make_bootstrap(nets.target_mixer, bool(lc.double_q))

        def forward(inputs_BCNI, h_MH, target_h_MH):
            q_BCNA, h_MH = agent.unroll_from(inputs_BCNI, h_MH)
            target_q_BCNA, target_h_MH = target_agent.unroll_from(inputs_BCNI, target_h_MH)
            return q_BCNA, target_q_BCNA, h_MH, target_h_MH

        def targets(q_BTNA, target_q_BTNA, avail_BTNA, reward_BT1, term_BT1, mask_BT1, state_BTS):
            target_max = bootstrap(q_BTNA, target_q_BTNA, avail_BTNA, state_BTS)
            return td_lambda_targets(reward_BT1, term_BT1, mask_BT1, target_max, m_t, pow_vec, gamma, lam)

        def loss_fn(inputs_RCNI, h0_MH, actions_RCN1, state_RCS, targets_RCK, mask_RC1, n_valid):
            q_RCNA, _ = agent.unroll_from(inputs_RCNI, h0_MH)  # h0 is an input: no gradient into it
            chosen_RCN = ops.gather_elements(q_RCNA, 3, actions_RCN1).squeeze(3)
            chosen = mixer(chosen_RCN, state_RCS) if mixer is not None else chosen_RCN
            return masked_td_loss(chosen, targets_RCK, mask_RC1, n_valid)

        grad_fn = ms.value_and_grad(loss_fn, None, weights=self.params, has_aux=True)

        def apply(*grads):  # varargs: a tuple argument of tensors would be a constant (recompiles)
            grads, grad_norm = clip_grad_norm(grads, clip)
            optimizer(grads)
            return grad_norm

        fns = (forward, targets, grad_fn, apply)
        return tuple(jit(f) for f in fns) if lc.use_jit else fns

    def _forward_chunks(self, inputs_BTNI: np.ndarray, filled_BT1: np.ndarray) -> tuple[np.ndarray, ...]:
        """No-grad online and target Q ``(B, T, N, A)`` chunk by chunk, and the online hidden state at the
        start of every chunk ``(B, K, N, H)``. Chunks after the last filled slot are not run (their Q stay
        0; only padding slots, which every target and loss masks out)."""
        c, (b, t, n) = self.bptt_chunk, inputs_BTNI.shape[:3]
        hd, n_act = self.nets.agent.hidden_dim, self.info.n_actions
        n_fwd = -(-t // c)
        last = int(((filled_BT1[..., 0] > 0) * np.arange(1, t + 1)).max())  # slots to cover
        xs = chunk_view(inputs_BTNI, c, n_fwd)
        q, target_q = (np.zeros((b, n_fwd * c, n, n_act), np.float32) for _ in range(2))
        h_starts = np.zeros((b, n_fwd, n, hd), np.float32)
        h = target_h = Tensor.from_numpy(np.zeros((b * n, hd), np.float32))
        for k in range(-(-last // c)):
            h_starts[:, k] = h.asnumpy().reshape(b, n, hd)
            x_k = Tensor.from_numpy(np.ascontiguousarray(xs[:, k]))
            q_k, tq_k, h, target_h = self._forward(x_k, h, target_h)
            q[:, k * c : (k + 1) * c], target_q[:, k * c : (k + 1) * c] = q_k.asnumpy(), tq_k.asnumpy()
        return q[:, :t], target_q[:, :t], h_starts

    def _chunk_groups(self, batch: EpisodeBatch) -> tuple[list[list[ms.Tensor]], ms.Tensor]:
        """NumPy batch -> groups of ``B`` chunk rows for the chunked loss, and the batch's transition count.

        Every chunk of ``C`` transitions that holds a real transition becomes one row, with its exact
        starting hidden state and its TD(lambda) targets computed over the whole episode; all-padding
        chunks are skipped; the rows are cut into groups by :func:`chunk_group_sizes`, the last one padded
        with empty rows (mask 0)."""
        inputs, avail, actions, reward, term, mask, state = self._arrays(batch)
        c, (b, t, n) = self.bptt_chunk, inputs.shape[:3]
        q, target_q, h_starts = self._forward_chunks(inputs, batch["filled"])
        tgt = self._targets_fn(
            *(
                Tensor.from_numpy(np.ascontiguousarray(x))
                for x in (q, target_q, avail, reward, term, mask, state)
            )
        ).asnumpy()
        n_chunks = -(-(t - 1) // c)
        b_idx, k_idx = live_chunks(mask, c)
        sizes = chunk_group_sizes(len(b_idx), b)
        bounds = np.cumsum([0] + sizes)

        def take(x: np.ndarray, per_transition: bool = True) -> np.ndarray:
            picked = (chunk_view(x, c, n_chunks) if per_transition else x)[b_idx, k_idx]
            pad = np.zeros((bounds[-1] - len(b_idx),) + picked.shape[1:], picked.dtype)
            return np.concatenate([picked, pad])

        arrays = [
            take(inputs[:, :-1]),
            take(h_starts, per_transition=False),
            take(actions),
            take(state[:, :-1]),
            take(tgt),
            take(mask),
        ]
        groups = []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            part = [np.ascontiguousarray(x[lo:hi]) for x in arrays]
            part[1] = part[1].reshape((hi - lo) * n, -1)  # (rows, N, H) -> (rows * N, H) hidden-state rows
            groups.append([Tensor.from_numpy(x) for x in part])
        return groups, Tensor(np.float32(mask.sum() * tgt.shape[2]))  # as the broadcast mask counts

    def _chunked_loss_and_grads(self, batch: EpisodeBatch) -> tuple[ms.Tensor, ms.Tensor, tuple]:
        """Loss, stats and gradients of ``batch`` summed over its groups of chunk rows."""
        groups, n_valid = self._chunk_groups(batch)
        loss = stats = grads = None
        for group in groups:
            (g_loss, g_stats), g_grads = self._grad_fn(*group, n_valid)
            if grads is None:
                loss, stats, grads = g_loss, g_stats, g_grads
            else:
                loss, stats = loss + g_loss, stats + g_stats
                grads = tuple(a + g for a, g in zip(grads, g_grads, strict=True))
        return loss, stats, grads

    def _arrays(self, batch: EpisodeBatch) -> list[np.ndarray]:
        """NumPy batch -> the whole-episode step's input arrays (checked against EnvInfo)."""
        info, a = self.info, self.cfg.agent
        b, t = batch["filled"].shape[:2]
        if t != self.t_slots:
            raise ValueError(
                f"batch has {t} time slots; this learner is compiled for episode_limit + 1 = "
                f"{self.t_slots} (pad episodes with EpisodeBatch, do not truncate)"
            )
        want = {
            "obs": (info.n_agents, info.obs_shape),
            "state": (info.state_shape,),
            "avail_actions": (info.n_agents, info.n_actions),
            "actions": (info.n_agents, 1),
            "actions_onehot": (info.n_agents, info.n_actions),
        }
        for key, shape in want.items():
            if batch[key].shape != (b, t) + shape:
                raise ValueError(f"batch[{key!r}] has shape {batch[key].shape}, expected {(b, t) + shape}")
        mask = transition_mask(batch["filled"], batch["terminated"])
        if mask.sum() <= 0:
            raise ValueError("batch holds no transitions (filled mask is empty)")
        inputs = build_agent_inputs(batch["obs"], batch["actions_onehot"], a.obs_last_action, a.obs_agent_id)
        arrays = [
            inputs,
            np.asarray(batch["avail_actions"], np.int32),
            np.asarray(batch["actions"][:, :-1], np.int64),
            np.asarray(batch["reward"][:, :-1], np.float32),
            np.asarray(batch["terminated"][:, :-1], np.float32),
            mask,
            np.asarray(batch["state"], np.float32),
        ]
        return [np.ascontiguousarray(x) for x in arrays]

    def train_slots(self, filled_BT1: np.ndarray) -> int:
        """Slots the whole-episode step runs over for a batch with this ``filled`` mask
        (:func:`~marl.learners.targets.bucketed_slots` with ``learner.time_bucket``)."""
        return bucketed_slots(filled_BT1, self.t_slots, self.cfg.learner.time_bucket)

    def _use_chunks(self, batch: EpisodeBatch) -> bool:
        """Whether ``batch`` trains with chunked BPTT: always when chunks are on, except that in auto mode
        a batch of short episodes (at most ``HYBRID_MAX_SLOTS`` bucketed slots) takes the whole-episode
        step."""
        if not self.bptt_chunk:
            return False
        return not self.hybrid_slots or self.train_slots(batch["filled"]) > self.hybrid_slots

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
        arrays = self._arrays(batch)
        t = self.train_slots(batch["filled"])
        # inputs, avail and state cover T slots; actions, reward, terminated and mask cover T - 1
        cut = [np.ascontiguousarray(x[:, : t if i in (0, 1, 6) else t - 1]) for i, x in enumerate(arrays)]
        return [Tensor.from_numpy(x) for x in cut] + list(self._lambda_tensors(t))

    def train(self, batch: EpisodeBatch, t_env: int, episode: int) -> dict[str, float]:
        """One gradient step on ``batch``; updates targets on schedule. Returns the step's statistics."""
        if self._use_chunks(batch):
            loss, stats, grads = self._chunked_loss_and_grads(batch)
            grad_norm = self._apply(*grads)
            out = ops.concat([loss.reshape(1), stats, grad_norm.reshape(1)]).asnumpy()
        else:
            out = self._step(*self._tensors(batch)).asnumpy()
        self.train_steps += 1
        tau = self.cfg.learner.target_update_tau
        if tau > 0.0:
            self._soft()
        elif (episode - self.last_target_update_episode) / self.cfg.learner.target_update_interval >= 1.0:
            self._hard_update()
            self.last_target_update_episode = episode
        return {k: float(v) for k, v in zip(STAT_NAMES, out, strict=True)}

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

    def q_values_for_histogram(self, batch: EpisodeBatch) -> np.ndarray:
        """Online Q-values of the actions taken at every real transition of ``batch`` (1-D, for logging
        histograms). Runs eagerly (no extra compile); meant for occasional calls."""
        inputs, _, actions, _, _, mask, _ = self._arrays(batch)
        if self.bptt_chunk:  # chunked no-grad pass (a whole-episode unroll would be hundreds of steps)
            q_BTNA = self._forward_chunks(inputs, batch["filled"])[0]
        else:
            q_BTNA = self.nets.agent.unroll(Tensor.from_numpy(inputs)).asnumpy()
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
        return sd

    def load_state_dict(self, sd: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` saved (same config and EnvInfo)."""
        load_training_state(self.nets, {"": self.optimizer}, sd)
        self.train_steps = int(sd["counters/train_steps"])
        self.last_target_update_episode = int(sd["counters/last_target_update_episode"])
