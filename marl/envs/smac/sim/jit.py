"""How the engine's per-loop code is compiled: :data:`engine_jit` and :data:`engine_jit_inline`.

Numba counts the references to every array passed into a compiled function it does not inline: an atomic
increment and decrement per array and call. The engine's per-loop functions take five to ten arrays each
and run for every unit in every game loop, so on 8m those counts took most of a step (stack samples of the
per-step API: ``NRT_incref``/``NRT_decref`` on top in 17 of 30). None of these functions allocates or
returns an array, so they are compiled without Numba's runtime (``_nrt=False``): no reference counts, and
an allocation added to one of them fails to compile instead of leaking. The arithmetic is unchanged, and so
are the results, bit for bit (``tests/test_sim_jit.py``). The entry points that allocate their scratch
arrays (``stepper.sim_step`` and the like) keep the runtime and call these.

The rest of a step is built the same way: the observation, state and reward kernels
(``fast_features.observe_rows``, ``fill_state``, ``move_block``, ``reward_end_kernel``) and the fused step
of one env (``fused_kernels.step_env``), whose work arrays come from the caller; only the loops over envs,
called from Python, allocate and count (once a call, not once an env).
"""

from __future__ import annotations

from numba import njit

engine_jit = njit(cache=True, _nrt=False)
engine_jit_inline = njit(cache=True, _nrt=False, inline="always")
