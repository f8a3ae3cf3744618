"""One compiled call per step of a :class:`~marl.envs.smac.batched_env.BatchedStarCraft2Env`.

``BatchedStarCraft2Env.step`` is, per env: check the actions, record them (``last_action``), run the engine's
8 game loops, compute SMAC's reward and end of episode, update the step count and the battle counters, and
recompute available actions, observations and state. Its readable reference is the same method with
``fused=False``: one Python call per stage (engine, ``SmacFeatures.reward_and_end``, ``observe``) and the
bookkeeping in NumPy. This module runs every stage of one env in one compiled function
(:func:`marl.envs.smac.fused_kernels.step_env`), with no Python between stages and envs: at one env the
stage-by-stage step spent several times the engine's own time in Python calls and small arrays (3m: about
160 µs a step against the engine's 24 µs).
``tests/test_smac_fused.py`` holds the two paths equal, bit for bit (every output, the engine state and
every counter, with masks, Medivacs, sparse rewards, timeouts and threads).

The compiled functions are in :mod:`marl.envs.smac.fused_kernels`; this module holds what a call passes and
the Python around it. :mod:`marl.envs.smac.rollout` loops the same per-env step for many random steps.

Argument groups (tuples of the env's own arrays; those that stay the same from call to call are built once
per env, :func:`fused_plan`, and the fresh outputs per call, :func:`step_outputs` and :meth:`FusedPlan.view`):

- ``eng`` = (n_agents, props, utype, grid, nav, enemy order kind): the engine's map arrays;
- ``ep`` = (steps, last_action, dead, running, battles_won, battles_game, timeouts): per-env episode state;
- ``rules`` = (end bonus by code, sparse, reward divisor, episode_limit, continuing, *reward kernel options);
- ``view`` = (health maxima (1, U), avail, obs, state, *feature kernel options);
- ``spawn`` = (base positions, spawn noise, order target, second target): what a respawn needs;
- ``out`` = (reward, terminated, won, dead allies, dead enemies, episode_limit flag): the step's outputs.

The groups are flat tuples: Numba's parallel loops do not take tuples nested in tuples.

At one env most of a step's time is the Python around the compiled call, not the call itself (3m on an
Intel Xeon: 5 µs in the compiled loop of :mod:`marl.envs.smac.rollout` against 22 µs through ``env.step``
before the plan was kept). Hence the per-env :class:`FusedPlan` (no group rebuilt per call), the running
check inside the compiled call (``fused_kernels.first_bad``), and nothing but the checks, the fresh arrays
and the call in :func:`fused_step`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numba import njit, types
from numba.experimental import structref

from marl.envs.smac.fused_kernels import reset_envs, scratch, step_envs, step_envs_parallel
from marl.envs.smac.sim.engine import SPAWN_NOISE
from marl.envs.smac.sim.units import PROPS
from marl.envs.smac.threads import with_threads
from marl.envs.smac.types import MEDIVAC_MAP_TYPES

_INT64 = np.dtype(np.int64)  # the actions' dtype in the compiled step (NumPy's int64 dtype is one object)
_BOOL = np.dtype(np.bool_)


@structref.register
class PackedPlanType(types.StructRef):
    """Numba's type of :class:`PackedPlan` (its fields' types, literals widened)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class PackedPlan(structref.StructRefProxy):
    """A :class:`FusedPlan`'s groups as one compiled object: a call unpacks one object, not each of the
    plan's arrays."""


_PACKED_FIELDS = ("eng", "S", "rng", "work", "ep", "rules", "spawn", "hmax", "kernel")
structref.define_proxy(PackedPlan, PackedPlanType, list(_PACKED_FIELDS))


@njit(cache=True)
def pack_plan(eng, S, rng, work, ep, rules, spawn, hmax, kernel):
    """The :class:`PackedPlan` of these groups."""
    return PackedPlan(eng, S, rng, work, ep, rules, spawn, hmax, kernel)


@njit(cache=True)
def step_packed(mask, actions, avail_now, p, avail, obs, state, out):
    """``fused_kernels.step_envs`` with the plan's groups from ``p`` (a :class:`PackedPlan`)."""
    view = (p.hmax, avail, obs, state) + p.kernel
    return step_envs(mask, actions, avail_now, p.eng, p.S, p.rng, p.work, p.ep, p.rules, view, out)


