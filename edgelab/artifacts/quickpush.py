"""``edgelab push`` without the ORM: the unchanged re-push, and a fresh push to free devices.

An operator re-runs ``edgelab push NAME --device D`` all day; when nothing changed, the answer needs
five small reads of the database (artifact, its files, the local hash cache, the device row, the
device's verified blobs) and one ``stat`` on the device. SQLAlchemy, SQLModel and the table
classes cost several times that, so ``quick_repush`` reads SQLite with the standard library
(``edgelab.store.quickread``) and only answers when every blob is certainly present:

* each local file's size and mtime_ns match its hash-cache row, whose SHA-256 is the registered one;
* the device's blob has the size and change-time stamp recorded right after its last verification
  (any write moves the stamp: the same trust rule as ``push_blob``'s "present");
* no device is under an open lease (who may push then is ``edgelab.lease``'s to decide).

``quick_push`` does the whole push on the same conditions (no device leased at all), writing only
what ``push_artifacts`` writes: its own lease (``edgelab.lease.quick``) and the verifications
(``edgelab.store.quickwrite``); the bytes, the resume and the device-side check are ``push_parallel``'s
as on the ORM path. Anything else (``--verify``, ``--lease``, a missing row, another schema
revision, a changed file, an open lease, any error before the lease) answers ``None`` and the
caller takes the full path, which pushes, verifies and records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from edgelab.artifacts.push import BlobResult, BlobSpec, DeviceResult, push_parallel
from edgelab.errors import EdgelabError
from edgelab.lease.quick import take
from edgelab.store.quickread import ANY_LEASE_HELD, read_tables
from edgelab.store.quickwrite import connect, put_store_entries


def _endpoint(row):
    from edgelab.transport.base import Endpoint

    return Endpoint.of_device(row)


def _blobs(refs: Sequence[str], arts, files, cache) -> list[BlobSpec] | None:
    """Every distinct file of the artifacts, each unchanged since it was hashed."""
    by_name = {a.name: a for a in arts}
    hashed = {h.path: h for h in cache}
    out: dict[str, BlobSpec] = {}
    for ref in refs:
        art = by_name.get(ref)
        if art is None:
            return None  # a digest prefix, or unknown: the ORM path resolves (and explains) it
        for f in (f for f in files if f.artifact_id == art.id):
            if not f.source:
                return None
            path = Path(f.source).resolve()
            try:
                st = path.stat()
            except OSError:
                return None
            h = hashed.get(str(path))
            if h is None or h.size != st.st_size or h.mtime_ns != st.st_mtime_ns or h.sha256 != f.sha256:
                return None
            out.setdefault(f.sha256, BlobSpec(path, f.sha256, st.st_size))
    return list(out.values())


# what a push reads, each table in the order its rows are used
_TABLES = {
    "artifact": "name",
    "artifact_file": "path",
    "hash_cache": "path",
    "device": "name",
    "device_store_entry": "id",
}


def _read_lab(refs: Sequence[str], devices: Sequence[str], url: str | None):
    """(blobs, devices by name, store entries) read without the ORM, in one read of the database;
    ``None`` when nothing is to do, any device is under an open lease, or a name is unknown (the
    ORM path says so properly)."""
    if not refs or not devices:
        return None
    read = read_tables(_TABLES, url=url, unless=ANY_LEASE_HELD)
    if read is None:
        return None
    blobs = _blobs(refs, read["artifact"][1], read["artifact_file"][1], read["hash_cache"][1])
    if blobs is None:
        return None
    by_name = {d.name: d for d in read["device"][1]}
    if any(name not in by_name for name in devices):
        return None
    return blobs, by_name, read["device_store_entry"][1]


def _recorded(entries, device_id: int) -> dict[str, tuple[int, str | None]]:
    """The device's recorded verifications: sha256 -> (size, stamp)."""
    return {e.sha256: (e.size, e.stamp) for e in entries if e.device_id == device_id}


