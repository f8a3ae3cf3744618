"""The fidelity benchmark's policies on SMAClite, an independent SMAC reimplementation (``--backend
smaclite``).

SMAClite (Michalski et al. 2023, arXiv:2304.05870; github.com/uoe-agents/smaclite) is the kind of
engine that an outside comparison would hold ours against, so its outcomes sit beside ours and beside the
published real-game figures in the same table. It is not a dependency: run ``benchmarks/fidelity/fidelity.py
--backend smaclite`` with a Python that has SMAClite installed (from its repository; results name the
commit) and this repository on ``PYTHONPATH``.

The policies are the ones ``fidelity.py`` plays on our engine:

* ``heuristic``: SMAC's ``get_agent_action_heuristic`` -- each agent keeps the nearest living enemy (a
  Marauder never picks a Medivac) until it dies and is given an attack order on it, which walks into range;
  a Medivac keeps the nearest injured non-Medivac ally until it is healed or dead, and stops when there is
  none. SMAClite's ``AttackUnitCommand`` walks into range as SC2's attack order does, so the order is given
  through its action ids with its range mask lifted (SMAClite's own action space only attacks in range).
* ``random``: uniform over SMAClite's available actions; ``stop``: every living agent stops.

SMAClite has no episode limit; the SMAC map's ``episode_limit`` ends an episode as SMAC does (a loss).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from marl.envs.smac.maps import load_map

CRASHES: list[str] = []  # episodes in which SMAClite raised (not counted; the results file lists them)
# SMAC map name -> SMAClite map file (its maps/smaclite_maps/*.json); the other SMAC maps have none there
SMACLITE_MAPS = {
    m: m.lower()
    for m in (
        "10m_vs_11m",
        "27m_vs_30m",
        "2c_vs_64zg",
        "2s3z",
        "2s_vs_1sc",
        "3s5z",
        "3s5z_vs_3s6z",
        "3s_vs_5z",
        "bane_vs_bane",
        "corridor",
        "MMM",
        "MMM2",
    )
}


def _env(map_name: str, seed: int):  # noqa: ANN202 (SMAClite's class: an optional dependency)
    import smaclite
    from smaclite.env.smaclite import SMACliteEnv

    if map_name not in SMACLITE_MAPS:
        raise SystemExit(f"--backend smaclite: SMAClite has no {map_name}; it has {sorted(SMACLITE_MAPS)}")
    folder = Path(smaclite.__file__).parent / "env" / "maps" / "smaclite_maps"
    path = os.fspath(folder / f"{SMACLITE_MAPS[map_name]}.json")
    return SMACliteEnv(map_file=path, seed=seed, render_mode=None)


def _nearest(origin: np.ndarray, units: dict, keep) -> int | None:  # noqa: ANN001
    """Key of the unit of ``units`` nearest to ``origin`` among those ``keep`` accepts (None if none)."""
    best, best_d = None, math.inf
    for k, u in units.items():
        d = float(np.hypot(*(u.pos - origin)))
        if keep(u) and d < best_d:
            best, best_d = k, d
    return best


def heuristic_actions(env, targets: dict[int, int | None], is_healer: Callable[[object], bool]) -> list[int]:  # noqa: ANN001
    """SMAC's heuristic for every agent of a SMAClite env (``targets``: the sticky choice per agent;
    ``is_healer(unit)``: a Medivac). Action ids are SMAClite's: 0 no-op (dead), 1 stop, 6 + k target k."""
    actions = []
    for i in range(env.n_agents):
        unit = env.agents.get(i)
        if unit is None:
            actions.append(0)
            continue
        t = targets.get(i)
        if is_healer(unit):
            if t is None or t not in env.agents or env.agents[t].hp >= env.agents[t].max_hp:
                others = {k: a for k, a in env.agents.items() if k != i}
                t = _nearest(unit.pos, others, lambda a: not is_healer(a) and a.hp < a.max_hp)
        elif t is None or t not in env.enemies:
            marauder = getattr(unit.type, "name", "") == "MARAUDER"  # SMAC: a Marauder skips Medivacs
            t = _nearest(unit.pos, env.enemies, lambda e, m=marauder: not (m and is_healer(e)))
        targets[i] = t
        actions.append(1 if t is None else 6 + t)
    return actions


def run_smaclite(map_name: str, policy: str, episodes: int, seed: int) -> dict[str, np.ndarray]:
    """Play ``episodes`` episodes of ``policy`` on SMAClite; the per-episode outcome arrays of fidelity.py."""
    from smaclite.env.units.combat_type import CombatType

    spec = load_map(map_name)
    env = _env(map_name, seed)
    rng = np.random.default_rng(seed)
    real_avail = env.get_avail_actions
    out = {k: [] for k in ("won", "length", "allies_alive", "enemies_alive", "enemy_health_left")}
    max_left = None

    def record(env, length: int) -> None:  # noqa: ANN001
        out["won"].append(len(env.enemies) == 0)
        out["length"].append(length)
        out["allies_alive"].append(len(env.agents))
        out["enemies_alive"].append(len(env.enemies))
        left = sum(max(u.hp, 0) + max(u.shield, 0) for u in env.enemies.values())
        out["enemy_health_left"].append(left / max_left)

    ep = 0
    while len(out["won"]) < episodes:
        ep += 1
        if ep > 2 * episodes:
            raise RuntimeError(f"SMAClite failed in over {episodes} episodes of {map_name}: {CRASHES[-1]}")
        env.reset(seed=seed + ep - 1)
        if max_left is None:
            max_left = sum(u.max_hp + u.max_shield for u in env.enemies.values())
        targets: dict[int, int | None] = {}
        done, length = False, 0
        while not done and length < spec.episode_limit:
            if policy == "heuristic":
                actions = heuristic_actions(env, targets, lambda u: u.combat_type == CombatType.HEALING)
                # attack orders walk into range: lift SMAClite's range mask for this step
                env.get_avail_actions = lambda: np.ones((env.n_agents, env.n_actions))
            else:
                avail = np.asarray(real_avail())
                if policy == "stop":
                    actions = [1 if i in env.agents else 0 for i in range(env.n_agents)]
                else:
                    actions = [int(a) for a in (rng.random(avail.shape) * avail).argmax(-1)]
            try:
                _, _, done, _, _ = env.step(actions)
            except ValueError as err:  # SMAClite's own failure (e.g. a colossus beam that hits nobody)
                CRASHES.append(f"{map_name} {policy} episode seed {seed + ep - 1}: {err}")
                break
            finally:
                env.get_avail_actions = real_avail
            length += 1
        else:
            record(env, length)
    return {k: np.asarray(v) for k, v in out.items()}


def smaclite_version() -> str:
    """SMAClite's installed version (its commit is recorded by the command line that ran it)."""
    from importlib.metadata import version

    return version("smaclite")
