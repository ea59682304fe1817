"""SHA-256 of local files, computed once: the hash is cached by (path, size, mtime_ns).

Weights of many GiB would otherwise be re-read on every `artifact add` and every push.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from edgelab.errors import ConfigError

if TYPE_CHECKING:
    from sqlmodel import Session

CHUNK = 4 << 20


def sha256_path(path: Path, *, prefix: int | None = None) -> str:
    """SHA-256 of a file, or of its first ``prefix`` bytes."""
    h = hashlib.sha256()
    left = prefix
    with open(path, "rb") as f:
        while True:
            n = CHUNK if left is None else min(CHUNK, left)
            if n == 0:
                break
            block = f.read(n)
            if not block:
                break
            h.update(block)
            if left is not None:
                left -= len(block)
    return h.hexdigest()


def cached_sha256(session: Session, path: Path) -> tuple[str, int, bool]:
    """(sha256, size, from_cache) of ``path``; hashes only when size or mtime_ns changed."""
    from edgelab.store.artifacts import HashCacheEntry  # the ORM only where the cache is used
    from edgelab.store.models import utcnow

    path = Path(path).resolve()
    try:
        st = os.stat(path)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", remedy="check the path") from e
    if not path.is_file():
        raise ConfigError(
            f"{path} is not a regular file", remedy="give files (a directory: its files one by one)"
        )
    key = str(path)
    row = session.get(HashCacheEntry, key)
    if row is not None and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
        return row.sha256, st.st_size, True
    digest = sha256_path(path)
    if row is None:
        row = HashCacheEntry(path=key, size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=digest)
    else:
        row.size, row.mtime_ns, row.sha256, row.hashed_at = st.st_size, st.st_mtime_ns, digest, utcnow()
    session.add(row)
    session.flush()
    return digest, st.st_size, False
