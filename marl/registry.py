"""The one registry: environments, agents, mixers, critics, learners and runners.

Register with a decorator and build by kind and name::

    @register("mixer", "qmix")
    class QMixer(nn.Cell): ...

    mixer = build("mixer", "qmix", n_agents=3, state_dim=48, embed_dim=32, hypernet_dim=64)

An unknown name is an error that lists the registered names of that kind. Registration happens when
the defining module is imported; :func:`ensure_loaded` imports the modules that register the built-in
components, so ``names(kind)`` is complete.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

KINDS = ("env", "batched_env", "agent", "mixer", "critic", "learner", "runner")

# Modules whose import registers the built-in components of each kind (imported lazily, so that
# importing marl.registry never pulls in MindSpore).
_BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "env": ("marl.envs.fake", "marl.envs.smac", "marl.envs.mpe", "marl.envs.gym"),
    "batched_env": ("marl.envs.smac.batched_factory",),
    "agent": ("marl.modules.agents",),
    "mixer": ("marl.modules.mixers", "marl.modules.qplex"),
    "critic": ("marl.modules.critics",),
    "learner": ("marl.learners",),
    "runner": ("marl.runners",),
}

_REGISTRY: dict[str, dict[str, Callable[..., Any]]] = {k: {} for k in KINDS}


def _check_kind(kind: str) -> None:
    if kind not in _REGISTRY:
        raise KeyError(f"unknown registry kind {kind!r}; kinds are {', '.join(KINDS)}")


def register(kind: str, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering a class or factory under ``kind``/``name``."""
    _check_kind(kind)

    def deco(obj: Callable[..., Any]) -> Callable[..., Any]:
        existing = _REGISTRY[kind].get(name)
        if existing is not None and existing is not obj:
            raise ValueError(f"{kind} {name!r} is registered twice ({existing!r} and {obj!r})")
        _REGISTRY[kind][name] = obj
        return obj

    return deco


def ensure_loaded(kind: str) -> None:
    """Import the built-in modules of ``kind`` (those that are importable here)."""
    _check_kind(kind)
    for mod in _BUILTIN_MODULES.get(kind, ()):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as err:  # an optional component whose module is not written/installed
            if err.name is None or not mod.startswith(err.name):
                raise


def names(kind: str) -> list[str]:
    """Sorted registered names of ``kind``."""
    ensure_loaded(kind)
    return sorted(_REGISTRY[kind])


def get(kind: str, name: str) -> Callable[..., Any]:
    """The registered class or factory; unknown names list the known ones."""
    _check_kind(kind)
    if name not in _REGISTRY[kind]:
        ensure_loaded(kind)
    if name not in _REGISTRY[kind]:
        known = sorted(_REGISTRY[kind])
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown {kind} {name!r}.{hint} Known: {', '.join(known) or '(none)'}")
    return _REGISTRY[kind][name]


def build(kind: str, name: str, **kwargs: Any) -> Any:
    """Instantiate the registered ``kind``/``name`` with keyword arguments."""
    return get(kind, name)(**kwargs)
