"""A fingerprint of the embedded engine's dynamics: a hash of a fixed set of seeded episodes.

    python -m marl.envs.smac.fingerprint            # print the fingerprint of this checkout's engine
    python -m marl.envs.smac.fingerprint --check    # exit 1 when it differs from the one recorded
    python -m marl.envs.smac.fingerprint --update   # record it for ENGINE_VERSION (after a bump)

Each episode of :data:`EPISODES` is played on the embedded engine (``backend="sim"``, SMAC's default flags)
with random available actions drawn from a seeded generator; everything it produces is hashed (SHA-256):
every observation, state and available-action mask, and every step's reward, ``terminated`` and info,
then the env's statistics. Floats are hashed as the bytes the env returns (float32 observations and state,
the float64 reward); those bytes are what the engine computes, deterministic on one machine, and the same
across machines as long as NumPy and Numba (and so the compiled arithmetic) are the same versions: a
different NumPy, Numba or CPU family may change the last bit of a float and so the hash, without any change
of the dynamics.

The recorded fingerprints live in ``tests/test_engine_version.py`` (``FINGERPRINTS``, one per engine
version); the test fails when the dynamics change without a new :data:`ENGINE_VERSION`. ``--update``
records the fingerprint of a new version (it refuses to change the one of a version already recorded,
and asks for a ``CHANGELOG.md`` section first).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marl.envs.smac.version import ENGINE_VERSION, SMACV2_GENERATOR_VERSION

# (map or SMACv2 scenario, env seed): a small, a mixed, a many-enemy, a splash map and a generated scenario
EPISODES: tuple[tuple[str, int], ...] = (
    ("3m", 0),
    ("3m", 1),
    ("2s3z", 0),
    ("2c_vs_64zg", 0),
    ("bane_vs_bane", 0),
    ("protoss_5_vs_5", 0),
    ("protoss_5_vs_5", 1),
)
ROOT = Path(__file__).resolve().parents[3]  # the checkout that holds the package, when it is one
TEST_FILE = ROOT / "tests" / "test_engine_version.py"
CHANGELOG = ROOT / "CHANGELOG.md"
UPDATE = "python -m marl.envs.smac.fingerprint --update"


def _feed(h: Any, *arrays: Any) -> None:
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())


def episode_hash(map_name: str, seed: int) -> str:
    """SHA-256 (hex) of one seeded random-action episode of ``map_name`` on the embedded engine."""
    from marl.envs.smac import make_sc2_env

    env = make_sc2_env(map_name=map_name, backend="sim", seed=seed)
    rng = np.random.default_rng(seed)
    h = hashlib.sha256(f"{map_name}/{seed}".encode())
    try:
        obs, state = env.reset()
        terminated = False
        while True:
            avail_NA = np.asarray(env.get_avail_actions(), dtype=np.int8)
            _feed(h, np.asarray(obs, dtype=np.float32), np.asarray(state, dtype=np.float32), avail_NA)
            if terminated:
                break
            actions_N = np.array([rng.choice(np.flatnonzero(row)) for row in avail_NA], dtype=np.int64)
            reward, terminated, info = env.step(actions_N)
            h.update(struct.pack("<d?", float(reward), bool(terminated)))
            h.update(json.dumps(info, sort_keys=True, default=str).encode())
            obs, state = env.get_obs(), env.get_state()
        h.update(json.dumps(env.get_stats(), sort_keys=True, default=str).encode())
    finally:
        env.close()
    return h.hexdigest()


def fingerprint(episodes: Sequence[tuple[str, int]] = EPISODES) -> dict[str, str]:
    """``{"<map>/<seed>": hash[:16], ..., "all": hash}``: each episode's hash and one over all of them."""
    out = {f"{m}/{s}": episode_hash(m, s) for m, s in episodes}
    total = hashlib.sha256("".join(f"{k}={v}\n" for k, v in out.items()).encode()).hexdigest()
    return {**{k: v[:16] for k, v in out.items()}, "all": total}


