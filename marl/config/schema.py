"""Typed, frozen configuration dataclasses (the schema). ``marl/config/layers.py`` loads YAML layers and the
command line into these. Defaults follow pymarl2's tuned QMIX settings; nothing an environment knows
(agents, obs/state sizes, actions, episode limit) appears here: it comes from ``get_env_info()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to build. ``args`` go to the env constructor (e.g. SMAC option flags)."""

    name: str = "sc2"  # registry env name: sc2 | mpe | gym | fake
    map_name: str = "3m"  # SMAC map / MPE scenario / Gymnasium id
    backend: str = "auto"  # SMAC engine: auto (game if installed, else embedded) | sim | sc2
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentConfig:
    """Agent network (shared parameters across agents)."""

    name: str = "rnn"  # rnn | mlp
    hidden_dim: int = 64
    obs_last_action: bool = True  # append the agent's previous action one-hot to its input
    obs_agent_id: bool = True  # append the agent-id one-hot to its input


@dataclass(frozen=True)
class MixerConfig:
    """Value-decomposition mixer (read by the ``q_learner`` and ``wqmix`` families only)."""

    name: str = "qmix"  # qmix | vdn | none (IQL)
    embed_dim: int = 32
    hypernet_layers: int = 2  # 1 or 2
    hypernet_dim: int = 64


@dataclass(frozen=True)
class ExplorationConfig:
    """Linear ε annealing over environment steps: ε-greedy acting (Q-learners and DQN), or COMA's floor
    ``(1 - ε) π + ε / |available|`` on its policy (pymarl's)."""

    epsilon_start: float = 1.0
    epsilon_finish: float = 0.05
    epsilon_anneal_time: int = 100_000


@dataclass(frozen=True)
class NoiseExplorationConfig(ExplorationConfig):
    """MADDPG / DDPG: ε for discrete actions (Gumbel sampling explores too), and for continuous actions
    Gaussian noise whose std (a fraction of the action half-range) is annealed linearly."""

    noise_start: float = 0.1
    noise_finish: float = 0.1
    noise_anneal_time: int = 100_000


@dataclass(frozen=True)
class BaseLearnerConfig:
    """What every learner reads: optimizer, discount, batch and replay sizes. Each learner family extends it
    with its own fields (:data:`LEARNER_CONFIGS`), so a run's ``learner`` section holds only what its
    learner reads.

    ``sections`` names the algorithm-dependent sections (:data:`ALG_SECTIONS`) the family reads, each with its
    dataclass; a run of the family has the others set to ``None`` and left out of its ``config.yaml``."""

    sections: ClassVar[dict[str, type]] = {}
    name: str = "q_learner"
    optimizer: str = "adam"  # adam | rmsprop (PyTorch semantics: eps outside the sqrt)
    lr: float = 1e-3
    optim_alpha: float = 0.99  # RMSprop smoothing
    optim_eps: float = 1e-5  # RMSprop only (Adam uses 1e-8, as pymarl2)
    gamma: float = 0.99
    grad_norm_clip: float = 10.0
    batch_size: int = 128  # episodes per train step
    buffer_size: int = 5000  # episodes in the replay buffer
    buffer_max_gib: float = 0.0  # > 0: hold at most this many GiB (fewer episodes on large maps); 0: no cap
    memory_check: bool = True  # stop after the first update if the buffer or the update would outgrow memory
    use_jit: bool = True  # compile the train step with ms.jit
    on_nonfinite: str = "stop"  # NaN/inf loss or gradient (the update is never applied): stop | skip


@dataclass(frozen=True)
class QLearnerConfig(BaseLearnerConfig):
    """``q_learner`` (IQL / VDN / QMIX / QPLEX): TD(lambda), double Q, target updates, BPTT."""

    sections: ClassVar[dict[str, type]] = {"mixer": MixerConfig, "exploration": ExplorationConfig}

    td_lambda: float = 0.6  # 0 = one-step targets
    double_q: bool = True
    target_update_interval: int = 200  # episodes between hard target updates
    target_update_tau: float = 0.0  # > 0: soft (Polyak) update every train step instead
    bptt_chunk: int = 0  # BPTT: 0 = auto (whole episode with the compiled GRU kernels, or without them if
    #   episode_limit <= 200, else chunks of ~50 transitions: truncated BPTT, exact hidden states);
    #   -1 = whole episode; C > 0 = chunks of C
    time_bucket: int = 16  # whole-episode BPTT: train on the slots up to the batch's longest episode,
    #   rounded up to a multiple of this (each length compiles once; exact); 0 = all slots
    length_groups: int = 2  # whole-episode BPTT: 2 = the batch's longest eighth of episodes and the rest
    #   as two groups, each padded to its own length, gradients summed (exact); 1 = one padded batch
    pad_to_compiled: bool = True  # jitted steps: run a new bucketed length on a longer compiled graph
    #   until the padding has cost as much as one compile, then compile it (exact; compiled_lengths.py)
    update_rows: int = 0  # whole-episode BPTT: > 0 = no graph of an update takes more than this many
    #   episodes: the batch (or each length group) runs in parts, gradients summed (exact; bounds the
    #   step's memory on large maps, e.g. bane_vs_bane); 0 = no limit