@njit(cache=True)
def reset_packed(mask, p, avail, obs, state):
    """``fused_kernels.reset_envs`` with the plan's groups from ``p`` (a :class:`PackedPlan`)."""
    view = (p.hmax, avail, obs, state) + p.kernel
    reset_envs(mask, p.eng, p.spawn, p.S, p.rng, p.work, p.ep, view)


class FusedPlan(NamedTuple):
    """The argument groups of one env's compiled calls that stay the same from call to call: the env's own
    arrays (written in place by every call) and its options. :func:`fused_plan` builds it; the env keeps it
    until its episode limit or reward scale is set again (``BatchedStarCraft2Env._plan``)."""

    eng: tuple
    S: np.ndarray
    rng: np.ndarray
    work: tuple  # the serial step's scratch (``fused_kernels.scratch``)
    ep: tuple
    rules: tuple
    spawn: tuple
    hmax: np.ndarray
    kernel: tuple  # the feature kernel's options (``SmacFeatures._kernel_args``)
    no_state: np.ndarray | None  # (E, 0) with ``obs_instead_of_state``: the kernel writes no state columns
    threads: int  # threads of a step (the engine's, at most one per env)
    packed: PackedPlan  # the groups above as one compiled object
    layout: tuple  # (shape, dtype) of avail, obs and state: what :meth:`fresh_views` allocates

    def view(self, avail: np.ndarray, obs: np.ndarray, state: np.ndarray) -> tuple:
        """``view`` of ``fused_kernels.step_env``, writing into ``avail``, ``obs`` and ``state``."""
        return (self.hmax, avail, obs, state, *self.kernel)

    def fresh_views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """New (avail, obs, state), uninitialised, for a call that rewrites every env's row (with
        ``obs_instead_of_state`` the plan's empty state, which :func:`adopt` replaces)."""
        (sa, da), (so, do), (ss, ds) = self.layout
        state = self.no_state if self.no_state is not None else np.empty(ss, ds)
        return np.empty(sa, da), np.empty(so, do), state


def fused_reset(env: Any, mask: np.ndarray) -> None:
    """``env.reset_envs(mask)`` after the first reset, in one compiled call (fresh observation arrays when
    every env restarts, as the reference path gives; else the restarted rows rewritten)."""
    plan = env._plan()
    avail, obs, state = view_arrays(env, plan, fresh=bool(mask.all()))
    reset_packed(mask, plan.packed, avail, obs, state)
    adopt(env, avail, obs, state)


