"""A workload's own lease with the standard library, for the one case where nothing can conflict.

``edgelab push`` to a free device should cost what its bytes cost, not the ORM's start-up. When no
device in the database is under an open lease, ``take`` writes exactly the rows ``begin_use``
writes for a workload's own (``auto``) lease: one ``lease`` row (users 1, the auto TTL) and one
``lease_device`` per physical key with ``held_key`` set, in one ``BEGIN IMMEDIATE`` transaction
that checks again that no lease is open. The unique ``held_key`` constraint still makes a racing
taker fail, whoever it is. ``QuickLease`` renews it every third of its TTL (as ``Heartbeat``) and
gives it back as ``end_use`` does: one user less; a lease nobody uses and no running deployment
keeps ends as ``released``, its devices and its dead benches' reservations freed.

Anything else (another backend or revision, an open lease anywhere, a database error) answers
``None``: the caller takes ``edgelab.lease.held``, which knows joining, refusals and their reasons.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from edgelab.lease.owner import whoami
from edgelab.lease.rules import auto_ttl, new_id, physical_key
from edgelab.store import quickwrite
from edgelab.store.quickread import ANY_LEASE_HELD

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


class QuickLease:
    """An open auto lease written by ``take``: renewed from a daemon thread until ``end``."""

    def __init__(self, conn: sqlite3.Connection, lease_id: str, ttl_s: float, purpose: str):
        self.conn, self.id, self.ttl_s, self.purpose = conn, lease_id, ttl_s, purpose
        self._lock = threading.Lock()  # one connection, two threads
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-heartbeat-{lease_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(max(self.ttl_s / 3.0, 0.05)):
            now = _now()
            try:
                with self._lock:
                    cur = self.conn.execute(
                        "UPDATE lease SET heartbeat_at = ?, expires_at = ? WHERE id = ? AND released_at IS NULL",
                        (quickwrite.ts(now), quickwrite.ts(now + timedelta(seconds=self.ttl_s)), self.id),
                    )
                if cur.rowcount == 0:
                    log.info("lease %s ended while in use", self.id)
                    return
            except sqlite3.Error as e:  # a database hiccup: retry next period, the TTL covers it
                log.info("lease %s: renewal failed (%s); retrying", self.id, e)

    def stop_renewing(self) -> None:
        """Stop the heartbeat (before the caller writes on the same connection; ``end`` does it too)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def end(self) -> None:
        """One user less; the lease ends when nobody uses it and no running deployment keeps it."""
        self.stop_renewing()
        now = quickwrite.ts(_now())
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(
                    "UPDATE lease SET users = MAX(users - 1, 0) WHERE id = ? AND released_at IS NULL",
                    (self.id,),
                )
                idle = self.conn.execute(
                    "SELECT 1 FROM lease WHERE id = ? AND released_at IS NULL AND auto AND users = 0 AND NOT EXISTS "
                    "(SELECT 1 FROM deployment WHERE deployment.lease_id = lease.id AND deployment.state = 'running')",
                    (self.id,),
                ).fetchone()
                if idle:
                    self.conn.execute(
                        "UPDATE lease SET released_at = ?, end_reason = 'released', ended_by = ? "
                        "WHERE id = ?",
                        (now, f"end of {self.purpose}"[:255], self.id),
                    )
                    self.conn.execute(
                        "UPDATE lease_device SET held_key = NULL WHERE lease_id = ?", (self.id,)
                    )
                    self.conn.execute(
                        "UPDATE reservation SET released_at = ? WHERE lease_id = ? AND "
                        "deployment_id IS NULL AND released_at IS NULL",
                        (now, self.id),
                    )
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise


def take(conn: sqlite3.Connection, devices: Sequence, purpose: str) -> QuickLease | None:
    """An auto lease on ``devices`` (quickread device rows) when no lease at all is open; else ``None``."""
    holder = whoami()
    ttl = auto_ttl()
    now = _now()
    lease_id = new_id()
    purpose = purpose[:255]
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return None
    try:
        if conn.execute(ANY_LEASE_HELD).fetchone() is not None:
            conn.execute("ROLLBACK")
            return None
        conn.execute(
            "INSERT INTO lease (id, owner, ci_job, purpose, auto, users, ttl_s, acquired_at, heartbeat_at, "
            "expires_at, released_at, end_reason, ended_by) VALUES (?, ?, ?, ?, 1, 1, ?, ?, ?, ?, NULL, NULL, NULL)",
            (
                lease_id,
                holder.owner,
                holder.ci_job,
                purpose,
                ttl,
                quickwrite.ts(now),
                quickwrite.ts(now),
                quickwrite.ts(now + timedelta(seconds=ttl)),
            ),
        )
        seen: set[str] = set()
        for d in devices:
            key = physical_key(d)
            if key in seen:
                continue
            seen.add(key)
            conn.execute(
                "INSERT INTO lease_device (lease_id, device_id, device_name, physical_key, held_key) "
                "VALUES (?, ?, ?, ?, ?)",
                (lease_id, d.id, d.name, key, key),
            )
        conn.execute("COMMIT")
    except sqlite3.Error as e:
        conn.execute("ROLLBACK")
        log.info("quick lease not taken (%s): the ORM path decides", e)
        return None
    return QuickLease(conn, lease_id, ttl, purpose)