@dataclass(frozen=True)
class WQMIXConfig(QLearnerConfig):
    """``wqmix`` (CW-QMIX / OW-QMIX, Rashid et al. 2020): the Q-learner's settings plus the weighting."""

    weighting: str = "cw"  # cw (centrally weighted) | ow (optimistically weighted)
    w: float = 0.1  # alpha, the weight of the transitions outside the condition (authors' SMAC setting)
    qmix_loss: float = 1.0  # coefficient of the weighted QMIX loss
    central_loss: float = 1.0  # coefficient of the central Q* loss
    central_embed_dim: int = 256  # width of the central feed-forward mixer
    length_groups: int = 1  # one padded batch (length groups split q_learner's, ppo's and pg's losses)


@dataclass(frozen=True)
class QTRANConfig(QLearnerConfig):
    """``qtran`` (QTRAN-base, Son et al. 2019): the Q-learner's settings plus the two condition losses. Its
    joint network is sized by ``qtran_embed_dim``: it reads no ``mixer`` section."""

    sections: ClassVar[dict[str, type]] = {"exploration": ExplorationConfig}

    opt_loss: float = 1.0  # lambda_opt, weight of L_opt (pymarl's qtran.yaml)
    nopt_min_loss: float = 0.1  # lambda_nopt, weight of L_nopt (pymarl's qtran.yaml)
    qtran_embed_dim: int = 64  # width of Q_jt and V_jt (pymarl's mixing_embed_dim for qtran)
    length_groups: int = 1  # one padded batch (length groups split q_learner's, ppo's and pg's losses)


@dataclass(frozen=True)
class PPOConfig(BaseLearnerConfig):
    """On-policy actor-critic learners ``ppo`` (MAPPO / IPPO / PPO) and ``pg``."""

    time_bucket: int = 16  # as QLearnerConfig.time_bucket
    length_groups: int = 2  # as QLearnerConfig.length_groups, with one minibatch per epoch (else 1 batch)
    pad_to_compiled: bool = True  # as QLearnerConfig.pad_to_compiled
    update_rows: int = 0  # as QLearnerConfig.update_rows, with one minibatch per epoch (else not used)
    critic: str = "central"  # value net input: central (state, MAPPO) | local (agent obs, IPPO / PPO)
    critic_hidden_dim: int = 64  # MLP value net width
    gae_lambda: float = 0.95  # GAE lambda (ppo); pg uses Monte Carlo returns
    ppo_clip: float = 0.2  # clipped-objective epsilon
    ppo_epochs: int = 5  # passes over each fresh batch
    num_minibatches: int = 1  # minibatches of episodes per epoch (must divide batch_size)
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    value_clip: float = 0.2  # clipped value loss (0 = plain MSE)
    value_norm: bool = True  # normalise value targets with a running mean/std of returns
    adv_norm: bool = True  # normalise advantages over each batch
    init_log_std: float = -0.5  # Gaussian policies: initial log standard deviation


@dataclass(frozen=True)
class COMAConfig(PPOConfig):
    """``coma`` (Foerster et al. 2018): the actor-critic settings plus the target critic's (pymarl's
    coma.yaml); its ``exploration`` section is pymarl's epsilon floor on the policy."""

    sections: ClassVar[dict[str, type]] = {"exploration": ExplorationConfig}

    length_groups: int = 1  # one padded batch (length groups split the ppo and pg losses only)
    td_lambda: float = 0.8  # TD(lambda) critic targets
    target_update_interval: int = (
        200  # critic steps (one per live time slot of a batch) between target copies
    )


@dataclass(frozen=True)
class DQNConfig(BaseLearnerConfig):
    """``dqn``: transitions drawn from the sampled episodes."""

    sections: ClassVar[dict[str, type]] = {"exploration": ExplorationConfig}

    double_q: bool = True
    target_update_interval: int = 200  # episodes between hard target updates
    target_update_tau: float = 0.0  # > 0: soft (Polyak) update every train step instead
    transition_batch_size: int = 256  # transitions per gradient step
    updates_per_step: float = 0.25  # gradient steps per new env step (at least one per train call)
    td_loss: str = "huber"  # huber | mse


