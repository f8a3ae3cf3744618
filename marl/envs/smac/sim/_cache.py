"""Guard against stale Numba caches.

Numba's ``cache=True`` re-validates a cached function against its *own* source file only; a function
that inlines or calls code from another module keeps its old machine code after that module changes (the
fused env step in ``marl/envs/smac/fused.py`` compiles the engine's ``sim/`` code into itself, the SMACv2
and feature kernels theirs). On import we hash each ``.py`` file of ``marl/envs/smac`` and compare the
hashes with the ones recorded beside the cache; for each module whose own source changed, and each module
that imports one of those, directly or through other modules of the tree, we delete its Numba cache files,
so those kernels recompile once and the others load as before. The imports are read with :mod:`ast`
(absolute and relative, ``import a.b`` and ``from a import b`` where ``b`` is a module or a name); a
module that imports by computed name (``importlib.import_module``, ``__import__``) or does not parse counts
as importing every module of the tree. (With ``NUMBA_CACHE_DIR`` set the caches live elsewhere and this
guard does nothing.)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Collection
from pathlib import Path

STAMP = "smac_sources.json"  # in ``<root>/__pycache__``: {"modules": {relative path: sha256 of its source}}
_OLD_STAMP = "smac_sources.sha256"  # the one hash of the whole tree an earlier guard wrote
_DYNAMIC = ("import_module", "__import__")


def _package_of(root: Path) -> str:
    """The dotted name of the package ``root`` is ("" when it has no ``__init__.py``)."""
    parts: list[str] = []
    d = root
    while (d / "__init__.py").exists():
        parts.append(d.name)
        d = d.parent
    return ".".join(reversed(parts))


def _module_name(package: str, rel: Path) -> str:
    parts = [*rel.with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in (package, *parts) if p)


def _imports(source: str, name: str, is_package: bool, every: set[str]) -> set[str]:
    """The modules of ``every`` (dotted names) that the module ``name`` imports anywhere in its source."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(every)
    found: set[str] = set()
    here = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".") if here else []
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                found.add(sub if sub in every else base)  # a submodule, or a name defined in ``base``
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _DYNAMIC:
                return set(every)
    return found & every


def module_imports(root: Path, sources: dict[str, bytes], gone: Collection[str] = ()) -> dict[str, set[str]]:
    """For each file of ``sources`` (path relative to ``root`` -> its bytes), the files it imports directly
    (relative paths): files of ``sources``, or of ``gone`` (files deleted since the caches were written)."""
    package = _package_of(root)
    names = {_module_name(package, Path(rel)): rel for rel in (*sources, *gone)}
    every = set(names)
    return {
        rel: {
            names[m]
            for m in _imports(
                sources[rel].decode("utf-8", "replace"),
                _module_name(package, Path(rel)),
                Path(rel).name == "__init__.py",
                every,
            )
        }
        for rel in sources
    }


def stale_modules(imports: dict[str, set[str]], changed: set[str]) -> set[str]:
    """The files whose compiled code may be stale: those in ``changed`` and every file that imports one of
    them through any chain of ``imports``."""
    stale = set(changed)
    grew = True
    while grew:
        grew = False
        for rel, deps in imports.items():
            if rel not in stale and deps & stale:
                stale.add(rel)
                grew = True
    return stale


def _cache_files(root: Path) -> list[Path]:
    return [f for pattern in ("*.nbi", "*.nbc") for f in root.rglob(f"__pycache__/{pattern}")]


def _owner(cache_file: Path, root: Path) -> str:
    """The source file (relative to ``root``) a Numba cache file belongs to: Numba names it
    ``[<prefix>-]<module stem>.<function>-<line>.py<version>...`` in the ``__pycache__`` beside the source."""
    stem = cache_file.name.split(".", 1)[0].rsplit("-", 1)[-1]
    return (cache_file.parent.parent / f"{stem}.py").relative_to(root).as_posix()


def refresh_numba_cache(root: Path | None = None) -> None:
    """Drop the Numba cache files under ``root`` (default ``marl/envs/smac``: every module whose compiled
    code may inline ``sim/``'s) of each module whose source, or the source of a module of the tree it imports
    (directly or not), changed since they were written; all of them when no record of the sources exists."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    root = Path(__file__).resolve().parents[1] if root is None else root
    sources = {src.relative_to(root).as_posix(): src.read_bytes() for src in sorted(root.rglob("*.py"))}
    hashes = {rel: hashlib.sha256(data).hexdigest() for rel, data in sources.items()}
    cache_dir = root / "__pycache__"
    stamp = cache_dir / STAMP
    try:
        try:
            before = json.loads(stamp.read_text())["modules"]
        except (OSError, ValueError, KeyError, TypeError):
            before = None
        if before == hashes:
            return
        if isinstance(before, dict):
            changed = {rel for rel in hashes if before.get(rel) != hashes[rel]}
            gone = set(before) - set(hashes)  # a deleted module: its cache files go with it
            stale = stale_modules(module_imports(root, sources, gone), changed | gone)
            drop = [
                f for f in _cache_files(root) if _owner(f, root) in stale or _owner(f, root) not in hashes
            ]
        else:
            drop = _cache_files(root)  # caches of sources nobody recorded
        for f in drop:
            f.unlink(missing_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        # written whole or not at all: another process (a second test worker) may read it at this moment
        part = stamp.with_name(f"{stamp.name}.{os.getpid()}")
        part.write_text(json.dumps({"modules": hashes}, indent=0, sort_keys=True))
        os.replace(part, stamp)
        (cache_dir / _OLD_STAMP).unlink(missing_ok=True)
    except OSError:  # read-only install: Numba then compiles in memory, which is still correct
        pass
