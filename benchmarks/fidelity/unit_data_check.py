"""Check the engine's unit table (``marl/envs/smac/sim/unit_data.yaml``, ``liberty:``) against StarCraft II's
own data files, the catalogs the SMAC maps load (``Core.SC2Mod`` then ``Liberty.SC2Mod``).

It reads ``UnitData.xml``, ``WeaponData.xml``, ``EffectData.xml`` and ``MoverData.xml`` of each mod from a
copy of the game's ``Mods`` folder, or from a git mirror of one (e.g. SC2Mapster/SC2GameData, 949614a9 = SC2
4.6.2.69232), layers them as the game does (a later mod's field replaces an earlier one's; an entry
inherits its ``parent``'s fields, then its class's defaults: ``CWeaponLegacy`` over ``CWeapon``,
``CEffectDamage`` over ``CEffect``; a missile's speeds are its mover's first motion phase) and prints every
field of the table beside the catalog's value, failing if any differs.

    .venv/bin/python benchmarks/fidelity/unit_data_check.py --git /path/to/SC2GameData.git --rev 949614a9
    .venv/bin/python benchmarks/fidelity/unit_data_check.py --dir /path/to/StarCraftII/extracted/mods
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

TABLE = Path(__file__).resolve().parents[2] / "marl" / "envs" / "smac" / "sim" / "unit_data.yaml"
MODS = ("core", "liberty")  # what every SMAC map's DocumentInfo depends on (Liberty, which builds on Core)
BASE_CLASS = {"CWeaponLegacy": "CWeapon", "CEffectDamage": "CEffect", "CEffectLaunchMissile": "CEffect"}
UNIT_IDS = {
    "marine": "Marine",
    "marauder": "Marauder",
    "medivac": "Medivac",
    "stalker": "Stalker",
    "zealot": "Zealot",
    "colossus": "Colossus",
    "hydralisk": "Hydralisk",
    "zergling": "Zergling",
    "baneling": "Baneling",
    "spine_crawler": "SpineCrawler",
}


class Catalog:
    """One kind of catalog (units, weapons or effects) layered over the mods in load order."""

    def __init__(self, documents: list[bytes]) -> None:
        self.entries: dict[str, dict] = {}
        self.defaults: dict[str, dict] = {}  # class -> fields of its unnamed default entry
        self.named_defaults: dict[str, dict] = {}  # id -> fields of a named default (a parent template)
        for doc in documents:
            for el in ET.fromstring(doc):
                if el.get("default") == "1":
                    bucket = self.named_defaults if el.get("id") else self.defaults
                    key = el.get("id") or el.tag
                    _merge(bucket.setdefault(key, {"_class": el.tag, "_parent": el.get("parent")}), el)
                elif el.get("id"):
                    entry = self.entries.setdefault(el.get("id"), {"_class": el.tag, "_parent": None})
                    entry["_parent"] = el.get("parent") or entry["_parent"]
                    _merge(entry, el)

    def field(self, entry_id: str, name: str, default: str | None = None) -> str | None:
        """The field's value after inheritance: the entry, its parents, then its class defaults."""
        seen: set[int] = set()
        node = self.entries.get(entry_id) or self.named_defaults.get(entry_id)
        cls = node["_class"] if node else None
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            if name in node:
                return node[name]
            parent = node["_parent"]
            node = (self.entries.get(parent) or self.named_defaults.get(parent)) if parent else None
        while cls is not None:
            if name in self.defaults.get(cls, {}):
                return self.defaults[cls][name]
            cls = BASE_CLASS.get(cls)
        return default

    def array(self, entry_id: str, name: str) -> list[str]:
        """Every element of the entry's own array field ``name``, in order (see :func:`_merge`)."""
        return [v for k, v in self.entries.get(entry_id, {}).items() if k.split("#")[0] == name]

    def cls(self, entry_id: str) -> str | None:
        node = self.entries.get(entry_id)
        return node["_class"] if node else None


def _merge(into: dict, el: ET.Element) -> None:
    """Copy an entry's fields; a tag repeated without an index (an array) keeps every element."""
    seen: dict[str, int] = {}
    for child in el:
        key = child.tag + (f"[{child.get('index')}]" if child.get("index") else "")
        n = seen[key] = seen.get(key, 0) + 1
        if key == "MotionPhases" and n == 1:  # a mover's first phase: its launch speeds
            _merge(phase := {}, child)
            into.update({f"{key}.{k}": v for k, v in phase.items()})
        for attr in ("value", "Value", "Link", "Effect"):
            if child.get(attr) is not None:
                into[key if n == 1 else f"{key}#{n}"] = child.get(attr)
                break


def load(read, mods=MODS) -> dict[str, Catalog]:
    """``read(relative_path) -> bytes | None`` over a mods tree; paths are matched case-insensitively."""
    out = {}
    for kind in ("Unit", "Weapon", "Effect", "Mover"):
        docs = [
            d for m in mods if (d := read(f"mods/{m}.sc2mod/base.sc2data/gamedata/{kind.lower()}data.xml"))
        ]
        out[kind] = Catalog(docs)
    return out


