"""Push over SSH to the virtual Jetson (real sshd): resume after a killed connection, corruption
detected and replaced, unchanged re-push skipped, hash checked against the bytes on disk."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.transport.ssh import SSHTransport


class MemStamps:
    def __init__(self):
        self.d = {}

    def get(self, sha):
        return self.d.get(sha)

    def put(self, sha, size, stamp):
        self.d[sha] = (size, stamp)

    def drop(self, sha):
        self.d.pop(sha, None)


def _blob(tmp_path: Path, size: int, name: str = "blob.bin") -> BlobSpec:
    p = tmp_path / name
    p.write_bytes(os.urandom(size))
    return BlobSpec(p, sha256_path(p), size)


@pytest.fixture
def store(ssh_endpoint, tmp_path):
    t = SSHTransport.connect(ssh_endpoint, timeout=30)
    try:
        # the virtual device writes the lab host's disk: keep its store in this test's tmp dir
        yield open_store(t, root=str(tmp_path / "device-store"))
    finally:
        t.close()


def test_default_root_is_home_edgelab_store(ssh_transport):
    s = open_store(ssh_transport)
    assert s.root.endswith("/.edgelab/store") and s.root.startswith("/")
    assert s.blob("ab" * 32) == s.root + "/" + "ab" * 32


def test_push_then_unchanged_repush_is_skipped(store, tmp_path):
    blob = _blob(tmp_path, 3 << 20)
    stamps = MemStamps()
    first = push_blob(store, blob, stamps=stamps)
    assert first.status == "uploaded" and first.sent == blob.size
    on_disk = Path(first.remote_path)
    assert sha256_path(on_disk) == blob.sha256
    assert not Path(first.remote_path + ".part").exists()
    again = push_blob(store, blob, stamps=stamps)
    assert again.status == "present" and again.sent == 0
    checked = push_blob(store, blob, stamps=stamps, verify=True)
    assert checked.status == "verified" and checked.sent == 0
    fresh = push_blob(store, blob, stamps=MemStamps())  # no record: hashed on the device, not re-sent
    assert fresh.status == "verified" and fresh.sent == 0


def test_connection_killed_mid_push_resumes(store, tmp_path, monkeypatch):
    """Over SFTP (the OpenSSH path's own cut is in test_push_openssh.py)."""
    monkeypatch.setenv("EDGELAB_SSH_BULK", "off")
    blob = _blob(tmp_path, 8 << 20)
    killed = []

    def progress(sha, done, total):
        if not killed and done >= total // 2:
            killed.append(done)
            store.t.paramiko_transport.close()  # the TCP connection goes away mid-upload

    res = push_blob(store, blob, progress=progress)
    assert killed, "the upload never reached the kill point"
    assert res.status == "resumed" and res.attempts == 2
    assert 0 < res.resumed_from <= killed[0]
    assert res.sent < blob.size + killed[0]  # the prefix on the device was not sent again
    assert any("cut" in n for n in res.notes)
    assert res.via == "sftp (paramiko; EDGELAB_SSH_BULK=off)"
    assert sha256_path(Path(res.remote_path)) == blob.sha256
    assert store.sha256(res.remote_path, blob.size) == blob.sha256


def test_corrupted_store_file_detected_and_replaced(store, tmp_path):
    blob = _blob(tmp_path, 1 << 20)
    stamps = MemStamps()
    first = push_blob(store, blob, stamps=stamps)
    # overwrite 4 bytes in place on the device (same size)
    r = store.t.run(
        [
            "sh",
            "-c",
            'printf XXXX | dd of="$1" bs=1 seek=1000 conv=notrunc 2>/dev/null',
            "x",
            first.remote_path,
        ]
    )
    assert r.ok
    assert sha256_path(Path(first.remote_path)) != blob.sha256
    res = push_blob(store, blob, stamps=stamps)
    assert res.status == "replaced" and res.sent == blob.size
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_truncated_store_file_replaced_even_with_a_record(store, tmp_path):
    blob = _blob(tmp_path, 256 << 10)
    stamps = MemStamps()
    first = push_blob(store, blob, stamps=stamps)
    os.truncate(first.remote_path, 1000)
    res = push_blob(store, blob, stamps=stamps)
    assert res.status == "replaced"
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_foreign_partial_upload_is_discarded(store, tmp_path):
    blob = _blob(tmp_path, 512 << 10)
    store.inspect(blob.sha256)  # creates the store dir
    Path(store.part(blob.sha256)).write_bytes(b"not the right prefix" * 100)
    res = push_blob(store, blob)
    assert res.resumed_from == 0 and any("did not match" in n for n in res.notes)
    assert hashlib.sha256(Path(res.remote_path).read_bytes()).hexdigest() == blob.sha256


def test_store_listing(store, tmp_path):
    a, b = _blob(tmp_path, 1000, "a"), _blob(tmp_path, 2000, "b")
    push_blob(store, a)
    push_blob(store, b)
    entries = {e.name: e.size for e in store.list()}
    assert entries == {a.sha256: 1000, b.sha256: 2000}
