"""Every registered learner provides the trainer's boundary, marl.learners.base.Learner."""

from __future__ import annotations

import pytest

from marl import registry
from marl.learners.base import Learner, NoHistograms

METHODS = ("make_controller", "train", "actor_weights", "state_dict", "load_state_dict", "histograms")


@pytest.mark.parametrize("name", registry.names("learner"))
def test_registered_learner_provides_the_protocol(name):
    cls = registry.get("learner", name)
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    assert not missing, f"learner {name!r} lacks {missing}"
    assert isinstance(cls.on_policy, bool)


def test_protocol_check_rejects_an_incomplete_learner():
    class Partial(NoHistograms):
        on_policy = False

        def train(self, batch, t_env, episode):  # noqa: ANN001, ANN201
            return {}

    assert not isinstance(Partial(), Learner)
    assert registry.names("learner")  # the registry was really populated
