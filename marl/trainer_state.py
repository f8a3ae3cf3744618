"""What a trainer checkpoint holds beyond the learner's own state: the replay buffer (or the on-policy
episodes not yet trained on) and every env's random stream, for ``checkpoint.save_buffer`` (exact resume);
plus the helpers that turn flat learner state into the checkpoint's nested layout and back.

Exact resume needs each env's random stream. Vector envs provide it through ``rng_states()`` /
``set_rng_states(states)`` when their envs can (the embedded SMAC engine, in-process envs with
``get_rng_state``/``set_rng_state`` such as the fake env); otherwise :func:`env_rng_states` returns
``None`` and a resumed run continues with fresh env seeds (it says so).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marl.buffers import EpisodeBatch, ReplayBuffer, Scheme
from marl.checkpoint_verify import META, CheckpointError
from marl.envs.base import EnvInfo

STOP_FILE = "stop"
ENV_KEYS = ("n_agents", "n_actions", "obs_shape", "state_shape", "episode_limit")


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


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 0


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))


def check_payload(payload: dict[str, Any]) -> None:
    """Refuse a loaded trainer checkpoint whose content a resume or an evaluation cannot use (a
    :class:`CheckpointError` naming ``meta.json`` and the field), so the caller walks back past it."""
    from marl.config import config_from_dict

    where = f"{payload['_checkpoint']['path']}/{META}"

    def need(ok: bool, field: str, what: str) -> None:
        if not ok:
            raise CheckpointError(f"{where}: {field} must be {what}")

    meta = payload.get("meta")
    need(isinstance(meta, dict), "meta", "an object")
    for key in ("t_env", "episode", "train_steps"):
        need(_is_int(meta.get(key)), f"meta.{key}", "an int >= 0")
    need(meta["t_env"] == payload["_checkpoint"]["t_env"], "meta.t_env", "the checkpoint's t_env")
    last = meta.get("last")
    need(isinstance(last, dict) and all(_is_num(v) for v in last.values()), "meta.last", "numbers by name")
    need(_is_num(meta.get("best_metric")), "meta.best_metric", "a number")
    need(isinstance(payload.get("arrays"), dict), "arrays", "an object of arrays")
    rng = payload.get("rng")
    need(isinstance(rng, dict), "rng", "an object")
    for key in ("trainer", "controller"):
        need(isinstance(rng.get(key), dict), f"rng.{key}", "a NumPy bit-generator state")
    try:
        config_from_dict(
            meta.get("config") if isinstance(meta.get("config"), dict) else {}, f"{where}: config"
        )
        EnvInfo.from_dict(meta["env_info"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointError(f"{where}: meta.config or meta.env_info unusable ({exc})") from None
    need(isinstance(meta.get("config"), dict), "meta.config", "an object")
    if "buffer" in payload:
        need(
            isinstance(payload["buffer"], dict) and _is_int(payload["buffer"].get("size")),
            "buffer",
            "an object with size",
        )


def check_same_env(trained: EnvInfo, now: EnvInfo, what: str) -> None:
    """Refuse an environment whose sizes differ from the checkpoint's (``what`` names the action)."""
    bad = [
        f"{k}: trained {getattr(trained, k)}, now {getattr(now, k)}"
        for k in ENV_KEYS
        if getattr(trained, k) != getattr(now, k)
    ]
    if bad:
        raise ValueError(f"{what}: the checkpoint does not fit this environment ({'; '.join(bad)})")


def buffer_state(buffer: ReplayBuffer | None, fresh: list[EpisodeBatch]) -> dict[str, Any]:
    """The replay buffer's stored episodes and ring position, or the pending on-policy episodes."""
    if buffer is not None:
        n = buffer.size
        return {
            "data": {k: v[:n].copy() for k, v in buffer.storage.data.items()},
            "index": buffer.index,
            "size": buffer.size,
            "episodes_in": buffer.episodes_in,
        }
    if not fresh:
        return {"size": 0}
    batch = EpisodeBatch.concat(fresh)
    return {"data": dict(batch.data), "size": batch.batch_size}


def restore_buffer(buffer: ReplayBuffer | None, scheme: Scheme, state: dict[str, Any]) -> list[EpisodeBatch]:
    """Put :func:`buffer_state`'s content back; returns the pending on-policy episodes (if any)."""
    n = int(state["size"])
    if buffer is not None:
        if n > buffer.capacity:
            raise ValueError(f"the saved buffer holds {n} episodes; learner.buffer_size is {buffer.capacity}")
        for k, v in state.get("data", {}).items():
            buffer.storage.data[k][:n] = v
        buffer.index, buffer.size = int(state["index"]), n
        buffer.episodes_in = int(state["episodes_in"])
        return []
    if n == 0:
        return []
    return [EpisodeBatch(scheme, n, data={k: np.array(v) for k, v in state["data"].items()})]


def env_rng_states(runner: Any) -> list[Any] | None:
    """Every env's random-stream state, or ``None`` when the runner's envs cannot provide it."""
    venv = getattr(runner, "venv", None)
    get = getattr(venv, "rng_states", None)
    return get() if get is not None else None


def set_env_rng_states(runner: Any, states: list[Any]) -> None:
    """Restore :func:`env_rng_states` (the runner must have the same number of envs)."""
    venv = getattr(runner, "venv", None)
    if getattr(venv, "set_rng_states", None) is None or len(states) != venv.n_envs:
        raise ValueError(f"cannot restore {len(states)} env random streams into this runner")
    venv.set_rng_states(states)
