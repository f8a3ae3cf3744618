"""benchmarks/research/heuristic_sensitivity.py: the candidate formations and that a layout reaches the
engine."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.fidelity import fidelity
from benchmarks.research import heuristic_sensitivity as hs
from marl.envs.smac.batched_env import BatchedStarCraft2Env
from marl.envs.smac.maps import load_map
from marl.envs.smac.sim.engine import spawn_layout
from marl.envs.smac.sim.units import PROPS, RADIUS, type_ids


def _radii(spec) -> np.ndarray:
    names = [g.unit for g in spec.allies for _ in range(g.count)]
    enemies = [g.unit for g in spec.enemies for _ in range(g.count)]
    return np.concatenate(
        [PROPS[type_ids(tuple(names)), RADIUS], PROPS[type_ids(tuple(enemies), True), RADIUS]]
    )


@pytest.mark.parametrize("name", sorted(hs.FORMATIONS))
@pytest.mark.parametrize("map_name", ["2s3z", "3s5z", "MMM", "8m"])
def test_every_formation_places_every_unit_without_overlap(name, map_name):
    spec = load_map(map_name)
    pos = hs.FORMATIONS[name](spec)
    assert pos.shape == (spec.n_agents + spec.n_enemies, 2)
    r = _radii(spec)
    n = spec.n_agents
    for side in (slice(0, n), slice(n, None)):
        p, rr = pos[side], r[side]
        d = np.hypot(*(p[:, None] - p[None]).transpose(2, 0, 1))
        np.fill_diagonal(d, np.inf)
        assert np.all(d >= rr[:, None] + rr[None] - 1e-9)


def test_melee_front_puts_the_zealots_nearer_the_opponent_on_both_sides():
    spec = load_map("2s3z")  # allies at x 9, enemies at x 23; stalkers first in id order
    pos = hs.FORMATIONS["melee_front"](spec)
    ally_x, enemy_x = pos[:5, 0], pos[5:, 0]
    assert ally_x[2:].min() > ally_x[:2].max()  # allied zealots east of the stalkers, facing the enemy
    assert enemy_x[2:].max() < enemy_x[:2].min()  # enemy zealots west of theirs
    ranged = hs.FORMATIONS["ranged_front"](spec)
    assert np.all(ranged[:2, 0] == ranged[:5, 0].max())  # the stalkers in the front column (3 rows)
    assert (ranged[2:5, 0] < ranged[:2, 0].min()).sum() == 2  # two of the zealots behind them


def test_spiral_is_the_engine_shape_on_3m_and_the_same_in_world_coordinates_for_both_sides():
    spec = load_map("3m")
    pos = hs.spiral(spec)
    ally = pos[:3] - np.array(spec.allies[0].spawn, float)
    enemy = pos[3:] - np.array(spec.enemies[0].spawn, float)
    g = 2 * 0.375 + 0.1
    np.testing.assert_allclose(ally, [[0, 0], [0, -g], [g, 0]], atol=1e-9)  # on the point, below, right (D)
    np.testing.assert_allclose(enemy, ally)
    engine = spawn_layout(spec)[:3] - np.array(spec.allies[0].spawn, float)
    assert {tuple(np.round(p, 6)) for p in engine} == {tuple(np.round(p, 6)) for p in ally}


def test_mirrored_reflects_the_enemies_only():
    spec = load_map("2s3z")
    base, mirrored = spawn_layout(spec), hs.FORMATIONS["mirrored"](spec)
    np.testing.assert_array_equal(mirrored[:5], base[:5])
    np.testing.assert_allclose(mirrored[5:, 0], 2 * 23 - base[5:, 0])


def test_a_layout_given_to_run_sim_is_where_the_units_start():
    spec = load_map("2s3z")
    layout = hs.FORMATIONS["melee_front"](spec)
    env = BatchedStarCraft2Env("2s3z", 4, 0, heuristic_ai=True)
    env.engine.base_pos = layout
    env.reset()
    # the engine's per-reset noise (0.25 a side), then SMAC's loop before the first observation (at most one
    # loop of the fastest unit here, a stalker's 2.95 / 16, and the push of units that overlap)
    assert np.abs(env.units.pos - layout[None]).max() <= 0.25 + 2.95 / 16 + 0.1
    env.close()
    r = fidelity.run_sim("2s3z", "heuristic", episodes=6, seed=0, n_envs=3, layout=layout)
    assert len(r["won"]) == 6


def test_the_cli_refuses_an_unknown_candidate_and_writes_its_table(tmp_path, capsys):
    with pytest.raises(SystemExit):
        hs.main(["--maps", "3m", "--candidates", "nonsense"])
    assert "neither 'engine', a formation" in capsys.readouterr().err
    out = tmp_path / "t.md"
    hs.main(
        ["--maps", "2s3z", "--candidates", "engine", "spiral", "scan8", "--episodes", "4", "--out", str(out)]
    )
    text = out.read_text()
    assert "| map | published | engine | spiral | scan8 |" in text
    assert "| 2s3z | 90 % (b) |" in text and "| within ±15 | 1 maps |" in text
