"""Which episode length a whole-episode learner graph runs at: compile a new length, or pad to a compiled one.

Every new (episodes, slots) shape of a jitted learner step compiles a graph: 4-8 s on a 2-core CPU, about
40 steps of QMIX at 3m sizes. A learner trains on the slots up to its batch's longest episode, rounded up to
``learner.time_bucket``, so a run meets several lengths, and some of them only now and then. Running a
batch at a longer length that is already compiled gives the same loss and update (padding is masked and
the recurrent nets are causal; ``tests/test_length_groups.py``), at the price of the padded slots.

:class:`LengthPlanner` decides as in the ski-rental problem: it pads to the shortest compiled length that
fits until the padding, in seconds, has added up to what one compile costs, and then compiles the wanted
length. So each wanted length costs at most twice what the better choice in hindsight (compile it at once,
or pad every time) would have cost: the classic ski-rental bound, given the prices. Both prices are
measured in the run: seconds per episode-slot from train calls that compiled nothing, and seconds per
compile from those that did.
"""

from __future__ import annotations

from collections.abc import Hashable


class LengthPlanner:
    """The slot count each compiled learner graph runs at (``learner.pad_to_compiled``).

    ``slots(graph, weight, want)`` returns ``want`` or a longer length that ``graph`` has compiled;
    ``weight`` is the episode-slots of work one slot adds to a train call (the graph's episodes, times the
    times a call runs it). After each train call, ``record(seconds, cells)`` gives its wall-clock and its
    weighted slots. With ``pad`` False every call returns ``want`` (the option off: the lengths are still
    counted); with ``jit`` False (an eager learner) nothing is counted either.
    """

    def __init__(self, pad: bool = True, jit: bool = True) -> None:
        self.pad, self.jit = pad, jit
        self.compiled: dict[Hashable, set[int]] = {}
        self.padding_s: dict[tuple[Hashable, int], float] = {}  # padding paid so far instead of compiling
        self.sec_per_cell: float | None = None  # one episode-slot of a compiled step
        self.compile_s: float | None = None  # one new graph
        self.new_graphs = 0  # compiled by the current train call
        self.padded_calls = 0  # graph calls run at a longer length than wanted (for logs and tests)
        self.train_s = 0.0  # wall-clock of the recorded train calls, compiles included

    def slots(self, graph: Hashable, weight: int, want: int) -> int:
        """The length ``graph`` runs at for a batch that needs ``want`` slots."""
        if not self.jit:  # eager: nothing compiles
            return want
        have = self.compiled.setdefault(graph, set())
        if want in have:
            return want
        longer = [s for s in have if s > want]
        if self.pad and longer and self.sec_per_cell is not None and self.compile_s is not None:
            run = min(longer)
            paid = self.padding_s.get((graph, want), 0.0) + weight * (run - want) * self.sec_per_cell
            if paid < self.compile_s:
                self.padding_s[(graph, want)] = paid
                self.padded_calls += 1
                return run
        have.add(want)
        self.padding_s.pop((graph, want), None)
        self.new_graphs += 1
        return want

    def record(self, seconds: float, cells: int) -> None:
        """One train call took ``seconds`` over ``cells`` weighted slots (compiling :attr:`new_graphs`)."""
        self.train_s += seconds
        if self.new_graphs:
            run_s = cells * self.sec_per_cell if self.sec_per_cell is not None else 0.0
            per = max(0.0, seconds - run_s) / self.new_graphs
            self.compile_s = per if self.compile_s is None else 0.5 * (self.compile_s + per)
        elif cells > 0:
            per = seconds / cells
            self.sec_per_cell = per if self.sec_per_cell is None else 0.9 * self.sec_per_cell + 0.1 * per
        self.new_graphs = 0

    def summary(self) -> str:
        """One line for the end of a run: the lengths each graph compiled, and the padded calls."""
        graphs = ", ".join(f"{g}: {sorted(v)}" for g, v in self.compiled.items() if v)
        return (
            f"compiled lengths {{{graphs}}}; {self.padded_calls} graph calls padded to a compiled length; "
            f"train calls {self.train_s:.1f} s in all"
        )
