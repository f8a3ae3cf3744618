"""SMAC's option flags, constants and unit data (oxwhirl/smac v1; docs/smac.md).

Shared by :mod:`marl.envs.smac.features` (which re-exports every name) and the envs.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

import numpy as np

from marl.envs.smac.types import MapSpec, SideTable

SIGHT_RANGE = 9.0
SHOOT_RANGE = 6.0
MOVE_AMOUNT = 2.0
N_ACTIONS_NO_ATTACK = 6  # no-op, stop, north, south, east, west
# Weapon cooldown normalisers in game loops (the Medivac's entry normalises its energy) [S].
MAX_COOLDOWN = {
    "marine": 15,
    "marauder": 25,
    "medivac": 200,
    "stalker": 35,
    "zealot": 22,
    "colossus": 24,
    "hydralisk": 10,
    "zergling": 11,
    "baneling": 1,
}
DEFAULT_MAX_COOLDOWN = 15
MAX_SHIELD = {"stalker": 80.0, "zealot": 50.0, "colossus": 150.0}
# Nominal (health_max, shield_max) from the SMAC map files (docs/smac.md §6); used for the static max_reward.
UNIT_MAX_HEALTH_SHIELD = {
    "marine": (45, 0),
    "marauder": (125, 0),
    "medivac": (150, 0),
    "stalker": (80, 80),
    "zealot": (100, 50),
    "colossus": (200, 150),
    "hydralisk": (80, 0),
    "zergling": (35, 0),
    "baneling": (30, 0),
    "spine_crawler": (300, 0),
}
# Unit-type one-hot order per map type. Allies follow the RL-unit ids; enemies the stock ids, which in
# stalkers_and_zealots maps gives zealot 0, stalker 1 (SMAC keeps this quirk, so do we; docs/smac.md §3.3).
_ALLY_TYPE_ORDER = {
    "MMM": ("marauder", "marine", "medivac"),
    "stalkers_and_zealots": ("stalker", "zealot"),
    "colossi_stalkers_zealots": ("colossus", "stalker", "zealot"),
    "bane": ("baneling", "zergling"),
    # SMACv2 get_unit_type_id: the same indices for allies and enemies (docs/smacv2.md §3)
    "protoss_gen": ("stalker", "zealot", "colossus"),
    "terran_gen": ("marine", "marauder", "medivac"),
    "zerg_gen": ("zergling", "hydralisk", "baneling"),
}
_ENEMY_TYPE_ORDER = {**_ALLY_TYPE_ORDER, "stalkers_and_zealots": ("zealot", "stalker")}


@dataclass(frozen=True)
class SmacOptions:
    """SMAC's environment flags with SMAC's defaults (``StarCraft2Env(**flags)``)."""

    obs_all_health: bool = True
    obs_own_health: bool = True
    obs_last_action: bool = False
    obs_pathing_grid: bool = False
    obs_terrain_height: bool = False
    obs_timestep_number: bool = False
    state_last_action: bool = True
    state_timestep_number: bool = False
    obs_instead_of_state: bool = False
    reward_sparse: bool = False
    reward_only_positive: bool = True
    reward_scale: bool = True
    reward_scale_rate: float = 20.0
    reward_death_value: float = 10.0
    reward_win: float = 200.0
    reward_defeat: float = 0.0
    reward_negative_scale: float = 0.5
    continuing_episode: bool = False
    heuristic_ai: bool = False
    heuristic_rest: bool = False

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" and not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"SMAC flag {f.name} must be a bool, got {v!r}")
            if f.type == "float":
                if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
                    raise ValueError(f"SMAC flag {f.name} must be a number, got {v!r}")
                object.__setattr__(self, f.name, float(v))
        if self.reward_scale_rate <= 0:
            raise ValueError(f"reward_scale_rate must be > 0, got {self.reward_scale_rate}")

    @classmethod
    def from_flags(cls, **flags: Any) -> SmacOptions:
        """Build from keyword flags; an unknown flag names the nearest valid one. The game-process flags
        (:class:`LaunchOptions`) are checked and left out."""
        _, flags = LaunchOptions.split(flags)
        valid = [f.name for f in dataclasses.fields(cls)]
        every = valid + [f.name for f in dataclasses.fields(LaunchOptions)]
        for k in flags:
            if k not in valid:
                close = difflib.get_close_matches(k, every, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown SMAC flag {k!r}.{hint} Valid flags: {', '.join(every)}")
        return cls(**flags)

    @property
    def own_health(self) -> bool:
        """SMAC forces the own-health features on whenever ``obs_all_health`` is on."""
        return self.obs_all_health or self.obs_own_health


@dataclass(frozen=True)
class LaunchOptions:
    """SMAC's ``StarCraft2Env`` arguments about the game process rather than the episode, with SMAC's
    defaults, so that a SMAC config (pymarl's ``envs/sc2.yaml`` passes all five) builds the env unchanged.

    ``game_version`` and the window size reach the game through pysc2 (``backend="sc2"``); the embedded
    engine plays its own dynamics (``ENGINE_VERSION``) whatever ``game_version`` says. ``move_amount``
    must be SMAC's 2: the engine, the features and the game backend's move orders are built on it.
    ``debug`` logs every step's actions and reward at DEBUG level (logger ``marl.envs.smac``), as SMAC's does.
    """

    game_version: str | None = None
    move_amount: float = MOVE_AMOUNT
    window_size_x: int = 1920
    window_size_y: int = 1200
    debug: bool = False

    def __post_init__(self) -> None:
        if self.game_version is not None and not isinstance(self.game_version, str):
            raise ValueError(
                f"game_version must be a version string such as '4.6.2' or None, got {self.game_version!r}"
            )
        if isinstance(self.move_amount, bool) or self.move_amount != MOVE_AMOUNT:
            raise ValueError(
                f"move_amount={self.move_amount!r} is not supported; allowed: {MOVE_AMOUNT:g} (SMAC's value,"
                " on which the engine's moves, the move features and the game's move orders are built)"
            )
        for name in ("window_size_x", "window_size_y"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int (pixels), got {v!r}")
        if not isinstance(self.debug, (bool, np.bool_)):
            raise ValueError(f"debug must be a bool, got {self.debug!r}")

    @classmethod
    def split(cls, flags: dict[str, Any]) -> tuple[LaunchOptions, dict[str, Any]]:
        """(these options, the remaining flags) from ``StarCraft2Env``'s keyword flags."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in flags.items() if k in names}), {
            k: v for k, v in flags.items() if k not in names
        }

    @property
    def window_size(self) -> tuple[int, int]:
        """(width, height) of the game's window, as pysc2 takes it."""
        return int(self.window_size_x), int(self.window_size_y)


def max_reward(spec: MapSpec, opts: SmacOptions, enemies: SideTable | None = None) -> float:
    """n_enemies·death_value + reward_win + Σ enemy (health_max + shield_max).

    With ``enemies`` (the table at the first reset, as SMAC does) the maxima come from the engine;
    otherwise from the nominal unit data.
    """
    if enemies is not None:
        pool = float(np.sum(enemies.health_max) + np.sum(enemies.shield_max))
    else:
        pool = float(sum(sum(UNIT_MAX_HEALTH_SHIELD[u]) for u in spec.enemy_types))
    return spec.n_enemies * opts.reward_death_value + opts.reward_win + pool
