"""The library's exceptions that carry more than a message survive pickling whole: a sweep's Ray worker
raises them in another process and the driver reads their fields (``exit_code``) from the copy."""

from __future__ import annotations

import pickle

from marl.envs.ray_vector import WorkerFailure
from marl.signals import RunStopped


def test_run_stopped_keeps_its_message_and_exit_code_through_pickle() -> None:
    stop = pickle.loads(pickle.dumps(RunStopped("stopped at t_env=4397: the replay buffer", exit_code=1)))
    assert isinstance(stop, RunStopped)
    assert str(stop) == "stopped at t_env=4397: the replay buffer"
    assert stop.exit_code == 1


def test_worker_failure_keeps_its_worker_rows_and_cause_through_pickle() -> None:
    fail = pickle.loads(pickle.dumps(WorkerFailure(2, [4, 5], ValueError("env died\nat step 7"))))
    assert (fail.worker, fail.rows) == (2, [4, 5])
    assert isinstance(fail.cause, ValueError)
    assert str(fail) == "Ray env worker 2 (env rows [4, 5]) failed: ValueError: at step 7"
