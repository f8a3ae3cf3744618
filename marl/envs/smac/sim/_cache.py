"""Guard against stale Numba caches.

Numba's ``cache=True`` re-validates a cached function against its *own* source file only; a function
that inlines or calls code from another module keeps its old machine code after that module changes (the
fused env step in ``marl/envs/smac/fused.py`` compiles the engine's ``sim/`` code into itself, the SMACv2
and feature kernels theirs). On import we hash every ``.py`` file of ``marl/envs/smac`` and, when the hash
differs from the one recorded beside the cache, delete the Numba cache files of that whole tree so
everything recompiles once. (With ``NUMBA_CACHE_DIR`` set the caches live elsewhere and this guard does
nothing.)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def refresh_numba_cache(root: Path | None = None) -> None:
    """Drop the Numba cache files under ``root`` (default ``marl/envs/smac``: every module whose compiled
    code may inline ``sim/``'s) if any ``.py`` file there changed since they were written."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    root = Path(__file__).resolve().parents[1] if root is None else root
    digest = hashlib.sha256()
    for src in sorted(root.rglob("*.py")):
        digest.update(str(src.relative_to(root)).encode() + src.read_bytes())
    cache_dir = root / "__pycache__"
    stamp = cache_dir / "smac_sources.sha256"
    try:
        if stamp.exists() and stamp.read_text() == digest.hexdigest():
            return
        for pattern in ("*.nbi", "*.nbc"):
            for f in root.rglob(f"__pycache__/{pattern}"):
                f.unlink(missing_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        # written whole or not at all: another process (a second test worker) may read it at this moment
        part = stamp.with_name(f"{stamp.name}.{os.getpid()}")
        part.write_text(digest.hexdigest())
        os.replace(part, stamp)
    except OSError:  # read-only install: Numba then compiles in memory, which is still correct
        pass
