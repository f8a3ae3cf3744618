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

**One type per argument.** Numba compiles a function once for every distinct tuple of argument types it
meets, and its types are finer than the values: an unsigned index, a literal constant, a read-only array
and a non-contiguous one each make a type of their own, and each new type compiles the function and, in
turn, everything it calls. So the engine keeps one type for each argument on every path:

- ``prange``'s loop index is unsigned (``uint64``): the threaded loops cast it (``e = np.int64(p)``)
  before handing it to the per-env code, which the serial loops call with ``int64``;
- a constant argument is typed as that literal (``Literal[bool](False)``), even one met only while Numba
  infers a variable's type (``n = 0`` before a loop that counts): callers pass ``np.bool_(False)`` or
  ``np.int64(0)``, whose types are the plain ones;
- the geodesic table ``nav`` is the grid's shared read-only array (``engine._nav_for``), also in a copied
  or unpickled engine (``engine.SharedNav``);
- the feature kernels take the units' columns as float64 views of one table (``layout 'A'``), as the
  engine's state gives them; ``features_layout.Units.packed`` lays out any other source (the real game's
  tables) the same way, and ``SmacFeatures`` passes every batch through ``Units.as_views`` first (a batch
  of separate arrays, e.g. the recorded 3m states of ``benchmarks/fidelity``, compiled the feature kernels
  a second time).

**Few layers.** A compiled function's machine code holds the code of every compiled function it calls, so
each layer of a call chain compiles the whole tree below it again. A layer that only loops over envs for one
compiled caller is inlined into it (``inline="always"``: ``fused_kernels.step_envs`` and ``reset_envs``).
The per-env functions stay compiled on their own: inlined into the ``prange`` body of the threaded step
they changed its results (the fused step against the reference, 2 threads, ``tests/test_smac_fused.py``).

What it saves on a cold cache: docs/testing.md, "What the suite's time is made of"
(``benchmarks/research/numba_variants.py``).
"""

from __future__ import annotations

from numba import njit

engine_jit = njit(cache=True, _nrt=False)
engine_jit_inline = njit(cache=True, _nrt=False, inline="always")
