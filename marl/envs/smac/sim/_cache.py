"""Guard against stale Numba caches.

Numba's ``cache=True`` re-validates a cached function against its *own* source file only; a function
that inlines or calls code from another module keeps its old machine code after that module changes.
On import we hash every ``sim/*.py`` and, when the hash differs from the one recorded beside the cache,
delete this package's cache files so everything recompiles once.  (With ``NUMBA_CACHE_DIR`` set the
caches live elsewhere and this guard does nothing.)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def refresh_numba_cache() -> None:
    """Drop this package's Numba cache files if any ``sim/*.py`` changed since they were written."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for src in sorted(here.glob("*.py")):
        digest.update(src.name.encode() + src.read_bytes())
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    cache_dir = here / "__pycache__"
    stamp = cache_dir / "sim_sources.sha256"
    try:
        if stamp.exists() and stamp.read_text() == digest.hexdigest():
            return
        for f in list(cache_dir.glob("*.nbi")) + list(cache_dir.glob("*.nbc")):
            f.unlink(missing_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        stamp.write_text(digest.hexdigest())
    except OSError:  # read-only install: Numba then compiles in memory, which is still correct
        pass