def view_arrays(env: Any, plan: FusedPlan, fresh: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(avail, obs, state) to write: new ones when every env is rewritten (as the reference path gives),
    else the env's own, whose rewritten rows change; with ``obs_instead_of_state`` the plan's empty state
    (:func:`adopt` copies the observations)."""
    if fresh:
        return plan.fresh_views()
    return env._avail, env._obs, env._state if plan.no_state is None else plan.no_state


def adopt(env: Any, avail: np.ndarray, obs: np.ndarray, state: np.ndarray) -> None:
    """Make the written arrays the env's; its units are taken from the engine when next read."""
    env._avail, env._obs = avail, obs
    env._state = obs.reshape(env.n_envs, -1).copy() if env.opts.obs_instead_of_state else state
    env._units_stale = True


def fused_step(
    env: Any, actions_EN: np.ndarray, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``env.step(actions_EN, mask)`` in one compiled call (the caller has checked the shapes and the mask,
    and that the mask steps some env). A full step gives fresh observation arrays, as the reference path
    does; a masked step rewrites the stepped rows of the current ones. A stepped env that is not running,
    or an unavailable action, raises the reference path's error before anything changes.

    At one env this Python is most of the step (3m on the AMD EPYC: about 8 µs of compiled work in a step
    of about 20 µs), so a full step takes its arrays uninitialised (:meth:`FusedPlan.fresh_views`,
    :func:`step_outputs` with ``np.empty``): the call writes every row (``tests/test_smac_fused.py`` fills
    them with poison to hold it to that)."""
    a = actions_EN
    if a.dtype is not _INT64 or not a.flags.c_contiguous:
        if a.dtype.kind not in "iu":  # the reference's order: not running, then dtype and range
            rows = np.arange(env.n_envs) if mask is None else np.flatnonzero(mask)
            env._require_running(rows)
            env._check_actions(a[rows], rows)
        a = np.ascontiguousarray(a, dtype=np.int64)
    plan = env._plan()
    full = mask is None  # else the envs not stepped keep their rows, and read 0 / False in the outputs
    avail, obs, state = view_arrays(env, plan, fresh=full)
    out = step_outputs(env.n_envs, np.empty if full else np.zeros)
    mask = env._all_envs if full else mask
    if plan.threads > 1:
        view = plan.view(avail, obs, state)
        args = (mask, a, env._avail, plan.eng, plan.S, plan.rng, plan.ep, plan.rules, view, out)
        bad = with_threads(plan.threads, step_envs_parallel, plan.threads, *args)
    else:
        bad = step_packed(mask, a, env._avail, plan.packed, avail, obs, state, out)
    if bad != -1:
        rows = np.flatnonzero(mask)
        env._require_running(rows)  # raises the reference's message
        env._check_actions(a[rows], rows)
        raise AssertionError(f"fused step refused action index {bad} that the reference accepts")
    adopt(env, avail, obs, state)
    reward, term, won, dead_a, dead_e, limit = out
    info = {"battle_won": won, "dead_allies": dead_a, "dead_enemies": dead_e, "episode_limit": limit}
    return reward, term, info


def step_outputs(n_envs: int, alloc: Callable = np.zeros) -> tuple:
    """``out`` of ``fused_kernels.step_env`` for ``n_envs`` envs: zeroed (what an env not stepped reads), or
    with ``alloc=np.empty`` uninitialised, for a call that writes every env's row."""
    E, b, i = n_envs, _BOOL, _INT64
    return alloc(E), alloc(E, b), alloc(E, b), alloc(E, i), alloc(E, i), alloc(E, b)


def fused_plan(env: Any) -> FusedPlan:
    """The :class:`FusedPlan` of a :class:`BatchedStarCraft2Env` (its arrays, shared, not copied)."""
    f, eng, o = env.features, env.engine, env.opts
    reward_args = (
        f.spec.map_type in MEDIVAC_MAP_TYPES,
        f.ally_medivac,
        f.enemy_medivac,
        bool(o.reward_sparse),
        bool(o.reward_only_positive),
        bool(f.reward_clip_at_zero),
        float(o.reward_death_value),
        float(o.reward_negative_scale),
    )
    divisor = env.max_reward / o.reward_scale_rate if o.reward_scale else 1.0
    rules = (
        env._end_reward,
        bool(o.reward_sparse),
        float(divisor),
        int(env.episode_limit),
        bool(o.continuing_episode),
        *reward_args,
    )
    ep = (
        env._steps,
        env._last_action,
        env._dead,
        env._running,
        env.battles_won,
        env.battles_game,
        env.timeouts,
    )
    groups = {
        "eng": (eng.n_agents, PROPS, eng.utype, eng.grid, eng.nav, eng._order),
        "S": eng.S,
        "rng": eng.rng,
        "work": scratch(eng.S.shape[1]),
        "ep": ep,
        "rules": rules,
        # what a respawn needs: base positions, spawn noise, order targets, SMAC's first loop or not
        "spawn": (eng.base_pos, SPAWN_NOISE, eng._target, eng._target2, eng.first_loop),
        "hmax": env._hmax,
        "kernel": f._kernel_args,
    }
    no_state = np.zeros((env.n_envs, 0), np.float32) if o.obs_instead_of_state else None
    packed = pack_plan(*(groups[k] for k in _PACKED_FIELDS))
    layout = tuple((x.shape, x.dtype) for x in (env._avail, env._obs, env._state))
    threads = min(eng.threads, env.n_envs)
    return FusedPlan(**groups, no_state=no_state, threads=threads, packed=packed, layout=layout)
