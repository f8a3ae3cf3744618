"""The benchmark suites (``benchmarks/README.md`` indexes them): not part of the ``marl`` package or its
wheel.

Each suite is a folder of scripts (``throughput``, ``learner_step``, ``learning``, ``fidelity``, ``interop``)
and ``research`` holds the one-off studies; ``harness`` is shared by all of them. Every script imports what it
shares as ``benchmarks.<suite>.<module>`` (``from benchmarks import harness``) and puts the repository root
first on ``sys.path`` (one line above those imports), so both ::

    python benchmarks/<suite>/<script>.py --help
    python -m benchmarks.<suite>.<script> --help

work from the repository root; the tests import the same names (pytest's ``pythonpath`` is the root).
"""
