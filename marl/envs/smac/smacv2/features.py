"""SMACv2's observation, action mask and sizes (oxwhirl/smacv2 ``starcraft2.py``), in NumPy.

Layouts (``get_obs_agent``, ``get_obs_size``, ``get_state_size`` of smacv2's StarCraft2Env) with the standard
configs' flags (docs/smacv2.md §3):

- obs = move block (4 move flags, + pathing 8, + heights 9 when on), then per enemy ``[available, distance,
  dx, dy, (health, shield if Protoss), type bits]``, per other ally ``[visible, distance, dx, dy, (health,
  shield), type bits, (last action)]``, own ``[(health, shield), (x / map_x, y / map_y if obs_own_pos),
  type bits]``, then the time step when ``obs_timestep_number``. Distances are divided by the observing
  unit's sight range.
- state: SMAC v1's state with the map's 3 type bits (identical in SMACv2 without stochastic capabilities).

With ``use_unit_ranges`` the sight range and the attack range (at least ``min_attack_range``) depend on the
unit type (``unit_sight_range`` / ``unit_shoot_range``); otherwise they are SMAC's 9 and 6.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marl.envs.smac.options import N_ACTIONS_NO_ATTACK, SmacOptions
from marl.envs.smac.sim.physics import rand_int, rand_uniform

# smacv2 StarCraft2Env.unit_sight_range / unit_shoot_range (use_unit_ranges=True).
SIGHT_RANGE_V2 = {
    "stalker": 10.0,
    "zealot": 9.0,
    "colossus": 10.0,
    "zergling": 8.0,
    "baneling": 8.0,
    "hydralisk": 9.0,
    "marine": 9.0,
    "marauder": 10.0,
    "medivac": 11.0,
}
SHOOT_RANGE_V2 = {
    "stalker": 6.0,
    "zealot": 0.1,
    "colossus": 7.0,
    "zergling": 0.1,
    "baneling": 0.25,
    "hydralisk": 5.0,
    "marine": 5.0,
    "marauder": 6.0,
    "medivac": 4.0,
}
N_OBS_PATHING, N_OBS_HEIGHT = 8, 9  # smacv2 n_obs_pathing / n_obs_height


@dataclass(frozen=True)
class V2Flags:
    """SMACv2's extra StarCraft2Env flags, with the values of its standard configs (sc2_gen_<race>.yaml)."""

    obs_own_pos: bool = True
    use_unit_ranges: bool = True
    min_attack_range: float = 2.0
    prob_obs_enemy: float = 1.0
    fully_observable: bool = False
    action_mask: bool = True
    conic_fov: bool = False
    num_fov_actions: int = 12  # smacv2 StarCraft2Env default

    def __post_init__(self) -> None:
        if not 0.0 <= self.prob_obs_enemy <= 1.0:
            raise ValueError(f"prob_obs_enemy must be in [0, 1], got {self.prob_obs_enemy}")
        f = self.num_fov_actions
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
            raise ValueError(f"num_fov_actions must be an int >= 1, got {f!r}")

    @property
    def n_fov(self) -> int:
        """Field-of-view actions (6 .. 6 + n_fov - 1): ``num_fov_actions`` with ``conic_fov``, else 0."""
        return int(self.num_fov_actions) if self.conic_fov else 0

    @property
    def half_angle(self) -> float:
        """Half the cone's angle (SMACv2's ``conic_fov_angle / 2`` = pi / num_fov_actions)."""
        return float(np.pi / self.num_fov_actions)


def v2_sizes(
    n_agents: int, n_enemies: int, race: str, opts: SmacOptions, flags: V2Flags, bits: int = 3
) -> dict[str, int]:
    """SMACv2's ``get_obs_size``, ``get_state_size`` and ``get_total_actions`` for a generated team of one
    race ("P", "T" or "Z"; both sides of SMACv2's scenarios have the same race), ``team_gen.observe`` on."""
    shield, fov = int(race == "P"), 2 * flags.conic_fov  # the own / ally-state field-of-view direction
    n_actions = N_ACTIONS_NO_ATTACK + flags.n_fov + n_enemies  # terran n_agents > n_enemies is refused
    move = 4 + N_OBS_PATHING * opts.obs_pathing_grid + N_OBS_HEIGHT * opts.obs_terrain_height
    health = (1 + shield) if opts.obs_all_health else 0
    enemy = 4 + bits + health
    ally = 4 + bits + health + n_actions * opts.obs_last_action
    own = bits + (1 + shield) * (opts.obs_own_health or opts.obs_all_health) + 2 * flags.obs_own_pos + fov
    obs = move + n_enemies * enemy + (n_agents - 1) * ally + own + int(opts.obs_timestep_number)
    if opts.obs_instead_of_state:
        state = obs * n_agents
    else:
        state = n_agents * (4 + shield + fov + bits) + n_enemies * (3 + shield + bits)
        state += n_agents * n_actions * opts.state_last_action + int(opts.state_timestep_number)
    return {"obs": obs, "state": state, "n_actions": n_actions}


def visiting_order(rng: np.ndarray, n: int) -> np.ndarray:
    """The order in which ``get_obs`` visits the agents: SMACv2 shuffles them (``random.shuffle``); we run a
    Fisher-Yates shuffle on the env's observation stream ``rng`` ((1,) uint64 SplitMix64 state, the engine's
    generator), which the compiled kernel reproduces draw for draw."""
    order = np.arange(n)
    for k in range(n - 1, 0, -1):
        j = rand_int(rng, 0, k + 1)
        order[k], order[j] = order[j], order[k]
    return order


def epo_draw(rng: np.ndarray, prob: float) -> bool:
    """Whether another agent observes a newly tagged enemy (SMACv2: ``np.random.rand() < prob_obs_enemy``);
    with ``prob`` 0 or 1 the answer is certain and nothing is drawn."""
    if prob >= 1.0:
        return True
    return prob > 0.0 and rand_uniform(rng, 0) < prob


def unit_ranges(types: tuple[str, ...], flags: V2Flags) -> tuple[np.ndarray, np.ndarray]:
    """(sight (n,), attack range (n,)) of the agents ``types``."""
    if not flags.use_unit_ranges:
        return np.full(len(types), 9.0), np.full(len(types), 6.0)
    sight = np.array([SIGHT_RANGE_V2[t] for t in types])
    shoot = np.array([max(SHOOT_RANGE_V2[t], flags.min_attack_range) for t in types])
    return sight, shoot
