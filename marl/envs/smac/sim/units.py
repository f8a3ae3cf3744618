"""Unit data for the embedded engine, in GAME-SECOND units (docs/smac.md §6; sources in docs/fidelity.md).

Every number here is StarCraft II's own, as the SMAC maps load it: each map depends on one mod only,
``Liberty.SC2Mod`` (its ``DocumentInfo``), so enemies are the stock units of the game's Core and Liberty
catalogs (UnitData, WeaponData, EffectData of SC2 4.6.2.69232, the SMAC paper's version; identical at 4.10
and 5.0.14), not the multiplayer balance of later mods; allies are SMAC's RL copies, whose fields the maps
set to the same values and whose weapons link the same stock weapons. ``unit_data.yaml`` beside this file
holds the table with its sources, and ``tests/test_unit_data.py`` holds this module to it.

Conventions (chosen once, used everywhere in ``sim/``):

* Time: 16 game loops per game second; one engine tick is one loop (dt = 1/16 game-s) and one agent
  step is 8 ticks, exactly as SMAC's ``step_mul = 8``.
* Speeds are game-second values (marine 2.25 units/game-s, so 1.125 units per agent step).
* Weapon cooldowns are in game loops: the weapon's ``Period`` in game seconds × 16, not rounded (marine
  13.77, marauder 24, stalker 23.04, zealot 19.2, colossus 35.2, hydralisk 13.28, zergling 11.14, spine
  crawler 25.6). Each time a weapon fires a uniform random delay in [-1, +2] loops, any real value, is
  added: the game's ``RandomDelayMin``/``Max`` (-0.0625 and +0.125 game-s, every legacy weapon's default
  in Core's WeaponData). The cooldown is a continuous timer: a weapon that comes ready part-way through a
  loop and attacks in that loop counts its next cooldown from that moment (the part of the loop after it
  is carried); one that stays unused is simply ready. Measured on the game's own 3m episodes (D,
  ``benchmarks/fidelity/recorded_cooldowns.py``): the cooldowns the game shows fit exactly this, and not whole
  loops.
* Ranges are edge-to-edge (the centre-to-centre test adds both radii); melee is the game's 0.1.
* Scan (acquire) range of the enemy AI, edge-to-edge: ``max(MinScanRange, weapon range)`` with the
  game's default ``MinScanRange`` of 5 (Liquipedia's "Automatic Targeting" rule; the +0.5 of Legacy of
  the Void lives in a multiplayer mod the SMAC maps do not load). Medivacs do not attack; an enemy Medivac
  heals the biological ally with the lowest life fraction within its heal's auto-cast range (6).
* Regeneration: shields 2 per game-s after 10 game-s (160 loops) without damage; zerg HP 0.2734 per
  game-s; Medivac energy 0.5625 per game-s (max 200, start 50); heal 9 HP per game-s costing 1 energy
  per 3 HP within 4; a heal needs 5 energy to start, not to go on.  The source of each constant is in
  ``unit_data.yaml`` (``rules:``), which ``tests/test_unit_data.py`` holds these constants to.

Approximations (documented choices):

* An attack starts when the target is within weapon reach and the cooldown is 0: the cooldown (``Period``
  plus the jitter) starts then, and the weapon's effect comes ``DamagePoint`` later (its wind-up, in loops,
  rounded as the period; the attacker stands still meanwhile and takes no new order). The attack is lost if
  the target dies or stands beyond weapon reach + ``RangeSlop`` when the wind-up ends. A missile weapon's
  effect is a launch: its damage lands when the missile arrives, after the edge-to-edge distance at launch
  flown by the missile's mover (initial ``Speed``, ``Acceleration``, ``MaxSpeed``); a missile in flight
  hits even if its launcher has died. Readings and sources: ``weapons._start_attack``, ``weapons._wind_up``.
* The colossus's beam lands 6 loops after its wind-up: X's sweeps hit the target at their ``ExpireDelay``
  (0.375 s) and the units beside it 0.25 s after each of their 11 searches (0.0312 s apart) finds them; the
  engine lands both at the target's time, on the units beside the target then (``weapons._effect``).
  The zealot's second blade, 4 loops after the first, is modelled too. Not modelled: the spine crawler's
  short-range tentacle (its long one is used at every range).
* Baneling: 20 damage (+15 vs Light) to every hostile ground unit whose edge is within 2.2 of its centre
  (``VolatileBurstU``); it dies when it attacks (reach 0.25). Its damage to structures is not modelled.
* Colossus: 20 × 2 (``ThermalLancesMU`` at the end of each of two sweeps) with a line splash: every
  hostile ground unit whose edge is within 0.15 of a 2.5-long beam centred on the target, perpendicular to
  the line of fire, takes the hits (the sweeps search radius 0.15 around 11 points from -1.25 to +1.25;
  the beam's orientation is ours).  The colossus ignores the pathing grid (it walks over cliffs) but
  stays on the map, and touches no ground unit but another colossus (``COLLIDE``: its collision classes,
  X and R, share none with theirs).
* Spine crawler: immobile structure (speed 0, never pushed).
"""