def recorded(path: Path | None = None) -> dict[str, dict[str, str]]:
    """The ``FINGERPRINTS`` dict of the test file (default :data:`TEST_FILE`; ``{}`` when absent)."""
    path = TEST_FILE if path is None else path
    if not path.is_file():
        return {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FINGERPRINTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def differences(want: dict[str, str], got: dict[str, str]) -> list[str]:
    """The episodes (and ``all``) whose hashes differ, or that only one side has."""
    return [k for k in dict.fromkeys([*want, *got]) if want.get(k) != got.get(k)]


def changelog_has(version: str, path: Path | None = None) -> bool:
    """Whether ``CHANGELOG.md`` (default :data:`CHANGELOG`) has a section for engine ``version`` (a heading
    naming the engine and the version)."""
    path = CHANGELOG if path is None else path
    if not path.is_file():
        return False
    pattern = re.compile(rf"^#+ .*\bengine\b.*\b{re.escape(version)}\b", re.IGNORECASE | re.MULTILINE)
    return bool(pattern.search(path.read_text(encoding="utf-8")))


def _write(fingerprints: dict[str, dict[str, str]]) -> None:
    """Replace the ``FINGERPRINTS = {...}`` assignment of :data:`TEST_FILE` with ``fingerprints``."""
    path = TEST_FILE
    text = path.read_text(encoding="utf-8")
    body = "".join(
        f'    "{v}": {{\n' + "".join(f'        "{k}": "{h}",\n' for k, h in fp.items()) + "    },\n"
        for v, fp in fingerprints.items()
    )
    new, n = re.subn(
        r"^FINGERPRINTS = \{.*?^\}\n", f"FINGERPRINTS = {{\n{body}}}\n", text, flags=re.MULTILINE | re.DOTALL
    )
    if n != 1:
        raise SystemExit(f"{path}: no 'FINGERPRINTS = {{...}}' block to update")
    path.write_text(new, encoding="utf-8")


def update(got: dict[str, str]) -> str:
    """Record ``got`` for :data:`ENGINE_VERSION` in the test file; returns what was done. Refuses (a
    ``SystemExit`` saying what to do) to change a version's recorded fingerprint or to record a version
    without a ``CHANGELOG.md`` section."""
    if not TEST_FILE.is_file():
        raise SystemExit(f"--update needs the repository checkout ({TEST_FILE} is not there)")
    prints = recorded()
    have = prints.get(ENGINE_VERSION)
    if have == got:
        return f"the fingerprint of engine {ENGINE_VERSION} is already recorded; nothing to do"
    if have is not None:
        raise SystemExit(
            f"the dynamics differ from engine {ENGINE_VERSION}'s recorded fingerprint (episodes "
            f"{', '.join(differences(have, got))}): bump ENGINE_VERSION in marl/envs/smac/version.py, add a "
            f"CHANGELOG.md section for the new version, then run {UPDATE} again"
        )
    if not changelog_has(ENGINE_VERSION):
        raise SystemExit(
            f"CHANGELOG.md has no section for engine {ENGINE_VERSION}: add one ('## Engine {ENGINE_VERSION}' "
            f"with what changed, its source and its effect on docs/fidelity.md's tables), then run {UPDATE}"
        )
    _write({**prints, ENGINE_VERSION: got})
    return f"recorded the fingerprint of engine {ENGINE_VERSION} in {TEST_FILE.name}"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit code."""
    p = argparse.ArgumentParser(
        prog="python -m marl.envs.smac.fingerprint", description=__doc__.split("\n")[0]
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when it differs from the recorded one")
    mode.add_argument("--update", action="store_true", help="record it for ENGINE_VERSION (after a bump)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    got = fingerprint()
    seconds = time.perf_counter() - t0
    print(f"engine {ENGINE_VERSION} (smacv2 generator {SMACV2_GENERATOR_VERSION}), {len(EPISODES)} episodes")
    for key, value in got.items():
        print(f"  {key:<18} {value}")
    print(f"  ({seconds:.1f} s, numpy {np.__version__})")
    if args.update:
        print(update(got))
    elif args.check:
        want = recorded().get(ENGINE_VERSION)
        if want != got:
            why = "none is recorded" if want is None else f"differs in {', '.join(differences(want, got))}"
            print(f"the fingerprint of engine {ENGINE_VERSION} {why}; see {UPDATE}", file=sys.stderr)
            return 1
        print("matches the recorded fingerprint")
    return 0


if __name__ == "__main__":
    sys.exit(main())
