"""The episode-buffer trainer shared by every multi-agent algorithm.

env → runner → episode batch → replay buffer → learner → logger / checkpoints. Every size comes from the
environment's ``get_env_info()``. A run lives in one folder (resolved config, ``log.jsonl``, MindInsight
summaries, ``curves.png``, ``models/``). It stops cleanly (checkpoint, curves) at ``t_max``, on Ctrl-C, or
when a file named ``stop`` appears in the run folder; a crash leaves the last checkpoint intact (saves
are atomic).
"""

from __future__ import annotations

import math
import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from marl import registry
from marl.buffers import EpisodeBatch, ReplayBuffer, Scheme
from marl.buffers.replay import (
    available_memory,
    capped_capacity,
    fill_shortfall,
    peak_rss,
    process_rss,
    reset_peak_rss,
    rows_that_fit,
    update_shortfall,
)
from marl.checkpoint import AGENT_CKPT, Checkpointer, latest, load_latest
from marl.config import Config, config_from_dict, config_to_dict, dump_config
from marl.config.schema import ALG_SECTIONS
from marl.envs.base import EnvInfo
from marl.envs.factory import EnvFactory, make_env_fn, probe_env, probe_env_info  # noqa: F401 (re-exported)
from marl.interrupt import raise_on_interrupt
from marl.learners.base import Learner, full_length_growth, step_footprint
from marl.logging import Logger
from marl.provenance import append_provenance, engine_label
from marl.run_folder import (
    RunBusyError,
    RunFolderError,
    RunLock,
    create_run_dir,
    default_run_name,
    read_log,
    remove_failed_start,
)
from marl.runners import RolloutStats
from marl.runners.overlap import run_beside
from marl.signals import NonFiniteError, RunStopped, StopSignals, exit_code, nonfinite_report
from marl.trainer_state import (  # nest/flatten re-exported: checkpoints' learner-state layout
    STOP_FILE,
    buffer_state,
    check_payload,
    check_same_env,
    env_rng_states,
    flatten_arrays,
    nest_arrays,
    restore_buffer,
    set_env_rng_states,
)
from marl.untrusted import os_error_line


