"""SMACv2 scenarios on the embedded engine: the enemies' map trigger and replays (marl/envs/smac/smacv2/)."""

from __future__ import annotations

import numpy as np

from marl.envs.smac.smacv2.env import SMACv2Env
from marl.envs.smac.smacv2.scenarios import SCENARIOS


def test_replay_of_the_previous_episode_draws_its_own_team(tmp_path, monkeypatch) -> None:
    import marl.envs.smac.env as env_mod

    drawn: list[tuple[str, ...]] = []
    monkeypatch.setattr(env_mod, "episode_frames", lambda spec, *a, **k: drawn.append(spec.ally_types) or [])
    monkeypatch.setattr(env_mod, "save_frames", lambda images, path: path)
    env = SMACv2Env("terran_5_vs_5", seed=1, replay_dir=str(tmp_path))
    env.reset()
    rng = np.random.default_rng(0)
    done = False
    while not done:
        _, done, _ = env.step([rng.choice(np.flatnonzero(a)) for a in env.get_avail_actions()])
    first = tuple(env.get_stats()["ally_team"])
    env.reset()
    assert tuple(env.get_stats()["ally_team"]) != first  # seed 1 draws another team next
    env.save_replay()
    assert drawn and set(drawn) == {first}


def test_enemies_attack_the_closest_ally_as_the_smacv2_map_trigger() -> None:
    from marl.envs.smac.sim.engine import SimEngine
    from marl.envs.smac.sim.units import ATTACK, S_HP, S_OK, S_TGT
    from marl.envs.smac.smacv2.env import episode_spec

    sc = SCENARIOS["protoss_5_vs_5"]
    allies, enemies = ["stalker", "stalker"], ["zealot", "zealot"]
    spec = episode_spec(
        sc, allies, enemies, np.array([[4.0, 4.0], [4.0, 28.0]]), np.array([[28, 6.0], [28, 26.0]])
    )
    eng = SimEngine(spec, seed=0)
    t0 = eng.reset()
    S = eng._batch.S
    assert S[0, 2:, S_OK].tolist() == [ATTACK, ATTACK] and S[0, 2:, S_TGT].tolist() == [0, 1]
    t1 = eng.step(np.array([1, 1]))  # both allies stop: each zealot walks at its own closest ally
    before = np.linalg.norm(t0.enemies.pos - t0.allies.pos, axis=1)
    after = np.linalg.norm(t1.enemies.pos - t1.allies.pos, axis=1)
    assert np.all(after < before)
    S[0, 0, S_HP] = 0.0  # ally 0 dies: at the next step its attacker is sent to the closest living ally
    eng.step(np.array([0, 1]))
    assert S[0, 2, S_TGT] == 1 and S[0, 2, S_OK] == ATTACK
