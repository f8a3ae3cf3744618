"""The SMAClite backend of the fidelity benchmark: SMAC's heuristic, on stand-ins for SMAClite's units."""

from types import SimpleNamespace

import numpy as np

from benchmarks.fidelity.fidelity_smaclite import SMACLITE_MAPS, heuristic_actions
from marl.envs.smac.maps import list_maps


def _unit(x: float, kind: str = "MARINE", hp: float = 45.0, max_hp: float = 45.0) -> SimpleNamespace:
    return SimpleNamespace(pos=np.array([x, 0.0]), type=SimpleNamespace(name=kind), hp=hp, max_hp=max_hp)


def _healer(u: SimpleNamespace) -> bool:
    return u.type.name == "MEDIVAC"


def test_each_agent_keeps_the_nearest_enemy_until_it_dies():
    env = SimpleNamespace(
        n_agents=3, agents={0: _unit(0.0), 2: _unit(10.0)}, enemies={0: _unit(4.0), 1: _unit(7.0)}
    )
    targets: dict = {}
    assert heuristic_actions(env, targets, _healer) == [6 + 0, 0, 6 + 1]  # agent 1 is dead: no-op
    env.enemies[1].pos = np.array([100.0, 0.0])  # agent 2's target walks away: still its target
    assert heuristic_actions(env, targets, _healer) == [6, 0, 6 + 1]
    del env.enemies[1]  # it dies: the nearest living enemy now
    assert heuristic_actions(env, targets, _healer) == [6, 0, 6]


def test_a_medivac_heals_the_nearest_injured_ally_and_a_marauder_skips_medivacs():
    agents = {
        0: _unit(0.0, "MEDIVAC", 150, 150),
        1: _unit(5.0, hp=45),  # healthy
        2: _unit(9.0, hp=20),  # injured
        3: _unit(1.0, "MARAUDER", 125, 125),
    }
    enemies = {0: _unit(2.0, "MEDIVAC", 150, 150), 1: _unit(20.0)}
    env = SimpleNamespace(n_agents=4, agents=agents, enemies=enemies)
    targets: dict = {}
    acts = heuristic_actions(env, targets, _healer)
    assert acts[0] == 6 + 2  # heal the injured ally, not the nearer healthy one
    assert acts[3] == 6 + 1  # the marauder passes over the nearer enemy Medivac
    agents[2].hp = 45  # healed: nobody to heal, the Medivac stops
    assert heuristic_actions(env, targets, _healer)[0] == 1


def test_smaclite_maps_are_smac_maps():
    assert set(SMACLITE_MAPS) <= set(list_maps())
