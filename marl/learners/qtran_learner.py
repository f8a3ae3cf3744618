"""QTRAN-base (``learner.name: qtran``).

Son et al. 2019, "QTRAN: Learning to Factorize with Transformation for Cooperative Multi-Agent Reinforcement
Learning" (ICML). The agents' utilities ``Q_i`` act greedily through the usual NumPy controller; beside them a
joint action-value network ``Q_jt(tau, u)`` over the agents' GRU hidden states and actions, and a state value
``V_jt(s)`` (:class:`~marl.modules.qtran.QTranJoint`) are learned with three losses (pymarl's ``qtran_base``):

* ``L_td  = (Q_jt(tau, u) - y)^2``, ``y`` the TD(lambda) target of ``r + gamma Q_jt^-(tau', u'')`` where
  ``u''`` is the greedy joint action of the online agents (double Q) or of the target agents, valued by the
  target agents' hidden states and target ``Q_jt`` (``td_lambda: 0`` gives the paper's one-step target);
* ``L_opt = (sum_i max_a Q_i - [Q_jt(tau, u_greedy)] + V_jt)^2`` (the optimal action's condition);
* ``L_nopt = (min(sum_i Q_i(u_i) - [Q_jt(tau, u)] + V_jt, 0))^2`` (the taken action's condition);

``[.]`` stops the gradient, each is a masked mean over transitions (no 0.5, as the authors' code), and the
loss is ``L_td + opt_loss * L_opt + nopt_min_loss * L_nopt``. The gradient of ``L_td`` reaches the agents
through their hidden states (as in pymarl). The step is one ``ms.jit`` graph (whole-episode BPTT only); the
readable form of the three losses is :func:`qtran_losses_reference`.
"""

from __future__ import annotations

import numpy as np

from marl.config.schema import Config
from marl.envs.base import EnvInfo
from marl.learners.q_chunked import resolve_bptt_chunk
from marl.learners.q_learner import QLearner, QNets, build_agent, q_train_step
from marl.learners.targets import _greedy, td_lambda_targets
from marl.modules.qtran import QTranJoint
from marl.registry import register
from marl.utils.ms import ops

AGENTS = ("rnn", "dueling_rnn")  # Q_jt reads the GRU hidden states


def qtran_losses_reference(
    q_jt_BT1: np.ndarray,
    v_BT1: np.ndarray,
    max_q_jt_BT1: np.ndarray,
    targets_BT1: np.ndarray,
    chosen_BTN: np.ndarray,
    max_BTN: np.ndarray,
    mask_BT1: np.ndarray,
) -> tuple[float, float, float]:
    """``(L_td, L_opt, L_nopt)`` one transition at a time, from the networks' outputs: ``Q_jt`` of the taken
    and of the greedy joint action, ``V_jt``, the targets, each agent's ``Q_i`` of its taken action and its
    max over available actions. The graph's losses are tested equal to these."""
    b, t = mask_BT1.shape[:2]
    td = opt = nopt = 0.0
    for i in range(b):
        for j in range(t):
            if mask_BT1[i, j, 0] == 0:
                continue
            td += (q_jt_BT1[i, j, 0] - targets_BT1[i, j, 0]) ** 2
            opt += (max_BTN[i, j].sum() - max_q_jt_BT1[i, j, 0] + v_BT1[i, j, 0]) ** 2
            nopt += min(chosen_BTN[i, j].sum() - q_jt_BT1[i, j, 0] + v_BT1[i, j, 0], 0.0) ** 2
    n = float(mask_BT1.sum())
    return td / n, opt / n, nopt / n


