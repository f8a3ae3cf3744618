"""The embedded engine's unit numbers are StarCraft II's own as the SMAC maps load them
(marl/envs/smac/sim/unit_data.yaml, ``liberty:``: the game's Core and Liberty catalogs, the only mod the maps
depend on), for the enemies' stock units and the allies' RL copies alike, except the deviations that file
lists with a reason; docs/fidelity.md shows the same table."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from marl.envs.smac.sim import units as U

_FILE = yaml.safe_load((Path(U.__file__).parent / "unit_data.yaml").read_text())
RULES = _FILE.pop("rules")
DATA = _FILE
ATTRS = {
    "Light": U.LIGHT,
    "Armored": U.ARMORED,
    "Biological": U.BIO,
    "Mechanical": U.MECH,
    "Massive": U.MASSIVE,
    "Structure": U.STRUCTURE,
}


def expected(game: dict) -> dict[str, float]:
    """Engine numbers implied by a ``liberty:`` row (see the YAML header for the conversions)."""
    out = {
        "hp": game["max_health"],
        "shield": game.get("max_shield", 0),
        "armor": game["armor"],
        "attr": sum(ATTRS[a] for a in game["attributes"]),
        "speed": game["speed"],
        "radius": game["radius"],
    }
    w = game.get("weapon")
    if w is not None:
        bonus = w["bonuses"]
        out.update(
            dmg=w["damage"],
            rng=w["range"],
            battr=sum(ATTRS[a] for a in bonus),
            bdmg=sum(bonus.values()),
            acquire=max(w["min_scan"], w["range"]),  # Liquipedia "Automatic Targeting"
        )
        if "splash_radius" not in w:  # the baneling's burst is its death, not a cooldown
            out.update(hits=w["attacks"], cd=w["period_s"] * 16, hits_air=float(w["targets"] == "Any"))
        m = w.get("missile", {})
        out.update(
            wind=round(w["damage_point_s"] * 16),
            slop=w["range_slop"],
            msl_speed=m.get("speed", 0),
            msl_accel=m.get("acceleration", 0),
            msl_max=m.get("max_speed", 0),
            burst=round(w["burst"]["periods_s"][1] * 16) if "burst" in w else 0,
            delay=round(w["sweep"]["expire_delay_s"] * 16) if "sweep" in w else 0,
        )
    return out


RL_FIELDS = ("hp", "shield", "armor", "speed", "radius")


def engine(name: str, enemy: bool = False) -> dict[str, float]:
    row = U.PROPS[U.type_ids((name,), enemy)[0]]
    cols = {
        "hp": U.HP,
        "shield": U.SHIELD,
        "armor": U.ARMOR,
        "attr": U.ATTR,
        "speed": U.SPEED,
        "radius": U.RADIUS,
        "dmg": U.DMG,
        "hits": U.HITS,
        "rng": U.RANGE,
        "cd": U.COOLDOWN,
        "battr": U.BONUS_ATTR,
        "bdmg": U.BONUS_DMG,
        "hits_air": U.HITS_AIR,
        "acquire": U.ACQUIRE,
        "wind": U.WIND_UP,
        "slop": U.RANGE_SLOP,
        "msl_speed": U.MSL_SPEED,
        "msl_accel": U.MSL_ACCEL,
        "msl_max": U.MSL_MAX_SPEED,
        "burst": U.BURST_GAP,
        "delay": U.EFFECT_DELAY,
    }
    if name == "medivac":
        cols = {k: c for k, c in cols.items() if k in ("hp", "shield", "armor", "attr", "speed", "radius")}
        cols["heal_range"] = U.RANGE
    out = {k: float(row[c]) for k, c in cols.items()}
    out["speed"] *= 16.0  # PROPS stores per game loop
    for k, per_s in (("msl_speed", 16.0), ("msl_accel", 256.0), ("msl_max", 16.0)):
        if k in out:
            out[k] *= per_s
    return out


@pytest.mark.parametrize("enemy", [True, False], ids=["enemy-stock", "ally-rl"])
@pytest.mark.parametrize("name", sorted(DATA))
def test_engine_numbers_are_the_games_unless_a_deviation_says_why(name, enemy):
    want, have = expected(DATA[name]["liberty"]), engine(name, enemy)
    deviations = DATA[name].get("deviations", {})
    for field, value in want.items():
        same = math.isclose(have[field], value, abs_tol=1e-3)
        if field in deviations:
            assert not same, f"{name}.{field}: listed as a deviation but equals the data's {value}"
        else:
            assert same, f"{name}.{field}: engine {have[field]} != data {value} (and no deviation is listed)"


def test_the_maps_rl_copies_equal_the_liberty_stock_units():
    """The RL copies' fields as the SMAC maps store them equal the Liberty stock units' in every field; the
    two fields where they differ from the later multiplayer balance (``game:``) are WoL-era values."""
    for name, row in DATA.items():
        for k, v in row.get("rl", {}).items():
            if k in RL_FIELDS:
                assert math.isclose(v, expected(row["liberty"])[k], abs_tol=1e-3), (name, k)
    differ = {
        (name, k)
        for name, row in DATA.items()
        for k, v in row.get("rl", {}).items()
        if k in RL_FIELDS and not math.isclose(v, expected(row["game"] | {"weapon": None})[k], abs_tol=1e-3)
    }
    assert differ == {("hydralisk", "hp"), ("medivac", "speed")}
    assert engine("hydralisk") == engine("hydralisk", enemy=True)
    assert engine("medivac")["speed"] == engine("medivac", enemy=True)["speed"] == 2.75


def test_every_engine_unit_is_in_the_table_with_its_special_rules():
    assert set(DATA) == set(U.TYPE_INDEX)
    bane, burst = engine("baneling", enemy=True), DATA["baneling"]["liberty"]["weapon"]
    assert (bane["dmg"], bane["bdmg"], bane["battr"], bane["rng"]) == (
        burst["damage"],
        burst["bonuses"]["Light"],
        U.LIGHT,
        burst["range"],
    )
    assert U.BANE_SPLASH_RADIUS == burst["splash_radius"]
    beam = DATA["colossus"]["liberty"]["weapon"]
    assert (U.BEAM_HALF_LENGTH, U.BEAM_HALF_WIDTH) == (beam["beam_half_length"], beam["beam_search_radius"])
    medivac = DATA["medivac"]["liberty"]
    assert U.MEDIVAC_AUTOCAST_RANGE == medivac["heal_autocast_range"]
    assert engine("medivac")["heal_range"] == medivac["heal_range"]
    assert U.ENERGY_MAX == medivac["max_energy"]
    assert U.ENERGY_START == medivac["start_energy"]
    assert U.ENERGY_REGEN * 16 == medivac["energy_regen"]
    lo, hi = RULES["cooldown_jitter_s"]["value"]
    assert (U.CD_JITTER_LO, U.CD_JITTER_HI) == (round(lo * 16), round(hi * 16))


def test_rule_constants_are_the_tables():
    per_loop = 1.0 / RULES["loops_per_game_second"]["value"]
    assert U.LOOPS_PER_STEP == RULES["loops_per_agent_step"]["value"]
    assert U.SHIELD_REGEN == RULES["shield_regen_per_s"]["value"] * per_loop
    assert U.SHIELD_REGEN_DELAY == RULES["shield_regen_delay_s"]["value"] / per_loop
    assert U.ZERG_HP_REGEN == RULES["zerg_hp_regen_per_s"]["value"] * per_loop
    assert U.MEDIVAC_HEAL == RULES["medivac_heal_per_s"]["value"] * per_loop
    assert U.HP_PER_ENERGY == RULES["medivac_hp_per_energy"]["value"]
    assert U.HEAL_START_ENERGY == RULES["medivac_heal_start_energy"]["value"]
    assert U.ENERGY_REGEN == RULES["energy_regen_per_s"]["value"] * per_loop
    assert U.CONTACT == RULES["contact_factor"]["value"]
    assert U.SLIDE == RULES["contact_slide"]["value"]
    assert U.CALL_FOR_HELP_RADIUS == RULES["call_for_help_radius"]["value"]
    assert U.CALL_FOR_HELP_LOOPS == RULES["call_for_help_period_s"]["value"] / per_loop
    assert all(r.get("source") for r in RULES.values())
    assert all(row.get("source") for row in DATA.values())


def test_fidelity_page_shows_the_table():
    page = (Path(__file__).resolve().parents[1] / "docs" / "fidelity.md").read_text()
    for name in DATA:
        hp = int(engine(name, enemy=True)["hp"])
        assert f"| {name} | {hp} |" in page, f"docs/fidelity.md has no row for {name} with {hp} HP"