@dataclass(frozen=True)
class MADDPGConfig(BaseLearnerConfig):
    """``maddpg`` (and DDPG): transitions drawn from the sampled episodes."""

    sections: ClassVar[dict[str, type]] = {"exploration": NoiseExplorationConfig}

    target_update_tau: float = 0.0  # > 0: soft (Polyak) update every train step
    transition_batch_size: int = 256  # transitions per gradient step
    updates_per_step: float = 0.25  # gradient steps per new env step (at least one per train call)
    critic_hidden_dim: int = 64  # MLP critic width
    critic_lr: float = 1e-3  # critic learning rate (learner.lr is the actor's)
    actor_reg: float = 1e-3  # weight of the mean squared actor pre-activations (Lowe et al. 2017)
    gumbel_tau: float = 1.0  # discrete actions: Gumbel-softmax temperature


# Sections that only some algorithms read (each family's ``sections`` says which); None in the other runs.
ALG_SECTIONS: tuple[str, ...] = ("mixer", "exploration")

# learner name -> its config family; a new learner family adds its dataclass and one line here
LEARNER_CONFIGS: dict[str, type[BaseLearnerConfig]] = {
    "q_learner": QLearnerConfig,
    "wqmix": WQMIXConfig,
    "qtran": QTRANConfig,
    "ppo": PPOConfig,
    "pg": PPOConfig,
    "coma": COMAConfig,
    "dqn": DQNConfig,
    "maddpg": MADDPGConfig,
}

# The default family (``Config().learner``); the name callers have always built Q-learner configs with.
LearnerConfig = QLearnerConfig


def learner_config_class(name: str) -> type[BaseLearnerConfig]:
    """The config family of learner ``name`` (:class:`BaseLearnerConfig` for a learner without one)."""
    return LEARNER_CONFIGS.get(name, BaseLearnerConfig)


@dataclass(frozen=True)
class RunnerConfig:
    """How episodes are collected."""

    name: str = "parallel"  # episode | parallel | ray
    batch_size_run: int = 8  # environments stepped together
    subprocess: bool = False  # step the envs in worker processes (worth it for slow envs, e.g. the real game)
    # off-policy learners: play the next episodes on a second thread during each update, with the weights of
    # the update before (one update of policy lag; marl/runners/overlap.py). On-policy learners never do.
    # Off by default: on the 2-core reference machine the learner slows as much as acting saves
    # (benchmarks/results/overlap.md).
    overlap: bool = False


@dataclass(frozen=True)
class RayConfig:
    """Ray cluster and env workers for ``runner.name=ray`` (and ``scripts/sweep.py``)."""

    address: str = (
        ""  # "": $RAY_ADDRESS if set, else a local Ray started in-process | auto | ray://host:10001
    )
    num_workers: int = 0  # env actors; runner.batch_size_run envs split evenly over them (0 = one per env)
    worker_cpus: float = 0.0  # CPUs reserved per env actor (1 on a cluster spreads them one per core)
    max_restarts: int = 3  # times Ray restarts a dead env actor (-1 = forever)
    max_episode_retries: int = 3  # times one batch of episodes is played again after a worker failure


@dataclass(frozen=True)
class LogConfig:
    """Console, JSONL and MindInsight logging; periodic greedy tests."""

    log_interval: int = 10_000  # env steps between console/JSONL/summary lines
    test_interval: int = 10_000  # env steps between greedy test phases
    test_nepisode: int = 32
    mindinsight: bool = True  # write a MindSpore SummaryRecord for MindInsight
    histogram_interval: int = 50_000  # env steps between Q histograms
    progress: bool = True  # one-line progress bar with ETA
    plot_interval_s: float = 60.0  # wall-clock seconds between curves.png refreshes in a run (0 = every test)


@dataclass(frozen=True)
class CheckpointConfig:
    """Periodic and best-model checkpoints."""

    save_interval: int = 100_000  # env steps between periodic saves (0 = only at the end)
    keep_last: int = 3
    save_best: bool = True  # also keep the best test-win-rate (or test-return) model
    save_buffer: bool = False  # also save the replay buffer and every RNG stream: exact resume, big files


@dataclass(frozen=True)
class Config:
    """A whole experiment."""

    alg: str = "qmix"
    seed: int = 0
    t_max: int = 2_050_000  # env steps to train
    results_dir: str = "results"
    run_name: str = ""  # default: <alg>_<map>_seed<seed>_<timestamp>
    ms_threads: int = 0  # MindSpore CPU threads; 0 = every core this process may use (a sweep: its share)
    ms_device: str = "cpu"  # MindSpore's device: cpu | gpu | ascend (where the build and the machine have it)
    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    # None where the learner family does not read the section (BaseLearnerConfig.sections): no mixer, or
    # an algorithm that explores by sampling its policy
    mixer: MixerConfig | None = field(default_factory=MixerConfig)
    exploration: ExplorationConfig | None = field(default_factory=ExplorationConfig)
    learner: BaseLearnerConfig = field(default_factory=QLearnerConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    ray: RayConfig = field(default_factory=RayConfig)
