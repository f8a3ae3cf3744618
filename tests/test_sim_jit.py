"""The engine's per-loop code runs without Numba's reference counting (``marl/envs/smac/sim/jit.py``): every
compiled function of the engine but the entry points that allocate is built by ``engine_jit``, the compiled
game loop holds no count, and an allocation in such a function is refused at compile time. Every path hands
the kernels one type per argument (the Python side of it: copies keep the read-only ``nav``, unit columns
arrive as views of one table)."""

import ast
import copy
import importlib
import pickle
from pathlib import Path

import numba
import numpy as np
import pytest
from numba import njit
from numba.core.errors import NumbaError
from numba.core.registry import CPUDispatcher

import marl.envs.smac
from marl.envs.smac import fast_features, fused_kernels
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.features import Units
from marl.envs.smac.fused import step_outputs
from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.engine import BatchedSimEngine
from marl.envs.smac.sim.jit import engine_jit
from marl.envs.smac.sim.stepper import _loop
from marl.envs.smac.sim.units import PROPS

LOOP_MODULES = ("physics", "weapons", "kernel", "targeting", "contact", "stepper", "variants")
# entry points called from Python or the env's fused step, which allocate scratch or results
ALLOCATING = {
    "nav_table",
    "check_actions",
    "_first_loop",
    "sim_step",
    "sim_step_parallel",
    "sim_reset",
    "sim_reset_typed",
    "sim_step_typed",
    "sim_step_typed_parallel",
    "sim_step_rules",
}


def test_every_engine_function_but_the_entry_points_is_built_without_the_runtime():
    found = []
    for name in LOOP_MODULES:
        module = importlib.import_module(f"marl.envs.smac.sim.{name}")
        for attr, fn in vars(module).items():
            if isinstance(fn, CPUDispatcher) and fn.py_func.__module__ == module.__name__:
                found.append(attr)
                assert (fn.targetoptions.get("_nrt") is False) == (attr not in ALLOCATING), attr
    assert {"_loop", "_push", "step_toward", "_attack", "_enemy_act", "_ally_act"} <= set(found)
    assert ALLOCATING <= set(found)


def test_the_game_loop_counts_no_references():
    """One game loop of MMM (walks, fire, heals, missiles), compiled afresh (a cached compile keeps no
    machine code to read): its own code holds no reference count."""
    env = BatchedStarCraft2Env("MMM", 1, seed=0)
    env.reset()
    eng = env.engine
    u = eng.S.shape[1]
    scratch = (np.empty((u, 4)), np.empty(u, dtype=np.int64), np.empty(u, dtype=np.int64))
    fresh = njit(_nrt=False)(_loop.py_func)
    fresh(0, eng.n_agents, PROPS, eng.utype, eng.grid, eng.nav, eng.S, eng.rng, *scratch, True)
    asm = "\n".join(fresh.inspect_asm().values())
    assert "_push" in asm and "_enemy_act" in asm, "the loop's machine code was not found"
    assert "NRT_incref" not in asm and "NRT_decref" not in asm
    counted = njit(_loop.py_func)  # the same loop with the runtime: the counts this module removes
    counted(0, eng.n_agents, PROPS, eng.utype, eng.grid, eng.nav, eng.S, eng.rng, *scratch, True)
    assert "NRT_incref" in "\n".join(counted.inspect_asm().values())


def test_the_fused_step_of_one_env_and_the_feature_kernels_are_built_without_the_runtime():
    per_env = [fused_kernels.step_env, fused_kernels.observe_env, fused_kernels.bad_agent]
    features = ["_cell", "move_block", "observe_rows", "fill_state", "reward_end_kernel"]
    for fn in per_env + [getattr(fast_features, name) for name in features]:
        assert fn.targetoptions.get("_nrt") is False, fn.py_func.__name__
    # the entry points allocate their work arrays once a call, not once an env
    for fn in (fused_kernels.step_envs, fused_kernels.scratch, fast_features.observe_kernel):
        assert fn.targetoptions.get("_nrt") is not False, fn.py_func.__name__


