"""Test-session setup shared by every test file."""

import pytest


@pytest.fixture(autouse=True)
def _no_real_game_unless_marked(request, monkeypatch, tmp_path_factory):
    """Hide an installed StarCraft II from every test not marked ``sc2``.

    SMAC envs default to ``backend="auto"``, which plays the real game when it is installed; the suite must
    behave the same on a researcher's machine with the game as on CI without it.
    """
    if request.node.get_closest_marker("sc2") is None:
        monkeypatch.setenv("SC2PATH", str(tmp_path_factory.mktemp("no_sc2")))
