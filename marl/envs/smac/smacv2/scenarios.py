"""SMACv2's 15 standard scenarios (oxwhirl/smacv2 README, "Scenario | Config File | n_units | n_enemies").

Per race, SMACv2's example configs ``smacv2/examples/configs/sc2_gen_<race>.yaml`` give the capability config
(team_gen weights and exception units, ``start_positions: surrounded_and_reflect`` with ``p: 0.5`` on a
32 x 32 map) and ``smacv2/env/starcraft2/maps/smac_maps.py`` gives the maps ``10gen_<race>`` (episode limit
200, 3 unit-type bits, map types ``<race>_gen``, all on ``32x32_flat``). docs/smacv2.md §1 tabulates them.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

from marl.envs.smac.smacv2.distributions import TeamGen

# sc2_gen_protoss.yaml: stalker/zealot/colossus 0.45/0.45/0.1, no exception_unit_types.
# sc2_gen_terran.yaml: marine/marauder/medivac 0.45/0.45/0.1, exception medivac.
# sc2_gen_zerg.yaml: zergling/baneling/hydralisk 0.45/0.1/0.45, exception baneling.
TEAM_GEN = {
    "protoss": TeamGen(("stalker", "zealot", "colossus"), (0.45, 0.45, 0.1)),
    "terran": TeamGen(("marine", "marauder", "medivac"), (0.45, 0.45, 0.1), ("medivac",)),
    "zerg": TeamGen(("zergling", "baneling", "hydralisk"), (0.45, 0.1, 0.45), ("baneling",)),
}
RACE_LETTER = {"protoss": "P", "terran": "T", "zerg": "Z"}
# smac_maps.py: 10gen_<race> has limit 200 and unit_type_bits 3 whatever n_units/n_enemies are.
EPISODE_LIMIT = 200
UNIT_TYPE_BITS = 3
MAP_SIZE = (32, 32)  # sc2_gen_<race>.yaml start_positions map_x: 32, map_y: 32 (map 32x32_flat)
START_P = 0.5  # sc2_gen_<race>.yaml start_positions p
SIZES = ((5, 5), (10, 10), (20, 20), (10, 11), (20, 23))  # README scenario table (n_units, n_enemies)


@dataclass(frozen=True)
class Scenario:
    """One SMACv2 scenario: a race's capability config at one (n_units, n_enemies)."""

    name: str
    race: str
    n_units: int
    n_enemies: int
    team_gen: TeamGen
    p: float = START_P
    map_size: tuple[int, int] = MAP_SIZE
    episode_limit: int = EPISODE_LIMIT
    unit_type_bits: int = UNIT_TYPE_BITS

    @property
    def map_name(self) -> str:
        """SMACv2's map of this scenario's race (``10gen_<race>``)."""
        return f"10gen_{self.race}"

    @property
    def map_type(self) -> str:
        return f"{self.race}_gen"


SCENARIOS = {
    f"{race}_{a}_vs_{e}": Scenario(f"{race}_{a}_vs_{e}", race, a, e, TEAM_GEN[race])
    for race in TEAM_GEN
    for a, e in SIZES
}


def list_scenarios() -> list[str]:
    """Names of the 15 standard SMACv2 scenarios."""
    return sorted(SCENARIOS)


# SMACv2's own map names: the race's example config (sc2_gen_<race>.yaml: 5 vs 5) unless a
# capability_config says otherwise (marl/envs/smac/smacv2/capability.py).
GEN_MAPS = {f"10gen_{race}": f"{race}_5_vs_5" for race in TEAM_GEN}


def is_scenario(name: str) -> bool:
    """Whether ``name`` is a SMACv2 scenario (``<race>_<n>_vs_<m>``) or map (``10gen_<race>``)."""
    return name in SCENARIOS or name in GEN_MAPS


def get_scenario(name: str, n_units: int | None = None, n_enemies: int | None = None) -> Scenario:
    """The scenario ``name``, optionally with other unit counts (as SMACv2 users edit ``n_units``/
    ``n_enemies`` in the capability config); unknown names list the known ones."""
    if name in GEN_MAPS:
        return dataclasses.replace(get_scenario(GEN_MAPS[name], n_units, n_enemies), name=name)
    if name not in SCENARIOS:
        close = difflib.get_close_matches(str(name), list(SCENARIOS), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        known = ", ".join([*list_scenarios(), *GEN_MAPS])
        raise ValueError(f"unknown SMACv2 scenario {name!r}.{hint} Known: {known}")
    sc = SCENARIOS[name]
    a = sc.n_units if n_units is None else int(n_units)
    e = sc.n_enemies if n_enemies is None else int(n_enemies)
    if a < 1 or e < 1:
        raise ValueError(f"n_units and n_enemies must be >= 1, got {a} and {e}")
    if sc.race == "terran" and a > e:
        raise ValueError(
            "terran scenarios need n_units <= n_enemies (a Medivac heals ally j with action 6+j), "
            f"got {a} > {e}"
        )
    return Scenario(name, sc.race, a, e, sc.team_gen, sc.p, sc.map_size, sc.episode_limit, sc.unit_type_bits)
