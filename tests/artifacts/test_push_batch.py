"""Many small files in one stream (``artifacts.batch``, ``DeviceStore.receive_many``), over the SSH
session to the virtual Jetson's real sshd and over ADB to a virtual phone behind the real adb
server: one command lands them all, each only once its SHA-256 on the device is its name; what the
stream does not confirm is left to ``push_blob``."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path

import pytest
from fixtures.adb_lab import adb_endpoint

from edgelab.artifacts import batch
from edgelab.artifacts.devstore import ANDROID_ROOT, open_store
from edgelab.artifacts.push import BlobSpec, push_to_device
from edgelab.transport import start_push_session
from edgelab.transport.adb import ADBTransport
from edgelab.transport.ssh.session_transport import SessionTransport


def _blob(tmp_path: Path, size: int, name: str) -> BlobSpec:
    p = tmp_path / name
    p.write_bytes(os.urandom(size))
    return BlobSpec(p, hashlib.sha256(p.read_bytes()).hexdigest(), size)


@pytest.fixture(
    params=[pytest.param("ssh-session", marks=pytest.mark.ssh), pytest.param("adb", marks=pytest.mark.adb)]
)
def store(request, tmp_path):
    if request.param == "ssh-session":
        if not shutil.which("ssh"):
            pytest.skip("no OpenSSH client on this host")
        t = start_push_session(request.getfixturevalue("ssh_endpoint"), timeout=30)
        assert isinstance(t, SessionTransport)
        root = str(tmp_path / "device-store")
    else:
        t = ADBTransport.connect(adb_endpoint(request.getfixturevalue("adb_lab"), "s24"))
        root = f"/data/local/tmp/edgelab-batch-{uuid.uuid4().hex[:8]}"
    s = open_store(t, root=root)
    try:
        yield s
    finally:
        t.run(["rm", "-rf", root])
        t.close()


def _on_device(store, sha: str) -> str | None:
    res = store.t.run(["sh", "-c", 'if [ -f "$1" ]; then sha256sum "$1"; fi', "x", store.blob(sha)])
    return res.stdout.split()[0] if res.stdout.strip() else None


def _listing(store) -> list[str]:
    return sorted(store.t.run(["ls", "-a", store.root]).stdout.split())


def test_small_files_land_in_one_stream_each_checked_by_its_own_digest(store, tmp_path):
    blobs = [_blob(tmp_path, n, f"f{i}") for i, n in enumerate([0, 1, 511, 512, 513, 100_000, 3 << 20])]
    store.prefetch([b.sha256 for b in blobs])
    seen = []
    got = batch.push_small(store, blobs, progress=lambda sha, d, t: seen.append((sha, d, t)))
    assert set(got) == {b.sha256 for b in blobs}
    for b in blobs:
        assert got[b.sha256].stat[0] == b.size and "one stream of 7 files" in got[b.sha256].via
        assert _on_device(store, b.sha256) == b.sha256
    assert sorted(s for s, _d, _t in seen) == sorted(b.sha256 for b in blobs)
    assert _listing(store) == sorted([".", "..", *(b.sha256 for b in blobs)])  # no stream dir left
    if isinstance(store.t, SessionTransport):
        assert store.t.logins == 1 and store.t.fell_back is None


def test_a_file_whose_bytes_are_not_its_name_never_lands(store, tmp_path):
    good = [_blob(tmp_path, 2000 + i, f"g{i}") for i in range(2)]
    bad = _blob(tmp_path, 3000, "bad")
    liar = BlobSpec(bad.path, hashlib.sha256(b"something else").hexdigest(), bad.size)
    store.prefetch([b.sha256 for b in [*good, liar]])
    got = batch.push_small(store, [*good, liar])
    assert set(got) == {b.sha256 for b in good}  # the liar is left to push_blob, which refuses it
    assert _on_device(store, liar.sha256) is None
    assert all(_on_device(store, b.sha256) == b.sha256 for b in good)
    assert _listing(store) == sorted([".", "..", *(b.sha256 for b in good)])


def test_what_the_device_has_a_trace_of_goes_alone(store, tmp_path):
    blobs = [_blob(tmp_path, 1000 + i, f"t{i}") for i in range(3)]
    store.ensure()
    assert store.t.run(["sh", "-c", 'printf x > "$1"', "x", store.part(blobs[0].sha256)]).ok
    store.prefetch([b.sha256 for b in blobs])
    assert [g for g in batch._picks(store, blobs)] == [blobs[1:]]  # the .part is push_blob's to resume
    got = batch.push_small(store, blobs)
    assert set(got) == {b.sha256 for b in blobs[1:]}
    store.prefetch([blobs[0].sha256])
    assert batch._picks(store, blobs[:1]) == []  # one file alone is never a stream


def test_a_stream_the_device_cannot_read_lands_nothing(store, tmp_path, monkeypatch):
    blobs = [_blob(tmp_path, 1000 + i, f"n{i}") for i in range(3)]

    def garbage(group, into):
        p = into / "stream.tar"
        p.write_bytes(b"not a tar archive " * 100)
        return p

    monkeypatch.setattr(batch, "_stream", garbage)
    store.prefetch([b.sha256 for b in blobs])
    assert batch.push_small(store, blobs) == {}
    assert _listing(store) == [".", ".."]


def test_a_whole_push_sends_small_files_in_one_stream_and_large_ones_alone(adb_lab, tmp_path):
    """``push_to_device`` on the phone's default store: a runtime-like artifact of small files and
    one large weight file."""
    t = ADBTransport.connect(adb_endpoint(adb_lab, "s24"))
    small = [_blob(tmp_path, 5000 + i, f"lib{i}.so") for i in range(4)]
    large = _blob(tmp_path, batch.FILE_MAX + 1, "weights.bin")
    try:
        res = push_to_device(lambda: t, "s24", [*small, large])
        assert res.ok, res.error
        assert [b.status for b in res.blobs] == ["uploaded"] * 5
        assert all("one stream of 4 files" in (b.via or "") for b in res.blobs[:4])
        assert "stream" not in (res.blobs[4].via or "")
        t2 = ADBTransport.connect(adb_endpoint(adb_lab, "s24"))
        try:
            for b in [*small, large]:
                out = t2.run(["sha256sum", f"{ANDROID_ROOT}/{b.sha256}"]).stdout
                assert out.split()[0] == b.sha256
        finally:
            t2.run(["rm", "-f", *(f"{ANDROID_ROOT}/{b.sha256}" for b in [*small, large])])
            t2.close()
    finally:
        t.close()


def test_what_a_killed_stream_left_is_removed_by_the_next(store, tmp_path):
    store.ensure()
    dead = f"{store.root}/.batch.999999"  # no such process
    assert store.t.run(["sh", "-c", 'mkdir -p "$1" && printf x > "$1/f"', "x", dead]).ok
    blobs = [_blob(tmp_path, 100 + i, f"k{i}") for i in range(2)]
    store.prefetch([b.sha256 for b in blobs])
    assert set(batch.push_small(store, blobs)) == {b.sha256 for b in blobs}
    assert _listing(store) == sorted([".", "..", *(b.sha256 for b in blobs)])