from __future__ import annotations

import numpy as np

from marl.envs.smac.types import UNIT_NAMES

# attribute bits
LIGHT, ARMORED, BIO, MECH, MASSIVE, STRUCTURE = 1, 2, 4, 8, 16, 32

# columns of the property table PROPS[row, column] (rows: see _build_props)
(
    HP,
    SHIELD,
    ARMOR,
    ATTR,
    DMG,
    BONUS_ATTR,
    BONUS_DMG,
    HITS,
    COOLDOWN,
    RANGE,
    SPEED,
    RADIUS,
    AIR,
    HITS_AIR,
    HITS_GROUND,
    ACQUIRE,
    HEALER,
    ZERG_REGEN,
    SPLASH,
    CLIFF_WALK,
    WIND_UP,
    RANGE_SLOP,
    MSL_SPEED,
    MSL_ACCEL,
    MSL_MAX_SPEED,
    BURST_GAP,
    EFFECT_DELAY,
    COLLIDE,
) = range(28)
N_PROPS = 28

# columns of the per-env state array S[env, unit, column] (all float64; ids/kinds stored as floats);
# S_HT: the unit a Medivac healed in the previous loop (-1: no heal running), for the 5-energy start rule;
# S_WU / S_WT: loops left in the wind-up of the attack in progress (0: none) and its target;
# S_ML / S_MT: loops left before this unit's missile in flight lands (0: none) and its target; for a weapon
#   whose hits come in a burst (BURST_GAP > 0, no missile), loops left before the burst's second hit lands;
#   for a weapon whose effect lands later (EFFECT_DELAY > 0, the colossus's sweeps), loops left until it lands
# S_RC: a weapon that came ready in a step's last loop, kept for the next step: its cooldown as of that step's
#   first loop (negative: the loops since it came ready), 0 otherwise (kernel._regen)
# S_CFH: loops until this enemy may call for help again (targeting._call_for_help)
S_X, S_Y, S_HP, S_SH, S_EN, S_CD, S_SINCE, S_OK, S_TGT, S_OX, S_OY, S_LA, S_HT = range(13)
S_WU, S_WT, S_ML, S_MT, S_RC, S_CFH = range(13, 19)
N_STATE = 19

# order kinds (column S_OK; what each does: kernel)
IDLE, MOVE, ATTACK, HEAL, AMOVE = 0, 1, 2, 3, 4

# COLLIDE bits: the game's collision classes (UnitData ``Collide``); two ground units touch only when their
# classes meet. X (Liberty UnitData, SC2 4.6.2) and R (each SMAC map's RL copies): every ground unit on SMAC's
# maps collides as Ground (and ForceField, which no SMAC unit uses), the spine crawler as Ground and
# Structure (and Burrow, RoachBurrow), the colossus only as Colossus, Structure and Flying: it stands over
# the other ground units, which walk beneath it, and touches only colossi.
C_GROUND, C_COLOSSUS, C_STRUCTURE, C_FLYING = 1, 2, 4, 8

# SPLASH kinds
SPLASH_NONE, SPLASH_LINE, SPLASH_EXPLODE = 0, 1, 2