def quick_repush(
    refs: Sequence[str], devices: Sequence[str], *, url: str | None = None, keep: dict | None = None
) -> list[DeviceResult] | None:
    """Per-device results, all blobs ``present``, when nothing needs sending; else ``None``.

    ``url``: the database (``--db``), else ``EDGELAB_DB`` or the default, as ``edgelab.config.db_url``.
    ``keep``: where the transport of a device that needs a push is left open, by device name,
    for ``quick_push(sessions=keep)`` (an SSH session already logged in serves the push too).
    """
    seen = _read_lab(refs, devices, url)
    if seen is None:
        return None
    blobs, by_name, entries = seen
    results = []
    for name in devices:
        start = time.monotonic()
        dev = by_name[name]
        recorded = _recorded(entries, dev.id)
        if any(recorded.get(b.sha256, (None, None))[0] != b.size for b in blobs):
            return None
        try:
            from edgelab.artifacts.devstore import open_store, stat_blobs
            from edgelab.transport import open_push_transport

            t = open_push_transport(_endpoint(dev))
            kept = False
            try:
                shas = [b.sha256 for b in blobs]
                seen = stat_blobs(t, shas)  # the store and every blob's stamp in one round trip
                if seen is None:
                    store = open_store(t)
                    seen = store, [store.inspect(sha)[0] for sha in shas]
                store, stats = seen
                out = DeviceResult(name)
                for b, have in zip(blobs, stats, strict=True):
                    if have is None or have != recorded[b.sha256]:
                        t.prepare_put()  # the full push follows: its upload's set-up starts now
                        if keep is not None:
                            keep[name], kept = t, True
                        return None
                    out.blobs.append(
                        BlobResult(
                            b.sha256,
                            b.size,
                            "present",
                            store.blob(b.sha256),
                            seconds=time.monotonic() - start,
                        )
                    )
            finally:
                if not kept:
                    t.close()
        except EdgelabError:
            return None  # the full path reports it properly
        results.append(out)
    return results


class _QuickStamps:
    """One device's recorded verifications, read once; new ones kept until ``save`` writes them all."""

    def __init__(self, device_id: int, recorded: dict[str, tuple[int, str | None]]):
        self.device_id, self.recorded = device_id, recorded
        self.puts: dict[str, tuple[int, str | None]] = {}
        self.drops: set[str] = set()

    def get(self, sha: str) -> tuple[int, str | None] | None:
        return self.puts.get(sha) or (None if sha in self.drops else self.recorded.get(sha))

    def put(self, sha: str, size: int, stamp: str | None) -> None:
        self.drops.discard(sha)
        self.puts[sha] = (size, stamp)

    def drop(self, sha: str) -> None:
        self.puts.pop(sha, None)
        self.drops.add(sha)

    def save(self, conn) -> None:
        put_store_entries(
            conn, self.device_id, [(sha, *v) for sha, v in self.puts.items()], sorted(self.drops)
        )


def quick_push(
    refs: Sequence[str],
    devices: Sequence[str],
    *,
    url: str | None = None,
    progress: Callable[[str, str, int, int], None] | None = None,
    workers: int = 8,
    sessions: dict | None = None,
) -> list[DeviceResult] | None:
    """``push_artifacts`` without the ORM, when no device is under any open lease; else ``None``.

    The same work in the same order: the artifacts' files (each unchanged since it was hashed), a
    lease of the push's own on every device (``edgelab.lease.quick``), ``push_parallel`` with the
    device's recorded verifications, the new ones written once the devices are done, the lease
    given back. Anything this path cannot answer for certain goes to the ORM path (``None``),
    before a byte is sent. ``sessions``: transports ``quick_repush`` left open, by device name,
    used (and closed) here instead of opening new ones.
    """
    names = list(dict.fromkeys(devices))
    seen = _read_lab(refs, names, url)
    if seen is None:
        return None
    blobs, by_name, entries = seen
    conn = connect(url)
    if conn is None:
        return None
    opened = _open_all(names, by_name, sessions or {})  # their logins run while the lease is taken
    try:
        lease = take(conn, [by_name[n] for n in names], f"push {', '.join(refs)}"[:200])
        if lease is None:
            return None
        stamps = {}
        for name in names:
            dev = by_name[name]
            stamps[name] = _QuickStamps(dev.id, _recorded(entries, dev.id))
        try:
            jobs = [(n, _handed(opened[n], _endpoint(by_name[n])), stamps[n]) for n in names]
            results = push_parallel(jobs, blobs, progress=progress, workers=workers)
        finally:
            lease.stop_renewing()  # one connection: no heartbeat inside the transactions below
            try:
                for st in stamps.values():
                    st.save(conn)
            finally:
                lease.end()
        return results
    finally:
        for t in opened.values():
            if t is not None and not isinstance(t, EdgelabError):
                t.close()  # a second close of what push_parallel closed is a no-op
        conn.close()


def _open_all(names: Sequence[str], by_name, ready: dict) -> dict:
    """Each device's push session whose login starts now, before the lease (``start_push_session``:
    no command reaches a device before the lease is held, but the login is under way meanwhile);
    None for a device no session can carry, or the error its start raised."""
    from edgelab.transport import start_push_session

    out: dict = {}
    for n in names:
        if n in ready:
            out[n] = ready.pop(n)
            continue
        try:
            out[n] = start_push_session(_endpoint(by_name[n]))
        except EdgelabError as e:
            out[n] = e
    return out


def _handed(opened, endpoint):
    """``push_parallel``'s factory: the session started already, else the usual transport opened in
    the device's own thread; an error raised there is that device's result."""

    def factory():
        if isinstance(opened, EdgelabError):
            raise opened
        if opened is not None:
            return opened
        from edgelab.transport import open_transport

        return open_transport(endpoint)

    return factory
