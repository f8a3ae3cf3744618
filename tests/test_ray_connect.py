"""``connect``'s start of a local Ray on a busy machine: a node that times out at start (Ray waits a fixed
30 s for it) is started once more, and a second time-out is one clear line from the sweep, before any run."""

from __future__ import annotations

import pytest

from marl.runners import ray_runner
from marl.runners.ray_runner import START_TRIES, RayStartError, connect
from marl.sweep import sweep_main

pytestmark = pytest.mark.unit

TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of the raylet failed to "
    "startup or the GCS has become overloaded."
)  # Ray 2.x's message (ray/_private/node.py)


class FakeRay:
    """Ray's ``init``/``shutdown``/``is_initialized``, with ``init`` failing as given, then starting."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures, self.inits, self.shutdowns, self.up = list(failures), [], 0, False

    def is_initialized(self) -> bool:
        return self.up

    def init(self, **kwargs: object) -> None:
        self.inits.append(kwargs)
        if self.failures:
            raise self.failures.pop(0)
        self.up = True

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    def install(*failures: BaseException) -> FakeRay:
        fake = FakeRay(list(failures))
        monkeypatch.setattr(ray_runner, "_ray", lambda: fake)
        return fake

    return install


def test_a_local_node_that_times_out_is_started_once_more(fake_ray, capsys) -> None:
    ray = fake_ray(Exception(TIMED_OUT))
    assert connect("local", 2) is True and ray.up
    assert len(ray.inits) == 2 and ray.shutdowns == 1  # the half-started node was shut down first
    assert ray.inits[1] == ray.inits[0] and ray.inits[0]["num_cpus"] == 2
    assert f"did not start in time (try 1 of {START_TRIES})" in capsys.readouterr().out


def test_a_second_time_out_is_a_clear_error_and_others_pass_through(fake_ray, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = fake_ray(*[Exception(TIMED_OUT)] * START_TRIES)
    with pytest.raises(RayStartError, match="did not start in 2 tries.*Nothing has run: run the same"):
        connect("", 2)  # "": a local Ray
    assert len(ray.inits) == START_TRIES and not ray.up
    fake_ray(RuntimeError("something else"))
    with pytest.raises(RuntimeError, match="^something else$"):  # not a start time-out: Ray's own error
        connect("local", 2)
    remote = fake_ray(Exception(TIMED_OUT))  # a cluster's address: no local node to start again
    with pytest.raises(Exception, match="timed out during startup"):
        connect("10.0.0.1:6379")
    assert len(remote.inits) == 1


def test_the_sweep_says_it_in_one_line_before_any_run(fake_ray, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    fake_ray(*[Exception(TIMED_OUT)] * START_TRIES)
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as stop:
        sweep_main(["--env", "fake", "--maps", "m1", "--seeds", "2", "--out", str(out), "t_max=100"])
    assert str(stop.value.code).startswith("[sweep] a local Ray did not start in 2 tries")
    assert not list(out.glob("qmix_*"))  # no run folder
