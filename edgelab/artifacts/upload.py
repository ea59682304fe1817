"""Resumable upload of one local file into a device store's ``<sha>.part``, from a byte offset.

The bytes go through the transport's resumable ``put`` (``offset`` given): SFTP writes at their
offsets over SSH, shell stdin appended in place over ADB, a file copy locally. Each keeps what
arrived when the connection is cut, so the next attempt continues from the verified prefix
(``push._resume_offset``), and each makes ``.part`` grow while the bytes arrive.

The device hashes ``.part`` while it grows (``DeviceStore.follow``), so the transfer and the hash
overlap, and the file under its final name is still only ever one whose WHOLE SHA-256 was checked:
the follower reads ``.part`` itself (not the stream we sent) in order, each range
``[off, off + step)`` once the file holds it, all ranges into ONE SHA-256 covering ``[0, size)``, and
renames ``.part`` into place only when that digest is the blob's name. Writes only ever add bytes
after the ones already hashed (the ADB append refuses a ``.part`` that is not exactly ``offset``
bytes long), so the bytes hashed are the bytes renamed. Anything else (a mismatch, a stall, a cut)
leaves ``.part`` for ``finalize``, which hashes the whole file again before a rename.

Where the transport can stream a file into a command (``Capability.FEED``: ADB shell v2), the
upload, the follower and the rename are one command instead (``DeviceStore.receive``), and this
module is not used.
"""

from __future__ import annotations

from pathlib import Path

from edgelab.artifacts.devstore import DeviceStore
from edgelab.transport.base import Progress


def upload(store: DeviceStore, local: Path, sha: str, offset: int, progress: Progress | None = None) -> None:
    """Send bytes ``[offset, size)`` of ``local`` onto the end of ``store.part(sha)`` (``offset`` bytes long).

    ``progress`` gets (bytes of ``.part`` on the device, file size).
    """
    store.t.put(local, store.transfer_path(store.part(sha)), offset=offset, progress=progress)