def _git_reader(repo: str, rev: str):
    names = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", "--name-only", rev], capture_output=True, text=True
    )
    index = {n.lower(): n for n in names.stdout.splitlines()}

    def read(path: str) -> bytes | None:
        real = index.get(path)
        if real is None:
            return None
        return subprocess.run(
            ["git", "-C", repo, "show", f"{rev}:{real}"], capture_output=True, check=True
        ).stdout

    return read


def _dir_reader(root: str):
    index = {str(p.relative_to(root)).lower(): p for p in Path(root).rglob("*.xml")}
    return lambda path: index[path].read_bytes() if path in index else None


def _damage(effects: Catalog, effect_id: str, depth: int = 0) -> list[tuple[float, dict[str, float]]]:
    """The damage hits one weapon effect puts on its target, following missiles, sets and persistents
    (area searches round the target hit other units: splash, not counted here)."""
    if depth > 8 or effects.cls(effect_id) is None:
        return []
    cls, f = effects.cls(effect_id), (lambda name, d=None: effects.field(effect_id, name, d))
    if cls == "CEffectDamage":
        amount = float(f("Amount", "0"))
        required = (f("SearchFilters", "") or "").split(";")[0].split(",")
        if amount == 0 or "Structure" in required:  # a caster's suicide; damage to structures only
            return []
        bonus = {a: float(v) for a in ("Light", "Armored") if (v := f(f"AttributeBonus[{a}]"))}
        return [(amount, bonus)]
    if cls == "CEffectLaunchMissile":
        return _damage(effects, f("ImpactEffect", ""), depth + 1)
    if cls == "CEffectSet":
        return [h for v in effects.array(effect_id, "EffectArray") for h in _damage(effects, v, depth + 1)]
    if cls == "CEffectCreatePersistent":
        hits = _damage(effects, f("PeriodicEffectArray", ""), depth + 1) * int(f("PeriodCount", "1"))
        return hits + _damage(effects, f("ExpireEffect", ""), depth + 1)
    return []


def missile(cat: dict[str, Catalog], effect_id: str) -> dict | None:
    """The missile a weapon effect launches (None if it launches none): the launch's last ``Movers`` link
    (the one for the longest range), else its ``AmmoUnit``'s ``Mover``, and that mover's first phase."""
    e, u, m = cat["Effect"], cat["Unit"], cat["Mover"]
    if e.cls(effect_id) != "CEffectLaunchMissile":
        return None
    links = e.array(effect_id, "Movers")
    if links:
        mover = links[-1]
    else:
        ammo = (e.field(effect_id, "AmmoUnit") or "##id##Weapon").replace("##id##", effect_id)
        mover = (u.field(ammo, "Mover") or "##id##").replace("##id##", ammo)
    phase = lambda name: float(m.field(mover, f"MotionPhases.{name}", "0"))  # noqa: E731
    return {
        "effect": effect_id,
        "mover": mover,
        "speed": phase("Speed"),
        "acceleration": phase("Acceleration"),
        "max_speed": phase("MaxSpeed"),
    }


def timing(effects: Catalog, effect_id: str) -> dict:
    """The delayed hits of a weapon effect made of persistent effects: ``burst`` (one persistent on the
    target with its periods, the zealot's ``PsiBladesBurst``) and ``sweep`` (a set of persistents on the
    target whose searches put a delayed persistent on the units they find, the colossus's ``ThermalLances``);
    empty for any other effect."""
    f = lambda eid, name, d=None: effects.field(eid, name, d)  # noqa: E731
    cls = effects.cls(effect_id)
    if cls == "CEffectCreatePersistent" and not f(effect_id, "ExpireEffect"):
        return {
            "burst": {
                "effect": effect_id,
                "periods_s": [float(v) for v in effects.array(effect_id, "PeriodicPeriodArray")],
            }
        }
    sweeps = effects.array(effect_id, "EffectArray") if cls == "CEffectSet" else []
    if sweeps and all(effects.cls(x) == "CEffectCreatePersistent" for x in sweeps):
        first = sweeps[0]
        search = f(first, "PeriodicEffectArray", "")
        delayed = f(search, "AreaArray", "")
        return {
            "sweep": {
                "effects": sweeps,
                "expire_delay_s": float(f(first, "ExpireDelay", "0")),
                "searches": int(f(first, "PeriodCount", "1")),
                "search_period_s": float(f(first, "PeriodicPeriodArray", "0")),
                "splash_delay_s": float(f(delayed, "ExpireDelay", "0")),
            }
        }
    return {}


def weapons(units: Catalog, unit: str) -> list[str]:
    """Every weapon the unit carries, in its ``WeaponArray`` order."""
    return units.array(unit, "WeaponArray")


