"""The unchanged re-push without the ORM: "already there, verified" in one device round trip.

An operator re-runs ``edgelab push NAME --device D`` all day; when nothing changed, the answer needs
five small reads of the database (artifact, its files, the local hash cache, the device row, the
device's verified blobs) and one ``stat`` on the device. SQLAlchemy, SQLModel and the table
classes cost several times that, so this path reads SQLite with the standard library
(``edgelab.store.quickread``) and only answers when every blob is certainly present:

* each local file's size and mtime_ns match its hash-cache row, whose SHA-256 is the registered one;
* the device's blob has the size and change-time stamp recorded right after its last verification
  (any write moves the stamp: the same trust rule as ``push_blob``'s "present");
* no device is under an open lease (who may push then is ``edgelab.lease``'s to decide).

Anything else (``--verify``, ``--lease``, a missing row, another schema revision, a changed file, a
blob not recorded or changed, any error) answers ``None`` and the caller takes the full path, which
pushes, verifies and records. Nothing is written here, neither in the database nor on the device.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from edgelab.artifacts.push import BlobResult, DeviceResult
from edgelab.errors import EdgelabError
from edgelab.store.quickread import ANY_LEASE_HELD, read_table


def _endpoint(row):
    from edgelab.transport.base import Endpoint
    from edgelab.transport.quoting import Shell

    return Endpoint(
        name=row.name, kind=row.transport, ssh_user=row.ssh_user, ssh_host=row.ssh_host,
        ssh_port=row.ssh_port, ssh_jump=row.ssh_jump, adb_serial=row.adb_serial,
        adb_server=row.adb_server, host_key_fingerprint=row.host_key_fingerprint, shell=Shell(row.shell),
    )


def _blobs(refs: Sequence[str], url: str | None) -> list[tuple[str, int]] | None:
    """(sha256, size) of every distinct file of the artifacts, each unchanged since it was hashed."""
    arts = read_table("artifact", url=url)
    files = read_table("artifact_file", url=url, order_by="path")
    cache = read_table("hash_cache", url=url, order_by="path")
    if arts is None or files is None or cache is None:
        return None
    by_name = {a.name: a for a in arts[1]}
    hashed = {h.path: h for h in cache[1]}
    out: dict[str, int] = {}
    for ref in refs:
        art = by_name.get(ref)
        if art is None:
            return None  # a digest prefix, or unknown: the ORM path resolves (and explains) it
        for f in (f for f in files[1] if f.artifact_id == art.id):
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
            out.setdefault(f.sha256, st.st_size)
    return list(out.items())


def quick_repush(refs: Sequence[str], devices: Sequence[str], *, url: str | None = None) -> list[DeviceResult] | None:
    """Per-device results, all blobs ``present``, when nothing needs sending; else ``None``.

    ``url``: the database (``--db``), else ``EDGELAB_DB`` or the default, as ``edgelab.config.db_url``.
    """
    if not refs or not devices:
        return None
    blobs = _blobs(refs, url)
    rows = read_table("device", url=url, unless=ANY_LEASE_HELD)
    entries = read_table("device_store_entry", url=url, order_by="id")
    if blobs is None or rows is None or entries is None:
        return None
    by_name = {d.name: d for d in rows[1]}
    if any(name not in by_name for name in devices):
        return None
    results = []
    for name in devices:
        start = time.monotonic()
        dev = by_name[name]
        recorded = {e.sha256: (e.size, e.stamp) for e in entries[1] if e.device_id == dev.id}
        if any(recorded.get(sha, (None, None))[0] != size for sha, size in blobs):
            return None
        try:
            from edgelab.artifacts.devstore import open_store
            from edgelab.transport import open_transport

            t = open_transport(_endpoint(dev))
            try:
                store = open_store(t)
                out = DeviceResult(name)
                for sha, size in blobs:
                    have, _part = store.inspect(sha)
                    if have is None or have != recorded[sha]:
                        return None
                    out.blobs.append(BlobResult(sha, size, "present", store.blob(sha),
                                                seconds=time.monotonic() - start))
            finally:
                t.close()
        except EdgelabError:
            return None  # the full path reports it properly
        results.append(out)
    return results
