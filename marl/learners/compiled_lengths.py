"""Which episode length a whole-episode learner graph runs at: compile a new length, or pad to a compiled one.

Every new (episodes, slots) shape of a jitted learner step compiles a graph: 4-8 s on a 2-core CPU, about
40 steps of QMIX at 3m sizes. A learner trains on the slots up to its batch's longest episode, rounded up to
``learner.time_bucket``, so a run meets several lengths, and some of them only now and then. Running a
batch at a longer length that is already compiled gives the same loss and update (padding is masked and
the recurrent nets are causal; ``tests/test_compiled_lengths.py``), at the price of the padded slots.

:class:`LengthPlanner` decides as in the ski-rental problem: it pads to the shortest compiled length that
fits until the padding has added up to what one compile costs, and then compiles the wanted length. So each
wanted length costs at most twice what the better choice in hindsight (compile it at once, or pad every
time) would have cost, at these prices.

The prices are structural, not timed, so that a seed gives the same run (and a resumed run the same
continuation): padding costs its agent-slots (episodes x agents x padded slots, times the graph's runs per
train call), and a compile costs :data:`COMPILE_AGENT_SLOTS`. That figure comes from this machine's
measurements (2-core AMD EPYC, ``benchmarks/results/learner_step.md`` and ``length_groups.md``): a compile
of 5.8-6.3 s against 26 us per episode-slot at 3m sizes (3 agents; about 0.7 M agent-slots) and 74 us at 8m
sizes (8 agents; about 0.6 M). The planner's state travels in the learner's checkpoint.
"""

from __future__ import annotations

import numpy as np

COMPILE_AGENT_SLOTS = 600_000  # one compile, in agent-slots of training work (see the module docstring)
KINDS = ("batch", "group")  # the graphs a learner plans: its one-batch step, and its length groups' step


class LengthPlanner:
    """The slot count each compiled learner graph runs at (``learner.pad_to_compiled``).

    ``slots(graph, weight, want)`` returns ``want`` or a longer length that ``graph`` (a ``(kind, episodes)``
    pair, kind one of :data:`KINDS`) has compiled; ``weight`` is the episode-slots one slot adds to a train
    call (the graph's episodes, times the times a call runs it). ``n_agents`` turns them into agent-slots.
    With ``pad`` False every call returns ``want`` (the option off: the lengths are still counted); with
    ``jit`` False (an eager learner) nothing is counted either. ``record`` adds a train call's wall-clock,
    for the run's closing line only: no decision depends on time.
    """

    def __init__(self, n_agents: int = 1, pad: bool = True, jit: bool = True) -> None:
        self.n_agents, self.pad, self.jit = int(n_agents), pad, jit
        self.compiled: dict[tuple[str, int], set[int]] = {}
        self.padding: dict[tuple[str, int, int], int] = {}  # agent-slots padded so far instead of compiling
        self.padded_calls = 0  # graph calls run at a longer length than wanted
        self.train_s = 0.0  # wall-clock of the recorded train calls, compiles included

    def slots(self, graph: tuple[str, int], weight: int, want: int) -> int:
        """The length ``graph`` runs at for a batch that needs ``want`` slots."""
        if not self.jit:  # eager: nothing compiles
            return want
        have = self.compiled.setdefault(graph, set())
        if want in have:
            return want
        longer = [s for s in have if s > want]
        if self.pad and longer:
            run, key = min(longer), (*graph, want)
            paid = self.padding.get(key, 0) + weight * self.n_agents * (run - want)
            if paid < COMPILE_AGENT_SLOTS:
                self.padding[key] = paid
                self.padded_calls += 1
                return run
        have.add(want)
        self.padding.pop((*graph, want), None)
        return want

    def groups(self, groups: list[tuple[np.ndarray, int]], repeats: int = 1) -> list[tuple[np.ndarray, int]]:
        """Length groups ``[(rows, slots), ...]`` with each group's slots as :meth:`slots` plans them (the
        group step's graph is keyed by its episodes; ``repeats``: its runs per train call)."""
        return [(rows, self.slots(("group", len(rows)), len(rows) * repeats, t)) for rows, t in groups]

    def record(self, seconds: float) -> None:
        """Add one train call's wall-clock (reported by :meth:`summary`)."""
        self.train_s += seconds

    def summary(self) -> str:
        """One line for the end of a run: the lengths each graph compiled, and the padded calls."""
        graphs = ", ".join(f"{g}: {sorted(v)}" for g, v in self.compiled.items() if v)
        return (
            f"compiled lengths {{{graphs}}}; {self.padded_calls} graph calls padded to a compiled length; "
            f"train calls {self.train_s:.1f} s in all"
        )

    def state(self) -> dict[str, np.ndarray]:
        """The planner's decisions so far as arrays (``length_plan/...`` keys of a learner's state)."""
        compiled = [(KINDS.index(k), rows, t) for (k, rows), ts in self.compiled.items() for t in sorted(ts)]
        padding = [(KINDS.index(k), rows, t, paid) for (k, rows, t), paid in self.padding.items()]
        return {
            "length_plan/compiled": np.array(compiled, np.int64).reshape(-1, 3),
            "length_plan/padding": np.array(padding, np.int64).reshape(-1, 4),
            "length_plan/padded_calls": np.array(self.padded_calls, np.int64),
        }

    def load_state(self, sd: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` (a checkpoint without it, from before the planner, starts afresh)."""
        if "length_plan/compiled" not in sd:
            return
        self.compiled, self.padding = {}, {}
        for kind, rows, t in np.asarray(sd["length_plan/compiled"]).tolist():
            self.compiled.setdefault((KINDS[kind], rows), set()).add(t)
        for kind, rows, t, paid in np.asarray(sd["length_plan/padding"]).tolist():
            self.padding[(KINDS[kind], rows, t)] = paid
        self.padded_calls = int(sd["length_plan/padded_calls"])
