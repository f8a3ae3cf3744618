"""Greedy evaluation of a saved policy: the checkpoint's learner, its environment, ``episodes`` test episodes.

Used by ``scripts/evaluate.py`` and by the report's absolute metric (Gorsane et al. 2022: the best
checkpoint of a run re-evaluated over ten times the usual number of test episodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from marl import registry
from marl.buffers import Scheme
from marl.config import config_from_dict
from marl.envs.base import EnvInfo
from marl.envs.factory import make_env_fn
from marl.runners import RolloutStats
from marl.trainer_state import check_same_env, flatten_arrays


@dataclass(frozen=True)
class Policy:
    """A checkpoint's learner on the environment it is played on (see :func:`load_policy`)."""

    cfg: Any  # the run's config with the seed and env changes applied
    info: EnvInfo
    env_fn: Any  # make_env_fn(cfg)
    engine: dict[str, Any]  # the env's engine record ({} where it has no versioned engine)
    learner: Any

    def controller(self, seed: int) -> Any:
        """A fresh acting controller with the checkpoint's weights."""
        controller = self.learner.make_controller(seed=seed)
        controller.load_weights(self.learner.actor_weights())
        return controller


def load_policy(
    payload: dict[str, Any],
    seed: int,
    map_name: str | None = None,
    backend: str | None = None,
    device: str | None = None,
) -> Policy:
    """The learner of a loaded checkpoint (:func:`marl.checkpoint.load`), its weights restored, on its
    environment (``map_name``/``backend`` changed where given; MindSpore set up on ``device``, by default
    the one it trained on). Raises ``ValueError`` when the environment's sizes differ from the
    checkpoint's."""
    from marl.utils import ms as msu

    cfg = config_from_dict(payload["meta"]["config"])
    env_changes = {}
    if map_name:
        env_changes["map_name"] = map_name
    if backend:
        env_changes["backend"] = backend
    cfg = replace(cfg, seed=seed, env=replace(cfg.env, **env_changes))
    msu.setup(threads=cfg.ms_threads, device=device or cfg.ms_device)
    env_fn = make_env_fn(cfg)
    probe = env_fn(0)
    info = probe.env_info()
    engine = probe.engine_info() if hasattr(probe, "engine_info") else {}  # what the numbers were played on
    probe.close()
    check_same_env(
        EnvInfo.from_dict(payload["meta"]["env_info"]), info, f"evaluate {payload['_checkpoint']['path']}"
    )
    learner = registry.build("learner", cfg.learner.name, info=info, cfg=cfg)
    learner.load_state_dict(flatten_arrays(payload["arrays"]))
    return Policy(cfg, info, env_fn, dict(engine), learner)


def evaluate_payload(
    payload: dict[str, Any],
    episodes: int,
    n_envs: int = 8,
    seed: int = 12345,
    map_name: str | None = None,
    backend: str | None = None,
    save_replay: bool = False,
    device: str | None = None,
    replay_format: str = "gif",
) -> tuple[dict[str, Any], str | None]:
    """Play ``episodes`` greedy episodes with a loaded checkpoint (:func:`marl.checkpoint.load`).

    Returns ``({"episodes", "win_rate", "return_mean", "ep_length_mean", "won", "returns"}, replay path or
    None)``; ``won`` and ``returns`` list every episode; ``engine`` is the env's engine record (version and
    resolved backend) where it has a versioned engine. Raises ``ValueError`` when the environment's sizes
    differ from those the checkpoint was trained on. ``replay_format`` (``gif`` or ``mp4``) is the file format
    of the replay that ``save_replay`` writes on the embedded engine.
    """
    if episodes < 1 or n_envs < 1:
        raise ValueError(f"episodes and n_envs must be >= 1, got {episodes} and {n_envs}")
    policy = load_policy(payload, seed, map_name, backend, device)
    n_envs = min(n_envs, episodes)
    runner = registry.build(
        "runner",
        "parallel",
        env_fn=policy.env_fn,
        scheme=Scheme(policy.info),
        controller=policy.controller(seed),
        batch_size_run=n_envs,
        batched=not save_replay,  # replays come from per-env StarCraft2Envs
    )
    stats = RolloutStats()
    try:
        for _ in range(math.ceil(episodes / n_envs)):
            _, s = runner.run(t_env=0, test_mode=True)
            stats.extend(s)
        replay = runner.call(0, "save_replay", replay_format) if save_replay else None
    finally:
        runner.close()
    won = [bool(w) for w in stats.won[:episodes]]
    returns = [float(r) for r in stats.returns[:episodes]]
    result = {
        "episodes": episodes,
        "win_rate": sum(won) / episodes,
        "return_mean": sum(returns) / episodes,
        "ep_length_mean": float(sum(stats.lengths[:episodes]) / episodes),
        "won": won,
        "returns": returns,
    }
    if policy.engine:
        result["engine"] = dict(policy.engine)
    return result, replay