def catalog_row(cat: dict[str, Catalog], unit: str, weapon: str | None = None) -> dict:
    """The ``liberty:`` fields of one unit as the catalogs give them, for ``weapon`` if the unit carries it
    (else its first weapon)."""
    u, w, e = cat["Unit"], cat["Weapon"], cat["Effect"]
    row = {
        "max_health": float(u.field(unit, "LifeMax", "0")),
        "max_shield": float(u.field(unit, "ShieldsMax", "0")),
        "armor": float(u.field(unit, "LifeArmor", "0")),
        "speed": float(u.field(unit, "Speed", "0")),
        "radius": float(u.field(unit, "Radius", "0")),
        "sight": float(u.field(unit, "Sight", "0")),
    }
    carried = weapons(u, unit)
    weapon = weapon if weapon in carried else (carried[0] if carried else None)
    row["weapons"] = carried
    if weapon:
        effect = (w.field(weapon, "Effect") or "").replace("##id##", weapon)
        hits = _damage(e, effect)
        row["weapon"] = {
            "id": weapon,
            "range": float(w.field(weapon, "Range", "0")),
            "period_s": float(w.field(weapon, "Period", "0")),
            "damage_point_s": float(w.field(weapon, "DamagePoint", "0")),
            "range_slop": float(w.field(weapon, "RangeSlop", "0")),
            "min_scan": float(w.field(weapon, "MinScanRange", "0")),
            "damage": hits[0][0] if hits else None,
            "attacks": len(hits),
            "bonuses": hits[0][1] if hits else {},
        }
        if (launch := missile(cat, effect)) is not None:
            row["weapon"]["missile"] = launch
        row["weapon"].update(timing(e, effect))
    return row


def _weapon_id(row: dict) -> str | None:
    """The weapon a ``liberty:`` row names (None for the Medivac)."""
    return (row.get("weapon") or {}).get("id")


WEAPON_KEYS = (
    "id",
    "range",
    "period_s",
    "damage_point_s",
    "range_slop",
    "min_scan",
    "damage",
    "attacks",
    "bonuses",
)
MISSILE_KEYS = ("effect", "mover", "speed", "acceleration", "max_speed")


def compare(table: dict, cat: dict[str, Catalog]) -> list[str]:
    """Every field where the table's ``liberty:`` row and the catalogs disagree (empty: they agree)."""
    bad = []
    for name, unit in UNIT_IDS.items():
        want = table[name]["liberty"]
        have = catalog_row(cat, unit, _weapon_id(want))
        for key in ("max_health", "max_shield", "armor", "speed", "radius", "sight"):
            if abs(float(want.get(key, 0)) - have[key]) > 1e-3:
                bad.append(f"{name}.{key}: table {want.get(key, 0)}, catalogs {have[key]}")
        wt, wc = want.get("weapon"), have.get("weapon")
        if wt is None:
            continue
        for key in WEAPON_KEYS:
            a, b = wt.get(key), (wc or {}).get(key)
            same = a == b if key in ("id", "bonuses") else b is not None and abs(float(a) - float(b)) < 1e-3
            if not same:
                bad.append(f"{name}.weapon.{key}: table {a}, catalogs {b}")
        mt, mc = wt.get("missile"), (wc or {}).get("missile")
        if (mt is None) != (mc is None):
            bad.append(f"{name}.weapon.missile: table {mt}, catalogs {mc}")
        for key in MISSILE_KEYS if mt and mc else ():
            a, b = mt[key], mc[key]
            if key in (
                "effect",
                "mover",
            ):  # the table may add a note after the id: "StalkerWeapon (parent ...)"
                same = str(a).split(" ")[0] == b
            else:
                same = abs(float(a) - float(b)) < 1e-3
            if not same:
                bad.append(f"{name}.weapon.missile.{key}: table {a}, catalogs {b}")
        for key in ("burst", "sweep"):  # delayed hits: the same fields, equal values
            a, b = wt.get(key), (wc or {}).get(key)
            if a != b:
                bad.append(f"{name}.weapon.{key}: table {a}, catalogs {b}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git", help="a git mirror of the game's data files (its mods/ folder at the root)")
    src.add_argument("--dir", help="a folder holding the game's mods/ tree as files")
    ap.add_argument("--rev", default="HEAD", help="with --git: the commit to read (default HEAD)")
    ap.add_argument(
        "--mods",
        default=",".join(MODS),
        help="mods in load order (default core,liberty: what the SMAC maps load; e.g. add "
        "swarm,void,libertymulti,swarmmulti,voidmulti to see the multiplayer numbers)",
    )
    args = ap.parse_args(argv)
    read = _git_reader(args.git, args.rev) if args.git else _dir_reader(args.dir)
    cat = load(read, tuple(m.strip().lower() for m in args.mods.split(",") if m.strip()))
    if not cat["Unit"].entries:
        print(
            f"no UnitData.xml found under mods/{{{','.join(MODS)}}}.sc2mod/base.sc2data/gamedata/",
            file=sys.stderr,
        )
        return 2
    table = yaml.safe_load(TABLE.read_text())
    for name, unit in UNIT_IDS.items():
        print(f"{name:14s}", catalog_row(cat, unit, _weapon_id(table[name]["liberty"])))
    bad = compare(table, cat)
    print(
        "\n".join(bad)
        if bad
        else f"unit_data.yaml liberty: rows agree with the catalogs ({len(UNIT_IDS)} units)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
