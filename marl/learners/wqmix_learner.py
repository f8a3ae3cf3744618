"""Weighted QMIX: CW-QMIX and OW-QMIX (``learner.name: wqmix``, ``learner.weighting: cw | ow``).

Rashid et al. 2020, "Weighted QMIX: Expanding Monotonic Value Function Factorisation for Deep Multi-Agent
Reinforcement Learning" (NeurIPS). Beside the QMIX agents and mixer (which act, greedily, through the usual
NumPy controller) an unrestricted central ``Q*`` is learned: a second RNN agent network gives per-agent
utilities, mixed with the state by a feed-forward network (:class:`~marl.modules.wqmix.CentralFFMixer`).
Both losses regress on the same targets, built from the *target* ``Q*`` at the QMIX agents' greedy joint
action (double Q: the online QMIX agents pick it): ``y = TD(lambda)`` of ``r + gamma Q*_target(s', u')``
(pymarl2's ``max_q_learner`` with ``td_lambda``; the paper uses one-step targets, ``td_lambda: 0``).

* central loss: ``(Q*(s, u) - y)^2``;
* weighted QMIX loss: ``w(s, u) (Q_tot(s, u) - y)^2`` with ``w = 1`` where the condition holds, else
  ``alpha`` (``learner.w``; the authors' SMAC setting 0.1). CW (centrally weighted): the taken joint action is
  the QMIX agents' greedy one, or ``y > Q*_target(s, greedy u)``. OW (optimistically weighted):
  ``Q_tot(s, u) < y``.

Both are 0.5 * masked MSE, as the Q-learner's (the authors' code has no 0.5). The step is one ``ms.jit``
graph (whole-episode BPTT; chunked BPTT is not supported).
"""

from __future__ import annotations

import numpy as np

from marl.config.schema import Config
from marl.envs.base import EnvInfo
from marl.learners.q_learner import QLearner, QNets, _build_nets, build_agent, q_train_step
from marl.learners.targets import _greedy, make_bootstrap, td_lambda_targets
from marl.modules.wqmix import CentralFFMixer
from marl.registry import register
from marl.utils.ms import ms, nn, ops

WEIGHTINGS = ("cw", "ow")
MIXERS = ("qmix", "vdn")  # the restricted (monotonic) Q_tot; the central Q* is always CentralFFMixer


class WQNets(QNets):
    """The QMIX networks plus the central ``Q*`` agent and mixer and their targets."""

    def __init__(self, q: QNets, central_agent: nn.Cell, target_central_agent: nn.Cell, mixers: list) -> None:
        super().__init__(q.agent, q.target_agent, q.mixer, q.target_mixer)
        self.central_agent, self.target_central_agent = central_agent, target_central_agent
        self.central_mixer, self.target_central_mixer = mixers

    def online(self) -> list[nn.Cell]:
        return [*super().online(), self.central_agent, self.central_mixer]

    def target(self) -> list[nn.Cell]:
        return [*super().target(), self.target_central_agent, self.target_central_mixer]


def wqmix_weights_reference(
    weighting: str,
    alpha: float,
    q_tot_BT1: np.ndarray,
    targets_BT1: np.ndarray,
    greedy_q_star_BT1: np.ndarray,
    actions_BTN: np.ndarray,
    greedy_BTN: np.ndarray,
) -> np.ndarray:
    """The readable weights, one transition at a time (the graph's are tested equal to these)."""
    b, t = q_tot_BT1.shape[:2]
    w = np.full((b, t, 1), alpha, np.float32)
    for i in range(b):
        for j in range(t):
            if weighting == "ow":
                ok = q_tot_BT1[i, j, 0] < targets_BT1[i, j, 0]
            else:
                greedy_taken = bool((actions_BTN[i, j] == greedy_BTN[i, j]).all())
                ok = greedy_taken or targets_BT1[i, j, 0] > greedy_q_star_BT1[i, j, 0]
            if ok:
                w[i, j, 0] = 1.0
    return w


def wqmix_weights(weighting: str, alpha: float, q_tot, targets, greedy_q_star, actions_BTN1, greedy_BTN1):  # noqa: ANN001,ANN201
    """``w (B, T, 1)``: 1 where the CW / OW condition holds, else ``alpha`` (see the module docstring)."""
    if weighting == "ow":
        cond = (q_tot < targets).astype(ms.float32)
    else:
        same = (actions_BTN1 == greedy_BTN1).astype(ms.float32).min(axis=2)  # (B, T, 1): all agents greedy
        cond = ops.maximum(same, (targets > greedy_q_star).astype(ms.float32))
    return alpha + (1.0 - alpha) * cond


