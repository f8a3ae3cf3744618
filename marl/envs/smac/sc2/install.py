"""Is the real StarCraft II usable here? Finding the game, its SMAC maps and pysc2 (imports none of them).

The backend choice (``backend="auto"``) and the error for ``backend="sc2"`` without the game are made here,
by looking at files only: nothing in this module imports protobuf or pysc2.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from dataclasses import dataclass
from pathlib import Path

SC2_VERSION = "4.10"
SMAC_MAP_DIR = "SMAC_Maps"
INSTALL_HINT = (
    f"To play the real game, install StarCraft II {SC2_VERSION} (Linux) and the SMAC maps with "
    "`bash scripts/install_sc2.sh` (it installs into $SC2PATH, default ~/StarCraftII; export SC2PATH when "
    "the game lives elsewhere) and pysc2 with "
    "`pip install --no-deps pysc2==4.0.0 && pip install -e '.[sc2]'`. Without the game, use the embedded "
    "engine instead: backend='sim' (command line: --backend sim)."
)

# SMACv2's scenarios (maps 10gen_<race>) all load this map file (smacv2 maps/smac_maps.py), which SMAC's map
# pack lacks; SMACv2's README ("Getting started") has users put SMACv2's SMAC_Maps folder in place.
GEN_MAP = "32x32_flat"
GEN_MAP_HINT = (
    f"SMACv2 scenarios load the map {GEN_MAP}.SC2Map, which SMAC's map pack does not have: copy SMACv2's "
    f"SMAC_Maps folder (see SMACv2's README, 'Getting started') into $SC2PATH/Maps/{SMAC_MAP_DIR}."
)


class Sc2Unavailable(RuntimeError):
    """The real StarCraft II backend cannot run here; the message says why and what to do."""


def default_sc2_path() -> Path:
    """``$SC2PATH`` when set, else pysc2's per-platform default install location."""
    env = os.environ.get("SC2PATH")
    if env:
        return Path(env).expanduser()
    system = platform.system()
    if system == "Windows":
        return Path("C:/Program Files (x86)/StarCraft II")
    if system == "Darwin":
        return Path("/Applications/StarCraft II")
    return Path("~/StarCraftII").expanduser()


@dataclass(frozen=True)
class Sc2Install:
    """What was found: ``ok`` is True when the game, the map and pysc2 are all there; ``problems`` lists
    what is missing, ``versions`` the ``Versions/Base*`` builds found."""

    sc2path: Path
    map_path: Path
    versions: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def explain(self) -> str:
        """One sentence saying what is missing (or what was found)."""
        if self.ok:
            builds = ", ".join(self.versions)
            return f"StarCraft II at {self.sc2path} ({builds}) with {SMAC_MAP_DIR}/{self.map_path.name}"
        return "; ".join(self.problems)


def find_sc2(map_name: str, sc2path: str | Path | None = None) -> Sc2Install:
    """Look for the game binary, ``Maps/SMAC_Maps/<map_name>.SC2Map`` and the pysc2 packages."""
    root = Path(sc2path).expanduser() if sc2path else default_sc2_path()
    map_path = root / "Maps" / SMAC_MAP_DIR / f"{map_name}.SC2Map"
    problems: list[str] = []
    versions: tuple[str, ...] = ()
    if not root.is_dir():
        where = "from SC2PATH" if os.environ.get("SC2PATH") else "the default location; SC2PATH is not set"
        problems.append(f"StarCraft II is not installed at {root} ({where})")
    else:
        vdir = root / "Versions"
        versions = tuple(sorted(p.name for p in vdir.glob("Base*") if p.is_dir())) if vdir.is_dir() else ()
        if not versions:
            problems.append(f"no game build under {vdir} (expected Versions/Base*/)")
        elif platform.system() == "Linux" and not any((vdir / v / "SC2_x64").exists() for v in versions):
            problems.append(f"no SC2_x64 binary in {vdir}/Base*/")
        if not map_path.is_file():
            problems.append(f"the SMAC map {map_path} is missing")
    for pkg in ("pysc2", "s2clientprotocol"):
        if importlib.util.find_spec(pkg) is None:
            problems.append(f"the Python package {pkg} is not installed")
    return Sc2Install(root, map_path, versions, tuple(problems))


def resolve_backend(backend: str, map_name: str) -> tuple[str, str]:
    """Map ``backend`` ("sim" | "auto" | "sc2") to the engine to use and a one-line reason.

    "auto" picks "sc2" when the game, the map and pysc2 are all found, else "sim". "sc2" without them
    raises :class:`Sc2Unavailable` with the install instructions.
    """
    if backend == "sim":
        return "sim", f"SMAC backend for {map_name}: embedded engine (backend='sim')"
    if backend not in ("auto", "sc2"):
        raise ValueError(f"unknown SMAC backend {backend!r}; allowed: sim, auto, sc2")
    found = find_sc2(map_name)
    if found.ok:
        return "sc2", f"SMAC backend for {map_name}: the real game, {found.explain()}"
    if backend == "sc2":
        raise Sc2Unavailable(f"backend='sc2' needs StarCraft II, but {found.explain()}. {INSTALL_HINT}")
    return "sim", (
        f"SMAC backend for {map_name}: embedded engine, because {found.explain()}; "
        "run scripts/install_sc2.sh for the real game"
    )


def resolve_gen_backend(backend: str) -> tuple[str, str]:
    """:func:`resolve_backend` for SMACv2 scenarios, whose map file is ``32x32_flat``; the error for
    backend="sc2" without it also says where SMACv2's map comes from."""
    try:
        return resolve_backend(backend, GEN_MAP)
    except Sc2Unavailable as err:
        raise Sc2Unavailable(f"{err} {GEN_MAP_HINT}") from err
