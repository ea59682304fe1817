"""Push fast paths: the device hashes ``.part`` while it arrives (follower), the openssl/sha256sum
choice, SFTP WRITE requests that fit one channel packet, AES-GCM negotiated with a real sshd.

The follower tests run on the lab host itself (LocalTransport: real sh, dd, stat, openssl)."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from edgelab.artifacts import devstore
from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.errors import HashMismatch
from edgelab.transport.local import LocalTransport
from edgelab.transport.ssh import SSHTransport
from edgelab.transport.ssh.paramiko.sftp import WRITE_HEADER, write_request_size


@pytest.fixture
def local_store(tmp_path):
    return open_store(LocalTransport(), root=str(tmp_path / "store"))


def _write_slowly(path: Path, data: bytes, pieces: int) -> None:
    step = -(-len(data) // pieces)
    with open(path, "wb") as f:
        for i in range(0, len(data), step):
            f.write(data[i : i + step])
            f.flush()
            time.sleep(0.05)


def test_follower_hashes_while_written_and_renames(local_store, monkeypatch):
    monkeypatch.setattr(devstore, "FOLLOW_STEP", 1 << 20)  # several steps for a small file
    data = os.urandom((3 << 20) + 12345)  # not a whole number of MiB
    sha = hashlib.sha256(data).hexdigest()
    local_store.ensure()
    proc = local_store.follow(sha, len(data))
    writer = threading.Thread(target=_write_slowly, args=(Path(local_store.part(sha)), data, 7))
    writer.start()
    writer.join()
    after = local_store.finish_follow(proc, sha, len(data))
    assert after and after[0] == len(data)
    assert sha256_path(Path(local_store.blob(sha))) == sha
    assert not Path(local_store.part(sha)).exists()


def test_follower_mismatch_leaves_part_for_the_caller(local_store):
    data = os.urandom(1 << 20)
    wrong = hashlib.sha256(b"something else").hexdigest()
    local_store.ensure()
    proc = local_store.follow(wrong, len(data))
    Path(local_store.part(wrong)).write_bytes(data)
    assert local_store.finish_follow(proc, wrong, len(data)) is False
    assert Path(local_store.part(wrong)).exists() and not Path(local_store.blob(wrong)).exists()
    with pytest.raises(HashMismatch):  # the full re-hash removes it and says so
        local_store.finalize(wrong, len(data))
    assert not Path(local_store.part(wrong)).exists()


def test_push_blob_through_follower_on_local_store(local_store, tmp_path):
    p = tmp_path / "b.bin"
    p.write_bytes(os.urandom(2 << 20))
    blob = BlobSpec(p, sha256_path(p), p.stat().st_size)
    Path(local_store.root).mkdir(parents=True)
    Path(local_store.part(blob.sha256)).write_bytes(b"stale bytes that match nothing")
    res = push_blob(local_store, blob)
    assert res.status == "uploaded" and res.sent == blob.size
    assert sha256_path(Path(res.remote_path)) == blob.sha256


@pytest.mark.parametrize("with_openssl", [True, False])
def test_device_hash_with_or_without_openssl(local_store, tmp_path, monkeypatch, with_openssl):
    tools = ["sh", "head", "sha256sum", "stat", "mkdir", "mv", "rm", "dd", "sleep"]
    if with_openssl:
        if not shutil.which("openssl"):
            pytest.skip("no openssl on this host")
        tools.append("openssl")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(300_000))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert local_store.sha256(str(f), 300_000) == sha256_path(f)
    assert (
        local_store.sha256(str(f), 300_000, prefix=1000) == hashlib.sha256(f.read_bytes()[:1000]).hexdigest()
    )


def test_gcm_negotiated_and_sftp_writes_fit_one_packet(ssh_endpoint, tmp_path):
    t = SSHTransport.connect(ssh_endpoint, timeout=30)
    try:
        assert t.paramiko_transport.local_cipher == "aes128-gcm@openssh.com"
        sftp = t.sftp()
        with sftp.open(str(tmp_path / "x"), "wb", bufsize=0) as f:
            size = write_request_size(sftp, f)
            per_packet = sftp.get_channel().out_max_packet_size - 64
            assert 4096 <= size and size + WRITE_HEADER + len(f.handle) <= per_packet
    finally:
        t.close()


def test_two_followers_of_one_blob_both_confirm(local_store):
    """A follower left over from a cut attempt that renames first does not stall the retry's."""
    data = os.urandom(3 << 20)
    sha = hashlib.sha256(data).hexdigest()
    local_store.ensure()
    first, second = local_store.follow(sha, len(data)), local_store.follow(sha, len(data))
    _write_slowly(Path(local_store.part(sha)), data, 3)
    a = local_store.finish_follow(first, sha, len(data))
    b = local_store.finish_follow(second, sha, len(data))
    assert a and b and a[0] == b[0] == len(data)
    assert sha256_path(Path(local_store.blob(sha))) == sha
