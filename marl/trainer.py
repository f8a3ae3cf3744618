"""The episode-buffer trainer shared by every multi-agent algorithm.

env → runner → episode batch → replay buffer → learner → logger / checkpoints. Every size comes from the
environment's ``get_env_info()``. A run lives in one folder (resolved config, ``log.jsonl``, MindInsight
summaries, ``curves.png``, ``models/``). It stops cleanly (checkpoint, curves) at ``t_max``, on Ctrl-C, or
when a file named ``stop`` appears in the run folder; a crash leaves the last checkpoint intact (saves
are atomic).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from marl import registry
from marl.buffers import EpisodeBatch, ReplayBuffer, Scheme
from marl.checkpoint import Checkpointer, latest, load
from marl.config import Config, config_from_dict, config_to_dict, dump_config
from marl.envs.base import EnvInfo, MultiAgentEnv
from marl.logging import Logger
from marl.runners import RolloutStats


def make_env_fn(cfg: Config, seed_offset: int = 0) -> EnvFactory:
    """A picklable ``env_fn(row)`` building env ``row`` of the configured kind, seeded per row."""
    return EnvFactory(
        cfg.env.name, cfg.env.map_name, cfg.env.backend, dict(cfg.env.args), cfg.seed, seed_offset
    )


class EnvFactory:
    """Builds env ``row`` with seed ``seed * 10_000 + offset + row`` (distinct per row and per resume)."""

    def __init__(self, name: str, map_name: str, backend: str, args: dict[str, Any], seed: int, offset: int):
        self.name, self.map_name, self.backend, self.args = name, map_name, backend, args
        self.seed, self.offset = seed, offset

    def __call__(self, row: int) -> MultiAgentEnv:
        seed = self.seed * 10_000 + self.offset + row
        return registry.build(
            "env", self.name, map_name=self.map_name, backend=self.backend, seed=seed, **self.args
        )


def nest_arrays(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    """``{"a/b": x}`` → ``{"a": {"b": x}}``: learner state keys use ``/``, the checkpoint's own separator."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def flatten_arrays(tree: dict[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    """Inverse of :func:`nest_arrays`."""
    flat: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten_arrays(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def probe_env_info(cfg: Config) -> EnvInfo:
    """Build one env, read its :class:`EnvInfo`, close it."""
    env = make_env_fn(cfg)(0)
    try:
        return env.env_info()
    finally:
        env.close()


def default_run_dir(cfg: Config) -> Path:
    """``results_dir/<run_name>`` (default name: alg_map_seed_timestamp)."""
    name = cfg.run_name or f"{cfg.alg}_{cfg.env.map_name}_seed{cfg.seed}_{time.strftime('%Y%m%d-%H%M%S')}"
    return Path(cfg.results_dir) / name


class Trainer:
    """The episode trainer for every registered learner; see the module docstring.

    A learner (registry kind ``learner``) provides ``make_controller(seed)`` (the acting policy the runner
    calls), ``train(batch, t_env, episode) -> dict``, ``actor_weights()``, ``state_dict()`` /
    ``load_state_dict()``, optionally ``histograms(batch) -> dict[str, array]`` (logged every
    ``log.histogram_interval`` steps), and ``on_policy``: off-policy learners (QMIX, MADDPG, DQN, ...) train
    on episodes sampled from the replay buffer after every rollout; on-policy learners (PPO, policy gradient)
    train once on every ``learner.batch_size`` freshly collected episodes, which are then discarded.
    """

    def __init__(self, cfg: Config | None, run_dir: Path | None = None, resume: Path | None = None) -> None:
        from marl.utils import ms as msu

        payload = None
        if resume is not None:
            ckpt = latest(Path(resume))
            if ckpt is None:
                raise FileNotFoundError(f"--resume {resume}: no checkpoint under {Path(resume) / 'models'}")
            payload = load(ckpt)
            if cfg is None:  # else: the caller's config (the saved one plus command-line overrides)
                cfg = config_from_dict(payload["meta"]["config"])
            run_dir = Path(resume)
            print(f"[resume] {ckpt} (t_env={payload['meta']['t_env']})")
        self.cfg = cfg
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir(cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, self.run_dir / "config.yaml")
        msu.setup(threads=cfg.ms_threads, seed=cfg.seed)

        self.info = probe_env_info(cfg)
        self.scheme = Scheme(self.info)
        self.learner = registry.build("learner", cfg.learner.name, info=self.info, cfg=cfg)
        self.on_policy = bool(getattr(self.learner, "on_policy", False))
        self.buffer = None if self.on_policy else ReplayBuffer(self.scheme, cfg.learner.buffer_size)
        self.fresh: list[EpisodeBatch] = []  # on-policy: episodes collected since the last update
        self.controller = self.learner.make_controller(seed=cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.t_env = self.episode = self.train_steps = 0
        self.last = {"test": -math.inf, "log": 0, "save": 0, "hist": 0}
        self.best_metric = -math.inf
        if payload is not None:
            self._restore(payload)
        self.controller.load_weights(self.learner.actor_weights())
        offset = self.episode  # fresh env seeds after a resume
        self.runner = registry.build(
            "runner",
            cfg.runner.name,
            env_fn=make_env_fn(cfg, offset),
            scheme=self.scheme,
            controller=self.controller,
            cfg=cfg,
        )
        self.logger = Logger(self.run_dir, cfg, cfg.t_max, console=True, mindinsight=cfg.log.mindinsight)
        self.checkpointer = Checkpointer(self.run_dir, cfg.checkpoint.keep_last, cfg.checkpoint.save_best)

    # -- checkpoints -----------------------------------------------------------------------------
    def _payload(self) -> dict[str, Any]:
        meta = {
            "t_env": self.t_env,
            "episode": self.episode,
            "train_steps": self.train_steps,
            "last": self.last,
            "best_metric": self.best_metric,
            "config": config_to_dict(self.cfg),
            "env_info": self.info.as_dict(),
        }
        rng = {"trainer": self.rng.bit_generator.state, "controller": self.controller.rng.bit_generator.state}
        return {"arrays": nest_arrays(self.learner.state_dict()), "meta": meta, "rng": rng}

    def _restore(self, payload: dict[str, Any]) -> None:
        meta = payload["meta"]
        self.learner.load_state_dict(flatten_arrays(payload["arrays"]))
        self.t_env, self.episode, self.train_steps = meta["t_env"], meta["episode"], meta["train_steps"]
        self.last = dict(meta["last"])
        self.best_metric = meta["best_metric"]
        self.rng.bit_generator.state = payload["rng"]["trainer"]
        self.controller.rng.bit_generator.state = payload["rng"]["controller"]

    def save(self, metric: float | None = None) -> Path:
        """Write a checkpoint of everything needed to resume (not the replay buffer)."""
        return self.checkpointer.save(self.t_env, self._payload(), metric)

    # -- phases ----------------------------------------------------------------------------------
    def _test(self) -> dict[str, float]:
        stats = RolloutStats()
        n_batches = math.ceil(self.cfg.log.test_nepisode / self.runner.n_envs)
        for _ in range(n_batches):
            _, s = self.runner.run(self.t_env, test_mode=True)
            stats.extend(s)
        return stats.summary("test_")

    def _learn(self, batch: EpisodeBatch) -> dict[str, float] | None:
        """Store the new episodes and train when there is enough data; returns the learner's stats."""
        n = self.cfg.learner.batch_size
        if self.on_policy:
            self.fresh.append(batch)
            if sum(b.batch_size for b in self.fresh) < n:
                return None
            batch, self.fresh = EpisodeBatch.concat(self.fresh), []
        else:
            self.buffer.insert(batch)
            if not self.buffer.can_sample(n):
                return None
            batch = self.buffer.sample(n, self.rng)
        out = self.learner.train(batch, self.t_env, self.episode)
        self.train_steps += 1
        self.controller.load_weights(self.learner.actor_weights())
        histograms = getattr(self.learner, "histograms", None)  # optional: distributions for MindInsight
        if histograms is not None and self.t_env - self.last["hist"] >= self.cfg.log.histogram_interval:
            self.last["hist"] = self.t_env
            for key, values in histograms(batch).items():
                self.logger.log_histogram(key, values, self.t_env)
        return out

    def run(self) -> Path:
        """Train until ``t_max`` (or a stop request); returns the run folder."""
        cfg, log = self.cfg, self.logger
        stop_file = self.run_dir / "stop"
        window = RolloutStats()
        train_out: dict[str, float] = {}
        t0, t_env0, reason = time.time(), self.t_env, "t_max reached"
        print(f"[run] {self.run_dir}  env info: {self.info}")
        try:
            while self.t_env < cfg.t_max:
                batch, stats = self.runner.run(self.t_env, test_mode=False)
                self.t_env += int(sum(stats.lengths))
                self.episode += len(stats.lengths)
                window.extend(stats)
                train_out = self._learn(batch) or train_out
                if self.t_env - self.last["test"] >= cfg.log.test_interval:
                    self.last["test"] = self.t_env
                    test = self._test()
                    test["time_s"] = time.time() - t0  # wall-clock since the start of this process's run
                    for k, v in test.items():
                        log.log(k, v, self.t_env)
                    log.plot()  # the learning-curve PNG stays current during the run
                    if cfg.checkpoint.save_best:
                        metric = test["test_win_rate"] if self._has_battles() else test["test_return_mean"]
                        if metric > self.best_metric:
                            self.best_metric = metric
                            self.save(metric)
                if self.t_env - self.last["log"] >= cfg.log.log_interval:
                    self.last["log"] = self.t_env
                    self._log_window(window, train_out, t0, t_env0)
                    window = RolloutStats()
                if (
                    cfg.checkpoint.save_interval
                    and self.t_env - self.last["save"] >= cfg.checkpoint.save_interval
                ):
                    self.last["save"] = self.t_env
                    self.save()
                if stop_file.exists():
                    reason = f"stop file {stop_file}"
                    break
        except KeyboardInterrupt:
            reason = "interrupted (Ctrl-C)"
        except BaseException:
            # A crash: keep the last good checkpoint as it is (no save from a possibly broken state).
            self._close()
            raise
        self._finish(reason)
        return self.run_dir

    def _has_battles(self) -> bool:
        return any("battles_game" in s for s in self.runner.env_stats())

    def _log_window(self, window: RolloutStats, train_out: dict[str, float], t0: float, t_env0: int) -> None:
        log = self.logger
        values = dict(window.summary())
        values.update(train_out)
        values["epsilon"] = self.controller.epsilon(self.t_env)
        values["episode"] = float(self.episode)
        values["steps_per_sec"] = (self.t_env - t_env0) / max(1e-9, time.time() - t0)
        for k, v in values.items():
            log.log(k, v, self.t_env)
        log.print_progress(self.t_env, self.episode, values)

    def _finish(self, reason: str) -> None:
        print(f"[run] stopping at t_env={self.t_env}: {reason}")
        try:
            print(f"[run] checkpoint: {self.save()}")
        finally:
            self._close()

    def _close(self) -> None:
        self.runner.close()
        self.logger.close()
        print(f"[run] results in {self.run_dir}")


def train(cfg: Config, resume: Path | None = None) -> Path:
    """Build a :class:`Trainer` and run it; returns the run folder."""
    return Trainer(cfg, resume=resume).run()


def with_overrides(cfg: Config, **sections: dict[str, Any]) -> Config:
    """``cfg`` with some section fields replaced: ``with_overrides(cfg, learner={"lr": 1e-3})``."""
    changes = {name: replace(getattr(cfg, name), **vals) for name, vals in sections.items()}
    return replace(cfg, **changes)
