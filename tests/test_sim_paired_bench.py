"""benchmarks/throughput/sim_paired.py: the worker protocol, the paired rounds and their summary (a fake peer:
the real one needs jax's venv)."""

from __future__ import annotations

import sys

import pytest

from benchmarks.throughput import sim_paired

# a stand-in for the SMAX worker: a stray line (as jaxmarl's import prints), the ready line, then one
# answer a request: 'step' answers 1000 x seconds, 'scan' 3000 x seconds
FAKE = r"""
import json, sys
print("stray import output")
print(json.dumps({"compile_s": 1.5, "jax": "x", "jaxmarl": "y"}), flush=True)
for line in sys.stdin:
    kind, secs = line.split()
    print(json.dumps({"sps": (1000 if kind == "step" else 3000) * float(secs)}), flush=True)
"""


def test_server_skips_stray_lines_and_answers_each_request():
    with sim_paired.SmaxServer([sys.executable, "-c", FAKE]) as srv:
        assert srv.head == {"compile_s": 1.5, "jax": "x", "jaxmarl": "y"}
        assert srv.rate("step", 2.0) == 2000.0
        assert srv.rate("scan", 0.5) == 1500.0
        assert srv.rate("step", 0.25) == 250.0
    assert srv.proc.returncode == 0


def test_a_worker_that_dies_raises_with_its_error():
    with pytest.raises(RuntimeError, match="boom"):
        sim_paired.SmaxServer([sys.executable, "-c", "import sys; sys.exit('boom')"])


def test_summary_takes_each_rounds_own_ratio():
    rounds = [
        {"full": 40.0, "rollout": 100.0, "smax_step": 4.0, "smax_scan": 20.0},
        {"full": 30.0, "rollout": 90.0, "smax_step": 3.0, "smax_scan": 10.0},  # a slow round for SMAX
        {"full": 20.0, "rollout": 60.0, "smax_step": 2.0, "smax_scan": 15.0},
    ]
    s = sim_paired.summarize(rounds)
    assert s["full"]["median"] == 30.0 and s["smax_scan"]["median"] == 15.0
    # per round: 2.0, 3.0, 1.333...; the ratio of the medians (30 / 15 = 2.0) is not what is reported
    fs = s["full/smax_scan"]
    assert fs["median"] == 2.0 and fs["max"] == 3.0 and fs["min"] == pytest.approx(4 / 3)
    assert fs["at_least_2"] == 2
    assert s["full/smax_step"] == {"median": 10.0, "min": 10.0, "max": 10.0, "at_least_2": 3}
    assert s["rollout/smax_scan"]["median"] == 5.0


@pytest.mark.slow
def test_paired_rounds_time_every_side_in_alternating_order():
    with sim_paired.SmaxServer([sys.executable, "-c", FAKE]) as srv:
        rounds = sim_paired.paired_cell("3m", 1, rounds=2, seconds=0.05, threads=1, server=srv)
    assert [list(r) for r in rounds] == [list(sim_paired.SIDES), list(sim_paired.SIDES[::-1])]
    for r in rounds:
        assert r["smax_step"] == 50.0 and r["smax_scan"] == 150.0
        assert r["full"] > 0 and r["rollout"] > 0
