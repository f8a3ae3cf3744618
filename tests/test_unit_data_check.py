"""benchmarks/fidelity/unit_data_check.py reads the game's catalogs as the game layers them: later mods
override earlier ones, entries inherit from their parent and then from their class defaults, arrays keep every
element, and a weapon's damage is found through missiles, sets and persistents."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from benchmarks.fidelity import unit_data_check as udc

CORE = {
    "unit": """<Catalog><CUnit default="1"><Radius value="0.5"/><Sight value="9"/></CUnit>
        <CUnit default="1" id="DESTRUCTIBLE"><LifeArmor value="10"/></CUnit>
        <CUnit default="1" id="MISSILE"><Mover value="##id##"/></CUnit></Catalog>""",
    "weapon": """<Catalog><CWeapon default="1"><MinScanRange value="5"/><Range value="5"/>
        <Period value="0.8332"/><DamagePoint value="0.167"/></CWeapon>
        <CWeaponLegacy default="1"><Effect value="##id##"/></CWeaponLegacy></Catalog>""",
    "effect": """<Catalog><CEffect default='1'/>
        <CEffectLaunchMissile default="1"><AmmoUnit value="##id##Weapon"/></CEffectLaunchMissile>
        </Catalog>""",
    "mover": """<Catalog><CMoverMissile id="MissileDefault"><MotionPhases><Acceleration value="3200"/>
        <MaxSpeed value="18.75"/></MotionPhases><MotionPhases YawPitchRoll="MAX"/></CMoverMissile>
        </Catalog>""",
}
LIBERTY = {
    "unit": """<Catalog>
        <CUnit id="Zealot"><LifeMax value="100"/><ShieldsMax value="50"/><LifeArmor value="1"/>
            <Speed value="2"/><WeaponArray Link="PsiBlades"/></CUnit>
        <CUnit id="Stalker"><LifeMax value="80"/><Radius value="0.625"/><Speed value="2.9531"/>
            <WeaponArray Link="StalkerMelee"/><WeaponArray Link="ParticleDisruptors"/></CUnit>
        <CUnit id="Colossus"><LifeMax value="200"/><WeaponArray Link="Lances"/></CUnit></Catalog>""",
    "weapon": """<Catalog>
        <CWeaponLegacy id="PsiBlades"><Range value="0.1"/><Period value="1.2"/><DamagePoint value="0"/>
            <Effect value="PsiBladesBurst"/></CWeaponLegacy>
        <CWeaponLegacy id="StalkerMelee"><Range value="0.5"/></CWeaponLegacy>
        <CWeaponLegacy id="ParticleDisruptors"><Range value="6"/><Period value="1.44"/></CWeaponLegacy>
        <CWeaponLegacy id="Grenades"><RangeSlop value="0"/><Effect value="GrenadesLM"/></CWeaponLegacy>
        <CWeaponLegacy id="Lances"/></Catalog>""",
    "mover": """<Catalog><CMoverMissile id="ParticleDisruptorsWeapon" parent="MissileDefault"/>
        <CMoverMissile id="Long"><MotionPhases><Speed value="12"/><Acceleration value="140"/>
            <MaxSpeed value="200"/></MotionPhases></CMoverMissile></Catalog>""",
    "effect": """<Catalog>
        <CEffectCreatePersistent id="PsiBladesBurst"><PeriodCount value="2"/>
            <PeriodicEffectArray value="PsiBlades"/><PeriodicPeriodArray value="0"/>
            <PeriodicPeriodArray value="0.28"/></CEffectCreatePersistent>
        <CEffectSet id="Lances"><EffectArray value="LancesF"/><EffectArray value="LancesR"/></CEffectSet>
        <CEffectCreatePersistent id="LancesF"><ExpireDelay value="0.375"/><PeriodCount value="11"/>
            <PeriodicEffectArray value="LancesE"/><PeriodicPeriodArray value="0.0312"/>
            <ExpireEffect value="LancesMU"/></CEffectCreatePersistent>
        <CEffectCreatePersistent id="LancesR" parent="LancesF"/>
        <CEffectEnumArea id="LancesE"><AreaArray Radius="0.15" Effect="LancesDelay"/></CEffectEnumArea>
        <CEffectCreatePersistent id="LancesDelay"><ExpireDelay value="0.25"/>
            <FinalEffect value="LancesMU"/></CEffectCreatePersistent>
        <CEffectDamage id="LancesMU"><Amount value="20"/></CEffectDamage>
        <CEffectDamage id="PsiBlades"><Amount value="8"/></CEffectDamage>
        <CEffectLaunchMissile id="ParticleDisruptors"><ImpactEffect value="PDSet"/></CEffectLaunchMissile>
        <CEffectLaunchMissile id="GrenadesLM"><ImpactEffect value="PDU"/><Movers Link="Short" IfRangeLTE="3"/>
            <Movers Link="Long" IfRangeLTE="7"/></CEffectLaunchMissile>
        <CEffectSet id="PDSet"><EffectArray value="PDSuicide"/><EffectArray value="PDU"/></CEffectSet>
        <CEffectDamage id="PDSuicide"/>
        <CEffectDamage id="PDU" parent="DU"><AttributeBonus index="Armored" value="4"/></CEffectDamage>
        <CEffectDamage default="1" id="DU"><Amount value="10"/></CEffectDamage></Catalog>""",
}
LATER = {
    "weapon": """<Catalog><CWeaponLegacy id="ParticleDisruptors"><Period value="1.87"/>
        </CWeaponLegacy></Catalog>"""
}


def tree(tmp_path: Path) -> Path:
    for mod, files in (("Core", CORE), ("Liberty", LIBERTY), ("VoidMulti", LATER)):
        d = tmp_path / "Mods" / f"{mod}.SC2Mod" / "Base.SC2Data" / "GameData"
        d.mkdir(parents=True)
        for kind, text in files.items():
            (d / f"{kind.capitalize()}Data.xml").write_text(text)
    return tmp_path


def test_fields_come_from_the_entry_its_parent_and_its_class_defaults(tmp_path):
    cat = udc.load(udc._dir_reader(str(tree(tmp_path))))
    zealot = udc.catalog_row(cat, "Zealot")
    assert (zealot["max_health"], zealot["max_shield"], zealot["armor"]) == (100, 50, 1)
    assert (zealot["radius"], zealot["sight"]) == (0.5, 9)  # CUnit defaults; the named default is not used
    w = zealot["weapon"]
    assert (w["range"], w["period_s"], w["damage_point_s"], w["min_scan"]) == (0.1, 1.2, 0.0, 5.0)
    assert (w["damage"], w["attacks"], w["bonuses"]) == (8.0, 2, {})  # a persistent: 2 periods of 8


def test_arrays_keep_every_element_and_a_named_weapon_is_chosen(tmp_path):
    cat = udc.load(udc._dir_reader(str(tree(tmp_path))))
    assert udc.weapons(cat["Unit"], "Stalker") == ["StalkerMelee", "ParticleDisruptors"]
    w = udc.catalog_row(cat, "Stalker", "ParticleDisruptors")["weapon"]
    # ##id## names the missile; its set's suicide (no amount) is skipped; the damage inherits from its parent
    assert (w["range"], w["period_s"], w["damage_point_s"]) == (6.0, 1.44, 0.167)
    assert (w["damage"], w["attacks"], w["bonuses"]) == (10.0, 1, {"Armored": 4.0})
    assert udc.catalog_row(cat, "Stalker")["weapon"]["id"] == "StalkerMelee"  # the first, by default


def test_a_missile_is_the_launchs_mover_or_its_ammo_units_and_range_slop_defaults_to_core(tmp_path):
    read = udc._dir_reader(str(tree(tmp_path)))
    cat = udc.load(read)
    # no Movers link: AmmoUnit ##id##Weapon, whose Mover is ##id## (MISSILE's default), inheriting its parent
    assert udc.missile(cat, "ParticleDisruptors") == {
        "effect": "ParticleDisruptors",
        "mover": "ParticleDisruptorsWeapon",
        "speed": 0.0,
        "acceleration": 3200.0,
        "max_speed": 18.75,
    }
    long = udc.missile(cat, "GrenadesLM")  # the last Movers link: the longest range's
    assert (long["mover"], long["speed"], long["acceleration"], long["max_speed"]) == ("Long", 12, 140, 200)
    assert udc.missile(cat, "PsiBladesBurst") is None
    assert udc.catalog_row(cat, "Zealot")["weapon"].get("missile") is None
    w = cat["Weapon"]
    assert (w.field("Grenades", "RangeSlop"), w.field("PsiBlades", "RangeSlop", "1")) == ("0", "1")


def test_a_later_mod_overrides_an_earlier_one_only_when_loaded(tmp_path):
    read = udc._dir_reader(str(tree(tmp_path)))
    assert udc.catalog_row(udc.load(read), "Stalker", "ParticleDisruptors")["weapon"]["period_s"] == 1.44
    later = udc.load(read, ("core", "liberty", "voidmulti"))
    assert udc.catalog_row(later, "Stalker", "ParticleDisruptors")["weapon"]["period_s"] == 1.87


def test_compare_names_each_field_where_the_table_and_the_catalogs_differ(monkeypatch, tmp_path):
    cat = udc.load(udc._dir_reader(str(tree(tmp_path))))
    monkeypatch.setattr(udc, "UNIT_IDS", {"zealot": "Zealot", "stalker": "Stalker"})
    table = {
        "zealot": {"liberty": udc.catalog_row(cat, "Zealot")},
        "stalker": {"liberty": udc.catalog_row(cat, "Stalker", "ParticleDisruptors")},
    }
    assert udc.compare(table, cat) == []
    wrong = copy.deepcopy(table)
    wrong["stalker"]["liberty"]["weapon"]["period_s"] = 1.87
    wrong["zealot"]["liberty"]["max_shield"] = 60
    assert udc.compare(wrong, cat) == [
        "zealot.max_shield: table 60, catalogs 50.0",
        "stalker.weapon.period_s: table 1.87, catalogs 1.44",
    ]


def test_the_engine_table_has_every_field_the_check_reads():
    table = yaml.safe_load(udc.TABLE.read_text())
    assert set(udc.UNIT_IDS) == {k for k in table if k != "rules"}
    for name in udc.UNIT_IDS:
        w = table[name]["liberty"].get("weapon")
        if w is not None:
            assert set(udc.WEAPON_KEYS) <= set(w)
            assert "range_slop" in udc.WEAPON_KEYS and "damage_point_s" in udc.WEAPON_KEYS
            if "missile" in w:
                assert set(udc.MISSILE_KEYS) <= set(w["missile"])


def test_delayed_hits_are_read_from_the_persistent_effects(monkeypatch, tmp_path):
    cat = udc.load(udc._dir_reader(str(tree(tmp_path))))
    zealot = udc.catalog_row(cat, "Zealot")["weapon"]
    assert zealot["burst"] == {"effect": "PsiBladesBurst", "periods_s": [0.0, 0.28]}
    colossus = udc.catalog_row(cat, "Colossus")["weapon"]
    assert (colossus["damage"], colossus["attacks"]) == (20.0, 2)  # each sweep's ExpireEffect on the target
    assert colossus["sweep"] == {
        "effects": ["LancesF", "LancesR"],
        "expire_delay_s": 0.375,  # LancesR inherits its parent's fields
        "searches": 11,
        "search_period_s": 0.0312,
        "splash_delay_s": 0.25,
    }
    assert "sweep" not in udc.catalog_row(cat, "Stalker", "ParticleDisruptors")["weapon"]
    monkeypatch.setattr(udc, "UNIT_IDS", {"zealot": "Zealot", "colossus": "Colossus"})
    table = {n: {"liberty": udc.catalog_row(cat, u)} for n, u in udc.UNIT_IDS.items()}
    assert udc.compare(table, cat) == []
    table["colossus"]["liberty"]["weapon"]["sweep"]["expire_delay_s"] = 0.25
    del table["zealot"]["liberty"]["weapon"]["burst"]
    assert [b.split(":")[0] for b in udc.compare(table, cat)] == [
        "zealot.weapon.burst",
        "colossus.weapon.sweep",
    ]