class Trainer:
    """The episode trainer for every registered learner; see the module docstring.

    A learner (registry kind ``learner``) provides :class:`marl.learners.base.Learner`: the acting policy,
    ``train``, its weights and state, ``histograms`` (logged every ``log.histogram_interval`` steps) and
    ``on_policy`` (replayed episodes, or each fresh batch once).

    Construction validates everything (config, environment, networks, a resumed checkpoint's shapes)
    before it writes anything; only then is the run folder created (or, on resume, locked and its logs
    rewound to the checkpoint).
    """

    def __init__(self, cfg: Config | None, run_dir: Path | None = None, resume: Path | None = None) -> None:
        from marl.utils import ms as msu

        payload = None
        if resume is not None:
            resume = Path(resume)
            if not (resume / "models").is_dir():
                raise FileNotFoundError(f"--resume {resume}: not a run folder (no models/ inside)")
            payload = load_latest(resume, check=check_payload)
            read_log(resume)  # a malformed log.jsonl is refused before anything is written
            if cfg is None:  # else: the caller's config (the saved one plus command-line overrides)
                cfg = config_from_dict(payload["meta"]["config"])
        self.cfg = cfg
        msu.setup(threads=cfg.ms_threads, seed=cfg.seed, device=cfg.ms_device)
        # -- everything below is validation and building: nothing is written before the folder step --
        self.info, self.engine = probe_env(cfg)  # engine: version and resolved backend (provenance)
        if payload is not None:
            check_same_env(EnvInfo.from_dict(payload["meta"]["env_info"]), self.info, f"--resume {resume}")
        self.scheme = Scheme(self.info)
        self.learner = registry.build("learner", cfg.learner.name, info=self.info, cfg=cfg)
        if not isinstance(self.learner, Learner):
            raise TypeError(f"learner {cfg.learner.name!r} does not provide marl.learners.base.Learner")
        self.on_policy = bool(self.learner.on_policy)
        self.overlap = cfg.runner.overlap and not self.on_policy  # on-policy: act, then learn
        if self.on_policy:
            self.buffer = None
        else:
            lc = cfg.learner
            capacity = capped_capacity(self.scheme, lc.buffer_size, lc.buffer_max_gib, lc.batch_size)
            self.buffer = ReplayBuffer(self.scheme, capacity)
        self.fresh: list[EpisodeBatch] = []  # on-policy: episodes collected since the last update
        self.controller = self.learner.make_controller(seed=cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.t_env = self.episode = self.train_steps = self.nonfinite_skips = 0
        self.last = {"test": -math.inf, "log": 0, "save": 0, "hist": 0}
        self.best_metric = -math.inf
        self._closed = self._said_inexact = False
        self._memory_checked = False  # after this process's first update (also after a resume)
        self.last_plot = -math.inf  # wall-clock of the last curves.png during the run
        if payload is not None:
            print(f"[resume] {payload['_checkpoint']['path']} (t_env={payload['meta']['t_env']})")
            self._restore(payload)
        self.controller.load_weights(self.learner.actor_weights())
        offset = 0 if payload is not None and "envs" in payload else self.episode  # fresh seeds on resume
        self.runner = registry.build(
            "runner",
            cfg.runner.name,
            env_fn=make_env_fn(cfg, offset),
            scheme=self.scheme,
            controller=self.controller,
            cfg=cfg,
        )
        if payload is not None and "envs" in payload:
            set_env_rng_states(self.runner, payload["envs"])
        # -- the folder: created (fresh run) or locked and rewound (resume) --
        with raise_on_interrupt():  # a Ctrl-C here is undone like any failure (CLI runs)
            self._open_folder(resume, run_dir, payload)

    def _open_folder(self, resume: Path | None, run_dir: Path | None, payload: dict[str, Any] | None) -> None:
        """Create (or, resuming, lock and rewind) the run folder; a failure leaves no stray folder or file."""
        cfg = self.cfg
        fresh = resume is None
        try:
            self.run_dir = resume if resume is not None else self._new_folder(run_dir)
        except BaseException:
            self.runner.close()
            raise
        try:
            self.lock = RunLock(self.run_dir).acquire()
        except BaseException as exc:
            self.runner.close()
            if fresh and not isinstance(exc, RunBusyError):
                remove_failed_start(self.run_dir)  # e.g. a full disk: no folder holding only .lock
            raise
        try:
            stale = self.run_dir / STOP_FILE
            if stale.exists():
                stale.unlink()
                print(f"[run] removed the stop file {stale} left by an earlier stop")
            dump_config(cfg, self.run_dir / "config.yaml")
            append_provenance(self.run_dir, "start" if fresh else "resume", self.engine)
            rewind = int(payload["meta"]["t_env"]) if payload is not None else None
            self.logger = Logger(
                self.run_dir,
                cfg,
                cfg.t_max,
                console=True,
                mindinsight=cfg.log.mindinsight,
                progress_bar=cfg.log.progress,
                rewind_to=rewind,
            )
            self.checkpointer = Checkpointer(self.run_dir, cfg.checkpoint.keep_last, cfg.checkpoint.save_best)
        except BaseException as exc:
            self.lock.release()
            self.runner.close()
            if fresh and not latest(self.run_dir):
                shutil.rmtree(self.run_dir, ignore_errors=True)  # a failed launch leaves no stray folder
            if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):  # full disk, ...
                raise RunFolderError(
                    os_error_line(exc, "cannot write to the run folder", self.run_dir)
                ) from None
            raise

    def _new_folder(self, run_dir: Path | None) -> Path:
        cfg = self.cfg
        if run_dir is not None:
            return create_run_dir(Path(run_dir).parent, Path(run_dir).name, explicit=True)
        name = cfg.run_name or default_run_name(cfg.alg, cfg.env.map_name, cfg.seed)
        return create_run_dir(cfg.results_dir, name, explicit=bool(cfg.run_name))

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
        payload = {"arrays": nest_arrays(self.learner.state_dict()), "meta": meta, "rng": rng}
        if self.cfg.checkpoint.save_buffer:  # exact resume: the data and every env's random stream
            payload["buffer"] = buffer_state(self.buffer, self.fresh)
            states = env_rng_states(self.runner)
            if states is not None:
                payload["envs"] = states
            elif not self._said_inexact:
                self._said_inexact = True
                print(
                    "[run] checkpoint.save_buffer: these envs do not expose their random streams; a resume "
                    "restores the buffer and RNGs but gives the envs fresh seeds (not bit-exact)"
                )
        return payload

    def _restore(self, payload: dict[str, Any]) -> None:
        meta = payload["meta"]
        try:
            self.learner.load_state_dict(flatten_arrays(payload["arrays"]))
        except (KeyError, ValueError, RuntimeError, TypeError) as exc:
            raise ValueError(
                f"the checkpoint {payload['_checkpoint']['path']} does not fit this configuration ({exc}); "
                "overrides that change network shapes or the algorithm cannot be resumed"
            ) from exc
        self.t_env, self.episode, self.train_steps = meta["t_env"], meta["episode"], meta["train_steps"]
        self.last = dict(meta["last"])
        self.best_metric = meta["best_metric"]
        self.rng.bit_generator.state = payload["rng"]["trainer"]
        self.controller.rng.bit_generator.state = payload["rng"]["controller"]
        if "buffer" in payload:
            self.fresh = restore_buffer(self.buffer, self.scheme, payload["buffer"])

    def save(self, metric: float | None = None) -> Path:
        """Write a checkpoint of everything needed to resume (the replay buffer with
        ``checkpoint.save_buffer``). A failed write (disk full, ...) ends the run with :class:`RunStopped`
        naming the intact checkpoint that remains (writes are atomic). The folder also holds ``agent.ckpt``:
        the acting network's weights in MindSpore's format (``mindspore.load_checkpoint`` loads it into the
        ``marl.modules`` network the learner acts with)."""
        from marl.utils.ms import save_ms_checkpoint

        weights = self.learner.actor_weights()
        exports = {AGENT_CKPT: lambda path: save_ms_checkpoint(weights, path)}
        try:
            return self.checkpointer.save(self.t_env, self._payload(), metric, exports)
        except OSError as exc:
            raise RunStopped(
                f"cannot write a checkpoint at t_env={self.t_env} ({exc.strerror or exc}); the newest intact "
                f"checkpoint is {latest(self.run_dir)}; free space and continue with --resume {self.run_dir}",
                exit_code=1,
            ) from exc

    # -- phases ----------------------------------------------------------------------------------
    def _test(self) -> dict[str, float]:
        stats = RolloutStats()
        n_batches = math.ceil(self.cfg.log.test_nepisode / self.runner.n_envs)
        for _ in range(n_batches):
            _, s = self.runner.run(self.t_env, test_mode=True)
            stats.extend(s)
        return stats.summary("test_")

    def _round(self) -> tuple[RolloutStats, dict[str, float] | None]:
        """One round: the runner's next batch of episodes, stored, and a learner update when there is enough
        data; returns the episodes' results and the learner's stats (None without an update).

        With ``runner.overlap`` (off-policy learners), once the buffer can be sampled the update runs on the
        episodes already stored while the runner plays the next batch on a second thread with the weights of
        the update before (:mod:`marl.runners.overlap`); that batch is stored after the update, so a
        checkpoint between rounds holds the same kind of state as without overlap."""
        if self.overlap and self.buffer.can_sample(self.cfg.learner.batch_size):
            (batch, stats), (out, weights) = run_beside(self._act, self._train)
            self.controller.load_weights(weights)
            self._count(stats)
            self._store(batch)
            return stats, out
        batch, stats = self._act()
        self._count(stats)
        if not self._store(batch):
            return stats, None
        out, weights = self._train()
        self.controller.load_weights(weights)
        return stats, out

    def _act(self) -> tuple[EpisodeBatch, RolloutStats]:
        return self.runner.run(self.t_env, test_mode=False)

    def _count(self, stats: RolloutStats) -> None:
        self.t_env += int(sum(stats.lengths))
        self.episode += len(stats.lengths)
        self.logger.advance(self.t_env)

    def _store(self, batch: EpisodeBatch) -> bool:
        """Keep new episodes (the replay buffer, or on-policy the list of fresh ones); True once an update
        can run."""
        n = self.cfg.learner.batch_size
        if self.on_policy:
            self.fresh.append(batch)
            return sum(b.batch_size for b in self.fresh) >= n
        self.buffer.insert(batch)
        return self.buffer.can_sample(n)

    def _train(self) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """One learner update on a sampled batch (or the fresh episodes, which it consumes); returns the
        learner's stats and the new acting weights (the caller hands them to the controller)."""
        if self.on_policy:
            batch, self.fresh = EpisodeBatch.concat(self.fresh), []
        else:
            batch = self.buffer.sample(self.cfg.learner.batch_size, self.rng)
        check = not self._memory_checked and self.cfg.learner.memory_check
        before = reset_peak_rss() if check else None
        out = self.learner.train(batch, self.t_env, self.episode)
        self.train_steps += 1
        if check:
            self._memory_checked = True
            self._check_memory(batch, before)
        weights = self.learner.actor_weights()
        self._check_finite(out, weights)
        if self.t_env - self.last["hist"] >= self.cfg.log.histogram_interval:
            self.last["hist"] = self.t_env
            for key, values in self.learner.histograms(batch).items():
                self.logger.log_histogram(key, values, self.t_env)
        return out, weights

    def _check_memory(self, batch: EpisodeBatch, before: int | None) -> None:
        """After the first update: stop (exit 1) if the rest of the buffer (none on-policy), and the
        learner's step grown to full-length episodes (:func:`~marl.learners.base.full_length_growth`) would
        not fit."""
        rss, gib = process_rss(), 2**30
        growth, step_bytes, slots = 0, 0, self.scheme.max_seq_length
        footprint = step_footprint(self.learner, batch)
        if rss is not None and before is not None:
            peak = peak_rss() or rss
            step_bytes = max(peak - before, 0)
            growth = full_length_growth(self.learner, batch, slots, before, peak, rss)
        available = available_memory()
        if rss is None or available is None:
            return
        buf, per_episode = self.buffer, self.scheme.bytes_per_episode()
        rest = 0 if buf is None else buf.capacity - buf.size
        hint = 0  # learner.update_rows that would fit, where the learner can split its update by rows
        if step_bytes and getattr(self.learner, "rows_splittable", False):
            rows_now = self.cfg.learner.update_rows or batch.batch_size
            hint = rows_that_fit(rest * per_episode, step_bytes, footprint, slots, available)
            hint = hint if hint < rows_now else 0
        to_come = f"the buffer's {rest} episodes to come {rest * per_episode / gib:.1f} GiB, " if rest else ""
        print(
            f"[memory] after the first update: {rss / gib:.1f} GiB resident; {to_come}the learner's step on "
            f"full-length episodes {growth / gib:.1f} GiB more (estimated); {available / gib:.1f} GiB "
            "available"
        )
        if buf is None:
            short = update_shortfall(self.cfg.learner.batch_size, rss, available, growth, hint)
        else:
            short = fill_shortfall(buf.capacity, buf.size, per_episode, rss, available, growth, hint)
        if short is not None:
            raise RunStopped(f"stopped at t_env={self.t_env}: {short}", exit_code=1)

    def _check_finite(self, out: dict[str, float], weights: dict[str, np.ndarray]) -> None:
        """``learner.on_nonfinite`` (see :func:`marl.signals.nonfinite_report`): stop, or count a skip."""
        what = nonfinite_report(out, weights, self.cfg.learner.on_nonfinite, self.train_steps, self.t_env)
        if what is not None:
            self.nonfinite_skips += 1
            self.logger.log("nonfinite_skips", self.nonfinite_skips, self.t_env)
            if self.nonfinite_skips == 1 or self.nonfinite_skips % 100 == 0:
                print(f"[run] skipped a non-finite update: {what} ({self.nonfinite_skips} so far)")

    def run(self) -> Path:
        """Train until ``t_max`` or a stop request (a signal, the stop file); returns the run folder.

        A first SIGINT/SIGTERM ends the run after the current phase with a checkpoint and the curves, then
        raises :class:`RunInterrupted` (the CLI exits 130/143); a second one aborts at once.
        """
        cfg = self.cfg
        stop_file = self.run_dir / STOP_FILE
        window = RolloutStats()
        train_out: dict[str, float] = {}
        t0, t_env0, reason = time.time(), self.t_env, "t_max reached"
        engine = f"  engine: {engine_label(self.engine)}" if self.engine else ""
        print(f"[run] {self.run_dir}{engine}  env info: {self.info}")
        signals = StopSignals()
        try:
            with signals:
                while self.t_env < cfg.t_max and not signals.requested:
                    stats, out = self._round()
                    window.extend(stats)
                    train_out = out or train_out
                    signals.reassert()  # every MindSpore execution re-installs its own SIGINT handler
                    if cfg.log.test_nepisode and self.t_env - self.last["test"] >= cfg.log.test_interval:
                        self._test_phase(t0)
                    if self.t_env - self.last["log"] >= cfg.log.log_interval:
                        self.last["log"] = self.t_env
                        self._log_window(window, train_out, t0, t_env0)
                        window = RolloutStats()
                    every = cfg.checkpoint.save_interval
                    if every and self.t_env - self.last["save"] >= every:
                        self.last["save"] = self.t_env
                        self.save()
                    signals.reassert()  # after the MindSpore calls of tests, summaries and saves
                    if stop_file.exists():
                        reason = f"stop file {stop_file}"
                        stop_file.unlink(missing_ok=True)  # consumed: a later --resume runs on
                        break
                if signals.requested:
                    reason = f"{signal.Signals(signals.signum).name} received"
                self._finish(reason)
        except NonFiniteError as exc:
            self._close()
            raise RunStopped(str(exc), exit_code=1) from None
        except RunStopped:
            self._close()
            raise
        except KeyboardInterrupt:  # a second signal: abandon at once; saves are atomic
            self._close(plot=False)
            raise RunStopped(
                "stopped by a second signal; the last complete checkpoint is intact",
                exit_code=exit_code(signals.signum or signal.SIGINT),
            ) from None
        except BaseException:
            # A crash: keep the last good checkpoint as it is (no save from a possibly broken state).
            self._close()
            raise
        if signals.requested:
            raise RunStopped(f"{reason}; checkpoint saved", exit_code=exit_code(signals.signum))
        return self.run_dir

    def _test_phase(self, t0: float) -> None:
        cfg, log = self.cfg, self.logger
        self.last["test"] = self.t_env
        test = self._test()
        test["time_s"] = time.time() - t0  # wall-clock since the start of this process's run
        for k, v in test.items():
            log.log(k, v, self.t_env)
        log.print_table(self.t_env)
        now = time.time()  # the curves PNG stays current; drawing it costs ~0.5 s, so not at every test
        if now - self.last_plot >= cfg.log.plot_interval_s:
            self.last_plot = now
            log.plot()
        if cfg.checkpoint.save_best:
            metric = test["test_win_rate"] if self._has_battles() else test["test_return_mean"]
            if metric > self.best_metric:
                self.best_metric = metric
                self.save(metric)

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

    def _lineage(self) -> None:
        """Hyper-parameters beside the latest test metrics, for MindInsight's lineage comparison of runs."""
        cfg, d = self.cfg, config_to_dict(self.cfg)
        hp: dict[str, Any] = {"alg": cfg.alg, "env": cfg.env.name, "map": cfg.env.map_name, "seed": cfg.seed}
        for section in ("learner", "agent", *ALG_SECTIONS):  # ALG_SECTIONS: if the algorithm reads them
            for k, v in d.get(section, {}).items():
                if isinstance(v, (bool, int, float, str)):
                    hp[k if section == "learner" else f"{section}.{k}"] = v
        metrics = {k: v for k, v in self.logger.latest.items() if k.startswith("test_")}
        self.logger.log_lineage(cfg.alg, hp, metrics, self.t_env)

    def _finish(self, reason: str) -> None:
        print(f"[run] stopping at t_env={self.t_env}: {reason}")
        if (plan := getattr(self.learner, "length_plan", None)) is not None and any(plan.compiled.values()):
            print(f"[learner] {plan.summary()}")
        self._lineage()
        try:
            print(f"[run] checkpoint: {self.save()}")
        finally:
            self._close()

    def _close(self, plot: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        self.runner.close()
        self.logger.close(plot=plot)
        self.lock.release()
        print(f"[run] results in {self.run_dir}")


def with_overrides(cfg: Config, **sections: dict[str, Any]) -> Config:
    """``cfg`` with some section fields replaced: ``with_overrides(cfg, learner={"lr": 1e-3})``."""
    changes = {name: replace(getattr(cfg, name), **vals) for name, vals in sections.items()}
    return replace(cfg, **changes)