@register("learner", "wqmix")
class WQMIXLearner(QLearner):
    """CW-QMIX / OW-QMIX (Rashid et al. 2020): QMIX trained with a weighted loss towards a central ``Q*``."""

    stat_names = (
        "loss",
        "td_error_abs",
        "q_taken_mean",
        "target_mean",
        "central_loss",
        "w_mean",
        "grad_norm",
    )

    def __init__(self, info: EnvInfo, cfg: Config) -> None:
        lc = cfg.learner
        if lc.weighting not in WEIGHTINGS:
            raise ValueError(f"learner.weighting={lc.weighting!r}; allowed: {', '.join(WEIGHTINGS)}")
        if not 0.0 < lc.w <= 1.0:
            raise ValueError(f"learner.w (alpha) must be in (0, 1], got {lc.w}")
        if cfg.mixer.name not in MIXERS:
            raise ValueError(f"wqmix mixer.name={cfg.mixer.name!r}; allowed: {', '.join(MIXERS)}")
        super().__init__(info, cfg)
        if self.bptt_chunk:
            raise ValueError(
                "wqmix trains on whole episodes only: set learner.bptt_chunk=-1 (or keep auto with "
                f"episode_limit <= 200; this env has {info.episode_limit})"
            )

    def _make_nets(self, info: EnvInfo, cfg: Config) -> WQNets:
        def central() -> CentralFFMixer:
            return CentralFFMixer(info.n_agents, info.state_shape, cfg.learner.central_embed_dim)

        central_agents = build_agent(info, cfg), build_agent(info, cfg)
        return WQNets(_build_nets(info, cfg), *central_agents, [central(), central()])

    def _make_step(self):  # noqa: ANN202 (returns a compiled function)
        lc, nets = self.cfg.learner, self.nets
        gamma, lam = float(lc.gamma), float(lc.td_lambda)
        weighting, alpha = str(lc.weighting), float(lc.w)
        c_qmix, c_central = float(lc.qmix_loss), float(lc.central_loss)
        clip, optimizer = float(lc.grad_norm_clip), self.optimizer
        bootstrap = make_bootstrap(nets.target_central_mixer, bool(lc.double_q))

        def loss_fn(
            inputs_BTNI, avail_BTNA, actions_BTN1, reward_BT1, term_BT1, mask_BT1, state_BTS, m_t, pow_vec
        ):
            q_BTNA = nets.agent.unroll(inputs_BTNI)
            cq_BTNA = nets.central_agent.unroll(inputs_BTNI)
            target_cq_BTNA = ops.stop_gradient(nets.target_central_agent.unroll(inputs_BTNI, need_grad=False))
            # target Q* at the QMIX agents' greedy joint action, every slot
            greedy_q_star_BT1 = ops.stop_gradient(bootstrap(q_BTNA, target_cq_BTNA, avail_BTNA, state_BTS))
            targets = ops.stop_gradient(
                td_lambda_targets(reward_BT1, term_BT1, mask_BT1, greedy_q_star_BT1, m_t, pow_vec, gamma, lam)
            )
            s = state_BTS[:, :-1]
            q_tot = nets.mixer(ops.gather_elements(q_BTNA[:, :-1], 3, actions_BTN1).squeeze(3), s)
            q_star = nets.central_mixer(ops.gather_elements(cq_BTNA[:, :-1], 3, actions_BTN1).squeeze(3), s)
            greedy_BTN1, _ = _greedy(ops.stop_gradient(q_BTNA[:, :-1]), avail_BTNA[:, :-1])
            w = ops.stop_gradient(
                wqmix_weights(
                    weighting, alpha, q_tot, targets, greedy_q_star_BT1[:, :-1], actions_BTN1, greedy_BTN1
                )
            )
            n = mask_BT1.sum()
            td = (q_tot - targets) * mask_BT1
            central_td = (q_star - targets) * mask_BT1
            qmix_loss = 0.5 * (w * td * td).sum() / n
            central_loss = 0.5 * (central_td * central_td).sum() / n
            stats = ops.stack(
                [
                    ops.abs(td).sum() / n,
                    (q_tot * mask_BT1).sum() / n,
                    (targets * mask_BT1).sum() / n,
                    central_loss,
                    (w * mask_BT1).sum() / n,
                ]
            )
            return c_qmix * qmix_loss + c_central * central_loss, stats

        self.loss_fn = loss_fn  # the pure loss (tests recompute it)
        return q_train_step(loss_fn, self.params, optimizer, clip, lc.use_jit)
