"""Versions of the embedded SMAC engine's dynamics, and the engine record every result carries.

``ENGINE_VERSION`` names the dynamics of the embedded engine and of the SMAC layer over it (units, rules,
timing, spawns, rewards, observations, state, available actions): any change that can change an episode
bumps it, with a ``CHANGELOG.md`` entry, and ``tests/test_engine_version.py`` holds a fingerprint of a fixed
set of seeded episodes (:mod:`marl.envs.smac.fingerprint`) to it, so a change without a bump fails.
``SMACV2_GENERATOR_VERSION`` names SMACv2's scenario generator (team and start-position draws,
:mod:`marl.envs.smac.smacv2.distributions`), which is separate code with its own changes.

Versions before 1.0.0 were pre-releases. 1.0.0 froze the dynamics of pre-release 0.9.2 unchanged (the
same fingerprint), so runs recorded on 0.9.2 are labelled and pooled as 1.0.0 (``RELEASED_AS``). A result
is cited with its engine, e.g. "SMAC maps on marl engine 1.0.0".

The record (:func:`engine_record`) also names the resolved backend: ``sim`` (the embedded engine) or ``sc2``
with the game's build, since ``backend="auto"`` picks the real game whenever it is installed.
"""

from __future__ import annotations

import re
from typing import Any

from marl.provenance import RELEASED_AS, engine_label  # noqa: F401 (labels of records, re-exported)

ENGINE_VERSION = "1.0.0"
SMACV2_GENERATOR_VERSION = "0.9.0"

# StarCraft II builds (the Versions/Base<build> folder) and their game versions, from pysc2's
# run_configs/lib.py VERSIONS table: 4.6.2 is the SMAC paper's game, 4.10.0 the one SMAC's install uses.
_GAME_BUILDS = {69232: "4.6.2", 75689: "4.10.0"}


def game_version(builds: tuple[str, ...]) -> str:
    """The game version pysc2 launches from the ``Base<build>`` folders found: the newest build (pysc2's
    choice when no version is asked for), named ``4.10.0 (Base75689)`` where the build is known."""
    numbered = [(int(m.group(1)), b) for b in builds if (m := re.fullmatch(r"Base(\d+)", b))]
    if not numbered:
        return "unknown"
    build, name = max(numbered)
    known = _GAME_BUILDS.get(build)
    return f"{known} ({name})" if known else name


def engine_record(backend: str, map_name: str, generator: bool = False) -> dict[str, Any]:
    """What a result must carry about the engine that made it: ``engine_version`` (the SMAC layer's, and
    on ``sim`` the engine's), ``backend`` (``sim`` or ``sc2``), ``game_version`` on ``sc2`` and
    ``generator_version`` for a SMACv2 scenario (``generator``). ``backend`` is the resolved one."""
    record: dict[str, Any] = {"engine_version": ENGINE_VERSION, "backend": backend}
    if backend == "sc2":
        from marl.envs.smac.sc2.install import GEN_MAP, find_sc2

        record["game_version"] = game_version(find_sc2(GEN_MAP if generator else map_name).versions)
    if generator:
        record["generator_version"] = SMACV2_GENERATOR_VERSION
    return record