# constants of the rules (per game loop unless said otherwise)
CD_JITTER_LO, CD_JITTER_HI = -1, 2  # loops added to a weapon's cooldown each time it fires
LOOPS_PER_STEP = 8
SHIELD_REGEN_DELAY = 160.0  # loops without damage before shields regenerate
SHIELD_REGEN = 2.0 / 16.0
ZERG_HP_REGEN = 0.2734 / 16.0
MEDIVAC_HEAL = 9.0 / 16.0
HP_PER_ENERGY = 3.0
HEAL_START_ENERGY = 5.0  # a heal needs this much energy to start (Liquipedia "Heal"), not to go on
ENERGY_MAX = 200.0
ENERGY_START = 50.0
ENERGY_REGEN = 0.5625 / 16.0
MEDIVAC_AUTOCAST_RANGE = 6.0  # Liberty AbilData MedivacHeal AutoCastRange
BANE_SPLASH_RADIUS = 2.2
# Two ground units touch (and are pushed apart) when closer than CONTACT x the sum of their radii. D: the
# game's 3m episodes place marines 0.6885 apart (0.918 x 2 x 0.375), never push apart two standing marines
# 0.69-0.75 apart (584 pair-steps), and push closer ones back to 0.688
# (benchmarks/fidelity/recorded_movement.py). Measured on marines only; the same factor for every other pair
# is our assumption (no source).
CONTACT = 0.918
# A unit firing (or standing to fire) at a target in range is not pushed by a walking unit, an idle unit
# gives way to it, and a walker held by a unit it may not push slides round it, SLIDE x the overlap along the
# contact each loop (contact._push). D: the game's firing allies moved in 2 % of the steps a walking ally
# had them 0-0.8 ahead, stopped ones in all; SLIDE is fitted to the walker's loss there (3.8 loops of its
# 8-loop step, stuck in 21 %); the engine gives 3.6 loops and 17 % (benchmarks/fidelity/recorded_movement.py).
SLIDE = 0.5
# Call for help (X: Core EffectData, every weapon's damage effect ``DU_WEAP`` has the search flag
# CallForHelp; Core GameData CallForHelpRadius 4, CallForHelpPeriod 2 game-s): an enemy that takes damage
# calls the enemies within this radius to attack its attacker, at most once a period (targeting).
CALL_FOR_HELP_RADIUS = 4.0
CALL_FOR_HELP_LOOPS = 32.0
BEAM_HALF_LENGTH = 1.25
BEAM_HALF_WIDTH = 0.15

_ROWS: dict[str, dict] = {
    "marine": dict(
        hp=45,
        attr=LIGHT | BIO,
        dmg=6,
        cd=0.8608 * 16,
        wind=1,
        rng=5,
        speed=2.25,
        radius=0.375,
        hits_air=1,
        acquire=5,
    ),
    "marauder": dict(
        hp=125,
        armor=1,
        attr=ARMORED | BIO,
        dmg=10,
        battr=ARMORED,
        bdmg=10,
        cd=1.5 * 16,
        msl=(0.0, 3200.0, 20.0),
        rng=6,
        speed=2.25,
        radius=0.5625,
        acquire=6,
    ),
    "medivac": dict(
        hp=150,
        armor=1,
        attr=ARMORED | MECH,
        rng=4,
        speed=2.75,
        radius=0.75,
        air=1,
        collide=C_FLYING,
        hits_ground=0,
        healer=1,
        acquire=MEDIVAC_AUTOCAST_RANGE,
    ),
    "stalker": dict(
        hp=80,
        shield=80,
        armor=1,
        attr=ARMORED | MECH,
        dmg=10,
        battr=ARMORED,
        bdmg=4,
        cd=1.44 * 16,
        wind=3,
        msl=(0.0, 3200.0, 18.75),
        rng=6,
        speed=2.953125,
        radius=0.625,
        hits_air=1,
        acquire=6,
    ),
    "zealot": dict(
        hp=100,
        shield=50,
        armor=1,
        attr=LIGHT | BIO,
        dmg=8,
        hits=2,
        burst=4,
        cd=1.2 * 16,
        rng=0.1,
        speed=2.25,
        radius=0.5,
        acquire=5,
    ),
    "colossus": dict(
        hp=200,
        shield=150,
        armor=1,
        attr=ARMORED | MECH | MASSIVE,
        dmg=20,
        hits=2,
        cd=2.2 * 16,
        wind=1,
        slop=0.0,
        rng=6,
        speed=2.25,
        radius=1.0,
        splash=SPLASH_LINE,
        delay=6,
        cliff=1,
        collide=C_COLOSSUS | C_STRUCTURE | C_FLYING,
        acquire=6,
    ),
    "hydralisk": dict(
        hp=80,
        attr=LIGHT | BIO,
        dmg=12,
        cd=0.83 * 16,
        wind=3,
        msl=(40.0, 0.0, 40.0),
        rng=5,
        speed=2.25,
        radius=0.625,
        hits_air=1,
        zerg=1,
        acquire=5,
    ),
    "zergling": dict(
        hp=35,
        attr=LIGHT | BIO,
        dmg=5,
        cd=0.696 * 16,
        wind=3,
        rng=0.1,
        speed=2.953125,
        radius=0.375,
        zerg=1,
        acquire=5,
    ),
    "baneling": dict(
        hp=30,
        attr=BIO,
        dmg=20,
        battr=LIGHT,
        bdmg=15,
        cd=1,
        rng=0.25,
        speed=2.5,
        radius=0.375,
        zerg=1,
        splash=SPLASH_EXPLODE,
        acquire=5,
    ),
    "spine_crawler": dict(
        hp=300,
        armor=2,
        attr=ARMORED | BIO | STRUCTURE,
        dmg=25,
        battr=ARMORED,
        bdmg=5,
        cd=1.6 * 16,
        wind=5,
        slop=0.0,
        msl=(12.0, 140.0, 200.0),
        rng=7,
        speed=0.0,
        radius=0.875,
        zerg=1,
        collide=C_GROUND | C_STRUCTURE,
        acquire=7,
    ),
}