def test_the_fused_step_of_one_env_counts_no_references():
    """One env's fused step of MMM (engine, reward, end, observation, state), compiled afresh: no count."""
    env = BatchedStarCraft2Env("MMM", 2, seed=0)
    env.reset()
    plan = env._plan()
    view = plan.view(env._avail, env._obs, env._state)
    actions = np.zeros((2, env.n_agents), dtype=np.int64)
    fresh = njit(_nrt=False)(fused_kernels.step_env.py_func)
    fresh(0, actions, plan.eng, plan.S, plan.rng, plan.work, plan.ep, plan.rules, view, step_outputs(2))
    asm = "\n".join(fresh.inspect_asm().values())
    assert "observe_rows" in asm and "reward_end_kernel" in asm, "the step's machine code was not found"
    assert "NRT_incref" not in asm and "NRT_decref" not in asm


def test_an_allocation_in_engine_code_does_not_compile():
    @engine_jit
    def scratch(n):
        return np.zeros(n)

    with pytest.raises(NumbaError):
        scratch(3)


def test_copies_of_an_engine_share_its_read_only_nav_table():
    """A copy or pickle of an engine takes the grid's cached read-only ``nav`` table, not a writable copy
    (a writable array is another Numba type: the whole engine would compile again; ``sim/jit.py``)."""
    eng = BatchedSimEngine(load_map("MMM"), 2, seed=0)
    assert not eng.nav.flags.writeable
    for twin in (copy.deepcopy(eng), pickle.loads(pickle.dumps(eng))):
        assert twin.nav is eng.nav
        np.testing.assert_array_equal(twin.S, eng.S)
        assert not np.shares_memory(twin.S, eng.S)


def test_units_from_any_source_reach_the_feature_kernels_as_views_of_one_table():
    """The real game's unit tables and sliced batches give the feature kernels the engine's array types
    (column views of one table, Numba layout 'A'), so they run the compile the engine's path made."""
    eng = BatchedSimEngine(load_map("MMM"), 3, seed=0)
    table = eng.reset()  # a BatchedUnitTable: the engine's state
    for units in (table.units(), Units.from_table(table.table(1)), table.units().take(np.array([2, 0]))):
        cols = (units.pos, units.health, units.shield, units.cooldown, units.energy)
        assert {numba.typeof(c).layout for c in cols} == {"A"}
        assert len({id(c.base) for c in cols}) == 1  # one table
    views = table.units()
    assert views.as_views() is views  # the engine's own views pass as they are
    # a source of separate arrays (another dtype, contiguous: other Numba types) is laid out the same way
    plain = Units(3, *(np.array(c, dtype=np.float32) for c in (views.pos, views.health, views.shield)),
                  np.array(views.cooldown), np.array(views.energy), views.health_max)  # fmt: skip
    laid = plain.as_views()
    cols = (laid.pos, laid.health, laid.shield, laid.cooldown, laid.energy)
    assert {numba.typeof(c).layout for c in cols} == {"A"} and {c.dtype.name for c in cols} == {"float64"}
    np.testing.assert_array_equal(laid.health, plain.health)
    np.testing.assert_array_equal(laid.pos, plain.pos)
    one = Units.from_table(table.table(1))
    np.testing.assert_array_equal(one.pos[0], table.pos[1])
    np.testing.assert_array_equal(one.health[0], table.health[1])
    np.testing.assert_array_equal(one.energy[0], table.energy[1])


def _is_int64(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "int64"


def test_threaded_loops_hand_the_per_env_code_a_signed_index():
    """``prange``'s loop index is unsigned: handed as it is to a compiled function, it would compile that
    function and everything it calls a second time (``sim/jit.py``). No threaded loop of the SMAC package
    passes its index to a call but to ``np.int64``."""
    loops, passed = 0, []
    for path in sorted(Path(marl.envs.smac.__file__).parent.rglob("*.py")):
        for loop in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)):
                continue
            if getattr(loop.iter.func, "id", None) != "prange" or not isinstance(loop.target, ast.Name):
                continue
            loops += 1
            for call in ast.walk(loop):
                if isinstance(call, ast.Call) and not _is_int64(call.func):
                    if any(isinstance(a, ast.Name) and a.id == loop.target.id for a in call.args):
                        passed.append(f"{path.name}:{call.lineno}")
    assert loops >= 6 and passed == []
