"""Where edgelab keeps things: database URL and per-user state directories."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DB = "sqlite:///edgelab.db"


def db_url(explicit: str | None = None) -> str:
    """``--db`` wins, then ``EDGELAB_DB``, then ``./edgelab.db``. A bare path means SQLite."""
    url = explicit or os.environ.get("EDGELAB_DB") or DEFAULT_DB
    if "://" not in url:
        url = f"sqlite:///{url}"
    return url


def state_dir() -> Path:
    """Per-user state (the virtual lab, edgelab's own known_hosts): ``EDGELAB_HOME`` or ``~/.edgelab``."""
    base = os.environ.get("EDGELAB_HOME")
    path = Path(base) if base else Path.home() / ".edgelab"
    return path


def known_hosts_path() -> Path:
    """edgelab's own known_hosts, written only by ``edgelab device trust``."""
    return state_dir() / "known_hosts"
