"""The build cache: one folder per (source hash, target, flags), outside any checkout.

A native build of llama.cpp costs ~13 CPU-minutes; it is made once per key and reused by the
CLI, the tests and the benches alike. Layout under the cache root (``$EDGELAB_CACHE`` or
``~/.cache/edgelab``)::

    downloads/            fetched source archives (e.g. the llama-cpp-python sdist)
    sources/<sha16>/      an unpacked archive or a git checkout
    builds/<key>/         build/ (cmake tree), out/ (products), build.log, build.json
    ccache/               the compiler cache (unless CCACHE_DIR is set)

``build.json`` is written last, so a folder without it is an interrupted build and is redone.
A file lock per key lets two processes (pytest-xdist workers) ask for the same build: one
builds, the other waits and reuses it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MANIFEST = "build.json"


def cache_root() -> Path:
    """``$EDGELAB_CACHE``, else ``$XDG_CACHE_HOME/edgelab``, else ``~/.cache/edgelab``."""
    explicit = os.environ.get("EDGELAB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "edgelab"


def build_key(
    runtime: str,
    source_sha256: str,
    target: str,
    flags: Sequence[str],
    patches: Sequence[str] = (),
    inputs: Sequence[str] = (),
    project: dict[str, Any] | None = None,
) -> str:
    """A short stable name for one build: runtime, source hash, target, flags (order kept: cmake's
    last -D wins, so order is part of what was built), the SHA-256 of each patch applied and of
    each other input file (a cross toolchain file, ``name:sha256``), and for a recipe that builds a
    project of this repository with the source, that project's tree hash and the recipe's steps and
    products (what the project builds is named there)."""
    parts: list = [runtime, source_sha256, target, list(flags)]
    if patches or inputs:  # an unpatched build keeps the key it always had
        parts.append(list(patches))
    if inputs:
        parts.append(list(inputs))
    if project:
        parts.append(dict(project))
    blob = json.dumps(parts, separators=(",", ":"))
    return f"{runtime}-{target}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def build_dir(key: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / "builds" / key


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The finished build's record, or None when the folder holds no complete build (or the
    products it lists have gone)."""
    f = folder / MANIFEST
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    products = data.get("products") or {}
    if not products or not all((folder / rel).is_file() for rel in products.values()):
        return None
    return data


def write_manifest(folder: Path, data: dict[str, Any]) -> None:
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, folder / MANIFEST)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created), held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ccache_env(root: Path | None = None, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a build that uses ccache: the cache's own ccache folder unless the caller
    set CCACHE_DIR, and paths hashed relative to the cache root so the same source built under
    another key (other flags) or another cache root with the same layout hits."""
    env = dict(os.environ if environ is None else environ)
    root = root or cache_root()
    env.setdefault("CCACHE_DIR", str(root / "ccache"))
    env.setdefault("CCACHE_BASEDIR", str(root))
    env.setdefault("CCACHE_NOHASHDIR", "true")
    return env


__all__ = [
    "MANIFEST",
    "build_dir",
    "build_key",
    "cache_root",
    "ccache_env",
    "locked",
    "read_manifest",
    "write_manifest",
]
