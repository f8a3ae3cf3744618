"""SMACv2's ``capability_config`` argument (``StarCraftCapabilityEnvWrapper(capability_config=..., map_name=
"10gen_<race>")``), read into a :class:`Scenario`; every key is checked and unsupported ones are named.

The accepted form is SMACv2's (README "Capability Config", ``sc2_gen_<race>.yaml``)::

    {"n_units": 5, "n_enemies": 5,
     "team_gen": {"dist_type": "weighted_teams", "unit_types": [...], "weights": [...],
                  "exception_unit_types": [...], "observe": True},
     "start_positions": {"dist_type": "surrounded_and_reflect", "p": 0.5, "map_x": 32, "map_y": 32}}
"""

from __future__ import annotations

from typing import Any

from marl.envs.smac.smacv2.distributions import TeamGen
from marl.envs.smac.smacv2.scenarios import MAP_SIZE, TEAM_GEN, Scenario

POSITION_KINDS = ("surrounded_and_reflect", "surrounded", "reflect")
_NOT_YET = {"attack", "health", "enemy_mask"}  # SMACv2's stochastic capabilities, not implemented here


def _keys(d: Any, where: str, allowed: set[str], required: set[str]) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise ValueError(f"{where} must be a mapping, got {type(d).__name__}")
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(d))
    if missing:
        raise ValueError(f"missing key(s) {missing} in {where}")
    return d


def scenario_from_capability_config(map_name: str, cfg: dict[str, Any]) -> Scenario:
    """The :class:`Scenario` that SMACv2 would run for ``map_name`` (``10gen_<race>``) and ``cfg``."""
    race = map_name[len("10gen_") :] if map_name.startswith("10gen_") else ""
    if race not in TEAM_GEN:
        raise ValueError(
            f"capability_config needs map_name 10gen_protoss, 10gen_terran or 10gen_zerg, got {map_name!r}"
        )
    not_yet = sorted(_NOT_YET & set(cfg)) if isinstance(cfg, dict) else []
    if not_yet:
        raise ValueError(
            f"capability_config keys {not_yet} (stochastic capabilities) are not implemented yet"
        )
    allowed = {"n_units", "n_enemies", "team_gen", "start_positions"}
    _keys(cfg, "capability_config", allowed, allowed)
    n_units, n_enemies = cfg["n_units"], cfg["n_enemies"]
    for k, v in (("n_units", n_units), ("n_enemies", n_enemies)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"capability_config {k} must be an int >= 1, got {v!r}")
    team_keys = {
        "dist_type",
        "unit_types",
        "weights",
        "exception_unit_types",
        "observe",
        "n_units",
        "n_enemies",
    }
    team = _keys(cfg["team_gen"], "team_gen", team_keys, {"dist_type", "unit_types", "weights"})
    if team["dist_type"] != "weighted_teams":
        raise ValueError(
            f"team_gen dist_type {team['dist_type']!r} is not supported; allowed: weighted_teams"
        )
    if not team.get("observe", True):
        raise ValueError(
            "team_gen observe=False (zero-padded unit types) is not supported; use observe: True"
        )
    own = TEAM_GEN[race].unit_types
    alien = [u for u in team["unit_types"] if u not in own]
    if alien:
        raise ValueError(f"unit types {alien} are not on {map_name}; allowed: {list(own)}")
    gen = TeamGen(
        tuple(team["unit_types"]),
        tuple(float(w) for w in team["weights"]),
        tuple(team.get("exception_unit_types", ())),
    )
    pos_keys = {"dist_type", "p", "map_x", "map_y", "n_units", "n_enemies"}
    pos = _keys(cfg["start_positions"], "start_positions", pos_keys, {"dist_type", "map_x", "map_y"})
    kind = pos["dist_type"]
    if kind not in POSITION_KINDS:
        raise ValueError(
            f"start_positions dist_type {kind!r} is not supported; allowed: {list(POSITION_KINDS)}"
        )
    if kind == "surrounded_and_reflect" and "p" not in pos:
        raise ValueError("start_positions surrounded_and_reflect needs p")
    if (pos["map_x"], pos["map_y"]) != MAP_SIZE:
        raise ValueError(f"start_positions map_x, map_y must be {MAP_SIZE} (SMACv2's 32x32_flat map)")
    p = {"surrounded_and_reflect": float(pos.get("p", 0.5)), "reflect": 1.0, "surrounded": 0.0}[kind]
    if race == "terran" and n_units > n_enemies:
        raise ValueError("terran needs n_units <= n_enemies (a Medivac heals ally j with action 6+j)")
    return Scenario(map_name, race, n_units, n_enemies, gen, p)
