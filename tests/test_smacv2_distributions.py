"""SMACv2's team and start-position distributions (marl/envs/smac/smacv2/distributions.py)."""

from __future__ import annotations

import numpy as np
import pytest

from marl.envs.smac.smacv2.distributions import (
    TeamGen,
    draw_teams,
    reflect_positions,
    surrounded_and_reflect,
    surrounded_positions,
)
from marl.envs.smac.smacv2.scenarios import SCENARIOS, TEAM_GEN, get_scenario, list_scenarios


def _draw(seed: int, race: str, a: int, e: int):
    rng = np.random.default_rng(seed)
    teams = draw_teams(rng, TEAM_GEN[race], a, e)
    return teams, surrounded_and_reflect(rng, 0.5, a, e, 32.0, 32.0)


def test_same_seed_same_team_and_positions() -> None:
    (t1, p1), (t2, p2) = _draw(7, "terran", 10, 11), _draw(7, "terran", 10, 11)
    assert t1 == t2 and p1[2] == p2[2]
    np.testing.assert_array_equal(p1[0], p2[0])
    np.testing.assert_array_equal(p1[1], p2[1])
    others = [_draw(s, "terran", 10, 11) for s in range(8, 14)]
    assert any(t != t1 or not np.array_equal(p[1], p1[1]) for t, p in others)


@pytest.mark.parametrize("race", sorted(TEAM_GEN))
def test_unit_type_frequencies_match_weights(race: str) -> None:
    gen = TEAM_GEN[race]
    rng = np.random.default_rng(0)
    draws = [u for _ in range(3000) for u in draw_teams(rng, gen, 5, 5)[0]]
    freq = np.array([draws.count(u) for u in gen.unit_types]) / len(draws)
    # 15000 draws: a binomial s.d. is at most 0.004; the exception rule moves a weight by < 1e-4 at n = 5
    np.testing.assert_allclose(freq, gen.weights, atol=0.015)


def test_exception_units_never_make_a_whole_team() -> None:
    gen = TeamGen(("marine", "medivac"), (0.1, 0.9), ("medivac",))
    rng = np.random.default_rng(1)
    for _ in range(500):
        allies, enemies = draw_teams(rng, gen, 2, 4)
        assert "marine" in allies and "marine" in enemies[2:]  # the extra enemies are their own team


def test_enemy_team_mirrors_allies() -> None:
    rng = np.random.default_rng(3)
    allies, enemies = draw_teams(rng, TEAM_GEN["zerg"], 20, 23)
    assert enemies[:20] == allies and len(enemies) == 23
    allies, enemies = draw_teams(rng, TEAM_GEN["zerg"], 6, 4)
    assert enemies == allies[:4]


@pytest.mark.parametrize(("a", "e"), [(5, 5), (10, 11), (20, 23), (6, 4)])
def test_positions_inside_the_map(a: int, e: int) -> None:
    rng = np.random.default_rng(2)
    kinds = set()
    for _ in range(300):
        ally, enemy, kind = surrounded_and_reflect(rng, 0.5, a, e, 32.0, 32.0)
        kinds.add(kind)
        assert ally.shape == (a, 2) and enemy.shape == (e, 2)
        for pos in (ally, enemy):
            assert np.all(pos >= 0.0) and np.all(pos <= 32.0)
    assert kinds == {"reflect", "surrounded"}


def test_reflect_mirrors_in_the_middle_line() -> None:
    ally, enemy = reflect_positions(np.random.default_rng(4), 10, 11, 32.0, 32.0)
    assert np.all(ally[:, 0] < 15.0)  # 1 unit short of the middle
    np.testing.assert_allclose(enemy[:10, 0], 32.0 - ally[:, 0])
    np.testing.assert_allclose(enemy[:10, 1], ally[:, 1])
    assert np.all(enemy[10:, 0] >= 16.0)


def test_surrounded_groups_lie_on_diagonals() -> None:
    rng = np.random.default_rng(5)
    for _ in range(100):
        ally, enemy = surrounded_positions(rng, 5, 7, 32.0, 32.0)
        np.testing.assert_array_equal(ally, np.full((5, 2), 16.0))
        off = np.abs(enemy - 16.0)
        np.testing.assert_allclose(off[:, 0], off[:, 1])  # on a diagonal through the centre
        assert np.all(off[:, 0] >= 2.0 - 1e-9) and np.all(off[:, 0] <= 16.0)
        assert len({tuple(np.sign(p - 16.0)) for p in enemy}) <= 4


def test_reflect_probability_is_p() -> None:
    rng = np.random.default_rng(6)
    kinds = [surrounded_and_reflect(rng, 0.3, 5, 5, 32.0, 32.0)[2] for _ in range(4000)]
    assert abs(kinds.count("reflect") / 4000 - 0.3) < 0.03


def test_bad_configs_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        TeamGen(("marine", "marauder"), (0.5, 0.6))
    with pytest.raises(ValueError, match="not among unit_types"):
        TeamGen(("marine",), (1.0,), ("medivac",))
    with pytest.raises(ValueError, match=r"positive weight \(\['baneling'\]\) is an exception"):
        TeamGen(("zergling", "baneling"), (0.0, 1.0), ("baneling",))  # would redraw forever at reset
    TeamGen(("zergling", "baneling"), (0.01, 0.99), ("baneling",))  # rare but drawable: allowed
    with pytest.raises(ValueError, match="p must be in"):
        surrounded_and_reflect(np.random.default_rng(0), 1.5, 5, 5, 32.0, 32.0)
    with pytest.raises(ValueError, match="unknown SMACv2 scenario 'protoss_5_vs_6'.*protoss_5_vs_5"):
        get_scenario("protoss_5_vs_6")


def test_fifteen_scenarios() -> None:
    assert len(list_scenarios()) == 15
    sc = SCENARIOS["zerg_20_vs_23"]
    assert (sc.n_units, sc.n_enemies, sc.map_name, sc.episode_limit) == (20, 23, "10gen_zerg", 200)
