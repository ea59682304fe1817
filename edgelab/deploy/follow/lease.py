"""The follower's lease: which one follower ingests a run, kept in ``run.meta["follower"]``.

The lease holds the follower's token (``owner``), its pid, host and start time (so another process
can prove it gone), its heartbeat, the byte offset of the device's log it has stored and the
device clock's offset. The Ingestor writes it in the same transaction as the samples it covers,
so a follower that dies loses nothing and duplicates nothing.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy import owner
from edgelab.identity import identity
from edgelab.metrics.ingest import Ingestor
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run

log = logging.getLogger(__name__)

LEASE_S = 10.0  # a follower silent this long has lost its run to the next one


def owner_id() -> str:
    """A new follower's lease token (``host:pid:nonce``, :func:`edgelab.identity.identity`)."""
    return identity().token()


def lease_of(engine: Engine, run_id: str) -> dict[str, Any]:
    """The run's follower lease as stored (empty when none ever followed it)."""
    with session_scope(engine, write=False) as s:
        return dict(get_run(s, run_id).meta.get("follower") or {})


def follower_alive(engine: Engine, run_id: str, lease_s: float = LEASE_S) -> bool:
    f = lease_of(engine, run_id)
    return bool(f.get("owner")) and not f.get("done") and time.time() - float(f.get("heartbeat", 0)) < lease_s


def acquire(engine: Engine, run_id: str, token: str, lease_s: float = LEASE_S) -> str | None:
    """Take the run's lease for ``token`` unless a live follower holds it (serialised by the write
    transaction): free, expired, or held by a follower proven gone (its pid, host and start time).
    Returns the run's full id (None: not taken)."""
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        f = dict(run.meta.get("follower") or {})
        if f.get("done"):
            return None
        if (
            f.get("owner") not in (None, token)
            and time.time() - float(f.get("heartbeat", 0)) < lease_s
            and not owner.gone(f.get("pid"), f.get("host"), f.get("start"))
        ):
            return None
        me = owner.me()
        f.update(
            owner=token,
            heartbeat=time.time(),
            offset=int(f.get("offset", 0)),
            pid=me["owner_pid"],
            host=me["owner_host"],
            start=me["owner_start"],
        )
        f.pop("spawned", None)
        run.meta = {**run.meta, "follower": f}
        s.add(run)
        return run.id


def held_by(engine: Engine, run_id: str, token: str) -> bool:
    return lease_of(engine, run_id).get("owner") == token


def meta_and_lease(engine: Engine, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's meta without the lease, and the lease (what a new follower starts from)."""
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        meta = {k: v for k, v in run.meta.items() if k != "follower"}
        return meta, dict(run.meta.get("follower") or {})


def leased(engine: Engine, run_id: str, lease: dict[str, Any], base_meta: dict[str, Any]) -> Ingestor:
    """An Ingestor whose every flush also writes the lease (heartbeat + byte offset) in the same transaction."""
    return Ingestor(engine, run_id, flush_s=0.2, lease=lease, base_meta=base_meta)


def record_failure(engine: Engine, run_id: str, why: str) -> None:
    """A follower that gives up says why in the run: an infra error line and ``meta.follower.error``.

    A detached follower's own log is a file on the lab host; this is where its end is visible to
    everyone; the lease then expires and the next ``watch`` (or the TUI) takes the run over.
    """
    from edgelab.store.runs import RunLog

    try:
        with session_scope(engine) as s:
            run = get_run(s, run_id)
            f = dict(run.meta.get("follower") or {})
            f.update(error=why[:500], failed_at=time.time())
            run.meta = {**run.meta, "follower": f}
            s.add(run)
            s.add(
                RunLog(
                    run_id=run.id,
                    t=time.time(),
                    kind="error",
                    level="infra",
                    message=f"follower stopped: {why}"[:2000],
                )
            )
    except Exception:  # noqa: BLE001 - the database itself may be what failed
        log.debug("run %s: could not record the follower's failure (%s)", run_id, why, exc_info=True)