N_TYPES = len(UNIT_NAMES)


def _fill(props: np.ndarray, t: int, r: dict[str, float]) -> None:
    props[t, HP] = r["hp"]
    props[t, SHIELD] = r.get("shield", 0)
    props[t, ARMOR] = r.get("armor", 0)
    props[t, ATTR] = r["attr"]
    props[t, DMG] = r.get("dmg", 0)
    props[t, BONUS_ATTR] = r.get("battr", 0)
    props[t, BONUS_DMG] = r.get("bdmg", 0)
    props[t, HITS] = r.get("hits", 1)
    props[t, COOLDOWN] = r.get("cd", 0)
    props[t, RANGE] = r["rng"]
    props[t, SPEED] = r["speed"] / 16.0  # stored per game loop
    props[t, RADIUS] = r["radius"]
    props[t, AIR] = r.get("air", 0)
    props[t, HITS_AIR] = r.get("hits_air", 0)
    props[t, HITS_GROUND] = r.get("hits_ground", 1)
    props[t, ACQUIRE] = r["acquire"]
    props[t, HEALER] = r.get("healer", 0)
    props[t, ZERG_REGEN] = r.get("zerg", 0)
    props[t, SPLASH] = r.get("splash", SPLASH_NONE)
    props[t, CLIFF_WALK] = r.get("cliff", 0)
    props[t, WIND_UP] = r.get("wind", 0)  # loops: round(DamagePoint x 16)
    props[t, RANGE_SLOP] = r.get("slop", 1.0)  # Core's CWeapon default 1
    v0, accel, vmax = r.get("msl", (0.0, 0.0, 0.0))  # game-s units; all 0: not a missile weapon
    props[t, MSL_SPEED] = v0 / 16.0  # per loop
    props[t, MSL_ACCEL] = accel / 256.0  # per loop squared
    props[t, MSL_MAX_SPEED] = vmax / 16.0
    props[t, BURST_GAP] = r.get("burst", 0)  # loops: round(second period of the burst x 16); 0: hits at once
    if props[t, BURST_GAP] > 0 and (props[t, HITS] != 2 or vmax > 0 or r.get("splash", SPLASH_NONE)):
        raise ValueError("a burst (burst > 0) is modelled for two single-target hits without a missile")
    props[t, COLLIDE] = r.get("collide", C_GROUND)
    props[t, EFFECT_DELAY] = r.get("delay", 0)  # loops: round(the sweeps' ExpireDelay x 16); 0: at once
    if props[t, EFFECT_DELAY] > 0 and (vmax > 0 or props[t, BURST_GAP] > 0):
        raise ValueError("a delayed effect (delay > 0) is modelled for weapons without a missile or a burst")


def _build_props() -> np.ndarray:
    """Rows ``0..N_TYPES-1``: SMAC's RL copies (allies); rows ``N_TYPES..``: the stock units (enemies)."""
    props = np.zeros((2 * N_TYPES, N_PROPS))
    for t, name in enumerate(UNIT_NAMES):
        _fill(props, t, _ROWS[name])  # the RL copies' fields equal the stock unit's (unit_data.yaml)
        _fill(props, N_TYPES + t, _ROWS[name])
    props.setflags(write=False)
    return props


PROPS = _build_props()
TYPE_INDEX = {name: i for i, name in enumerate(UNIT_NAMES)}


def type_ids(names: tuple[str, ...], enemy: bool = False) -> np.ndarray:
    """PROPS row of every unit name (the RL copy for allies, the stock unit with ``enemy=True``); unknown
    names fail with the list of known ones."""
    bad = [n for n in names if n not in TYPE_INDEX]
    if bad:
        raise ValueError(f"unknown unit type(s) {bad}; the embedded engine knows {list(UNIT_NAMES)}")
    return np.array([TYPE_INDEX[n] + (N_TYPES if enemy else 0) for n in names], dtype=np.int64)
