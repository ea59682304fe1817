"""Push over ADB to a virtual phone (the real adb server in front of the emulator): resume after the
adb connection is killed mid-push, corrupted store file replaced, bytes checked by pulling them back."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from fixtures.adb_lab import adb_endpoint

from edgelab.artifacts.devstore import ANDROID_ROOT, open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.transport.adb import ADBTransport

PERSONA = "rb3g2"  # not the shared adb_transport's phone: this test cuts its connection


def _blob(tmp_path: Path, size: int, name: str = "blob.bin") -> BlobSpec:
    p = tmp_path / name
    p.write_bytes(os.urandom(size))
    return BlobSpec(p, sha256_path(p), size)


def _pulled_sha(t, remote: str, tmp_path: Path) -> str:
    return t.get(remote, tmp_path / "pulled.bin")


@pytest.fixture
def store(adb_lab):
    t = ADBTransport.connect(adb_endpoint(adb_lab, PERSONA))
    s = open_store(t)
    t.run(["rm", "-rf", s.root])
    try:
        yield s
    finally:
        t.run(["rm", "-rf", s.root])
        t.close()


def test_android_store_root(store):
    assert store.root == ANDROID_ROOT


def test_push_verify_and_skip(store, tmp_path):
    blob = _blob(tmp_path, 300_000)
    first = push_blob(store, blob)
    assert first.status == "uploaded" and first.remote_path == f"{ANDROID_ROOT}/{blob.sha256}"
    assert _pulled_sha(store.t, first.remote_path, tmp_path) == blob.sha256
    again = push_blob(store, blob)  # no record: hashed on the device (toybox sha256sum), not re-sent
    assert again.status == "verified" and again.sent == 0


def _sockets_to(port: int) -> list[int]:
    """This process's fds of TCP connections to 127.0.0.1:``port`` (from /proc, no helper library)."""
    inodes = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[3] == "01":  # ESTABLISHED
                inodes.add(cols[9])
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            fds.append(int(fd))
    return fds


def test_adb_connection_killed_mid_push_resumes(adb_lab, store, tmp_path):
    blob = _blob(tmp_path, 5 << 20)
    server_port = int(adb_lab.adb_server.rpartition(":")[2])
    killed = []

    def progress(sha, done, total):
        if not killed and done >= (5 << 20) // 2:
            # the bytes sent are buffered on the way: cut once the device's .part holds 1 MiB of them
            script = (
                'i=0; while [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -lt 1048576 ]; do '
                "i=$((i + 1)); [ $i -lt 400 ] || exit 9; sleep 0.05; done"
            )
            assert store.t.run(["sh", "-c", script, "x", store.part(sha)], timeout=60).ok
            fds = _sockets_to(server_port)
            assert fds, "no connection to the adb server during the push"
            for fd in fds:  # as if the adb client were killed: the connection is torn down
                with socket.socket(fileno=os.dup(fd)) as dup:
                    dup.shutdown(socket.SHUT_RDWR)
            killed.append(done)

    res = push_blob(store, blob, progress=progress, attempts=5)
    assert killed
    assert res.status == "resumed" and res.attempts >= 2
    assert 1 << 20 <= res.resumed_from <= killed[0]  # what reached .part before the cut stayed there
    assert res.sent < blob.size + killed[0]  # ... and was not sent again
    assert _pulled_sha(store.t, res.remote_path, tmp_path) == blob.sha256
    names = {e.name for e in store.list()}
    assert names == {blob.sha256}  # no .part left behind


def test_corrupted_file_detected_and_replaced(store, tmp_path):
    blob = _blob(tmp_path, 200_000)
    stamps = {}

    class Stamps:
        get = staticmethod(stamps.get)

        @staticmethod
        def put(sha, size, stamp):
            stamps[sha] = (size, stamp)

        @staticmethod
        def drop(sha):
            stamps.pop(sha, None)

    first = push_blob(store, blob, stamps=Stamps())
    assert push_blob(store, blob, stamps=Stamps()).status == "present"
    r = store.t.run(
        ["sh", "-c", 'printf XXXX | dd of="$1" bs=1 seek=77 conv=notrunc 2>/dev/null', "x", first.remote_path]
    )
    assert r.ok
    assert _pulled_sha(store.t, first.remote_path, tmp_path) != blob.sha256
    res = push_blob(store, blob, stamps=Stamps())
    assert res.status == "replaced"
    assert _pulled_sha(store.t, res.remote_path, tmp_path) == blob.sha256


def test_a_stale_full_size_part_beside_the_verified_blob_is_removed(store, tmp_path):
    """An interrupted deploy left ``.part`` at full size beside the blob a later push verified:
    nothing will ever resume it, so the next push that finds the blob verified removes it."""
    blob = _blob(tmp_path, 250_000)
    first = push_blob(store, blob)
    store.t.run(["cp", first.remote_path, store.part(blob.sha256)])  # what the cut deploy left
    assert {e.name for e in store.list()} == {blob.sha256, blob.sha256 + ".part"}
    again = push_blob(store, blob)
    assert again.status == "verified" and again.sent == 0
    assert any("stale .part" in n for n in again.notes), again.notes
    assert {e.name for e in store.list()} == {blob.sha256}