@register("learner", "qtran")
class QTRANLearner(QLearner):
    """QTRAN-base (Son et al. 2019): agents trained through ``Q_jt``, ``V_jt`` and the opt / nopt conditions
    (see the module docstring)."""

    stat_names = (
        "loss",
        "td_loss",
        "opt_loss",
        "nopt_loss",
        "td_error_abs",
        "q_jt_mean",
        "v_mean",
        "target_mean",
        "grad_norm",
    )

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc = cfg.learner
        if cfg.agent.name not in AGENTS:
            raise ValueError(
                f"qtran agent.name={cfg.agent.name!r}; allowed: {', '.join(AGENTS)} (Q_jt reads "
                "the agents' GRU hidden states)"
            )
        if lc.opt_loss < 0 or lc.nopt_min_loss < 0:
            raise ValueError(
                f"learner.opt_loss and learner.nopt_min_loss must be >= 0, got {lc.opt_loss}, "
                f"{lc.nopt_min_loss}"
            )
        if resolve_bptt_chunk(lc.bptt_chunk, info.episode_limit, True):
            raise ValueError(
                "qtran trains on whole episodes only: set learner.bptt_chunk=-1 (or keep auto with "
                f"episode_limit <= 200; this env has {info.episode_limit})"
            )
        super().__init__(info, cfg)

    def _make_nets(self, info: EnvInfo, cfg: Config) -> QNets:
        def joint() -> QTranJoint:
            e = cfg.learner.qtran_embed_dim
            return QTranJoint(info.n_agents, info.n_actions, info.state_shape, cfg.agent.hidden_dim, e)

        return QNets(build_agent(info, cfg), build_agent(info, cfg), joint(), joint())

    def _make_step(self):  # noqa: ANN202 (returns a compiled function)
        lc, nets = self.cfg.learner, self.nets
        gamma, lam, double_q = float(lc.gamma), float(lc.td_lambda), bool(lc.double_q)
        c_opt, c_nopt = float(lc.opt_loss), float(lc.nopt_min_loss)
        clip, optimizer, n_actions = float(lc.grad_norm_clip), self.optimizer, self.info.n_actions

        def onehot(a_BTN1):  # noqa: ANN001, ANN202
            return ops.one_hot(a_BTN1.squeeze(3), n_actions, 1.0, 0.0)

        def loss_fn(
            inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
        ):
            q_BTNA, h_BTNH = nets.agent.unroll_hidden(inputs_BTNI)
            target_q_BTNA, target_h_BTNH = nets.target_agent.unroll_hidden(inputs_BTNI, need_grad=False)
            target_q_BTNA, target_h_BTNH = ops.stop_gradient(target_q_BTNA), ops.stop_gradient(target_h_BTNH)
            greedy_BTN1, max_q_BTN = _greedy(q_BTNA, avail_BTNA)  # max_q keeps its gradient (L_opt)
            greedy_BTN1 = ops.stop_gradient(greedy_BTN1)
            boot_BTN1 = greedy_BTN1 if double_q else _greedy(target_q_BTNA, avail_BTNA)[0]
            target_q_jt_BT1, _ = nets.target_mixer(state_BTS, target_h_BTNH, onehot(boot_BTN1))
            targets = ops.stop_gradient(
                td_lambda_targets(reward_BT1, term_BT1, mask_BT1, target_q_jt_BT1, m_t, pow_vec, gamma, lam)
            )
            s, h = state_BTS[:, :-1], h_BTNH[:, :-1]
            q_jt, v = nets.mixer(s, h, onehot(actions_BTN1))
            max_q_jt, _ = nets.mixer(s, h, onehot(greedy_BTN1[:, :-1]))
            n = mask_BT1.sum()
            td = (q_jt - targets) * mask_BT1
            opt = (max_q_BTN[:, :-1].sum(axis=2, keepdims=True) - ops.stop_gradient(max_q_jt) + v) * mask_BT1
            chosen_BTN = ops.gather_elements(q_BTNA[:, :-1], 3, actions_BTN1).squeeze(3)
            nopt_raw = chosen_BTN.sum(axis=2, keepdims=True) - ops.stop_gradient(q_jt) + v
            nopt = ops.minimum(nopt_raw, 0.0) * mask_BT1
            td_loss, opt_loss, nopt_loss = (td * td).sum() / n, (opt * opt).sum() / n, (nopt * nopt).sum() / n
            stats = ops.stack(
                [
                    td_loss,
                    opt_loss,
                    nopt_loss,
                    ops.abs(td).sum() / n,
                    (q_jt * mask_BT1).sum() / n,
                    (v * mask_BT1).sum() / n,
                    (targets * mask_BT1).sum() / n,
                ]
            )
            return td_loss + c_opt * opt_loss + c_nopt * nopt_loss, stats

        self.loss_fn = loss_fn  # the pure loss (tests recompute it)
        return q_train_step(loss_fn, self.params, optimizer, clip, lc.use_jit)
