"""Push over the system OpenSSH client (``transport.ssh.openssh.bulk``) to the virtual Jetson's real sshd:
the bytes go through ``ssh`` and are verified on the device, the only host key ``ssh`` accepts is
the one edgelab's own check accepted, SFTP takes over where ``ssh`` cannot log in, a cut upload
resumes, and a corrupted transfer never lands under the blob's name."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
from pathlib import Path

import paramiko
import pytest

from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.errors import HashMismatch, HostKeyError
from edgelab.transport.ssh import SSHTransport
from edgelab.transport.ssh.hostkeys import HostKey
from edgelab.transport.ssh.openssh import bulk, pinned_client

pytestmark = pytest.mark.skipif(not shutil.which("ssh"), reason="no OpenSSH client on this host")


def _blob(tmp_path: Path, size: int, name: str = "blob.bin") -> BlobSpec:
    p = tmp_path / name
    p.write_bytes(os.urandom(size))
    return BlobSpec(p, sha256_path(p), size)


def _store(t: SSHTransport, tmp_path: Path):
    # the virtual device writes the lab host's disk: its store lives in this test's tmp dir
    return open_store(t, root=str(tmp_path / "device-store"))


@pytest.fixture
def transport(ssh_endpoint):
    t = SSHTransport.connect(ssh_endpoint, timeout=30)
    try:
        yield t
    finally:
        t.close()


def test_push_goes_through_openssh_and_is_verified_on_the_device(transport, tmp_path):
    blob = _blob(tmp_path, (5 << 20) + 4321)
    store = _store(transport, tmp_path)
    assert store.probe_hasher() is not None and store.hasher_name == "openssl"
    seen = []
    res = push_blob(store, blob, progress=lambda sha, done, total: seen.append(done))
    assert res.status == "uploaded" and res.sent == blob.size
    assert res.via == "openssh (aes128-gcm@openssh.com)"  # negotiated from the offered list
    assert res.hasher == "openssl"
    assert sha256_path(Path(res.remote_path)) == blob.sha256
    assert not Path(store.part(blob.sha256)).exists()
    assert seen and seen[-1] == blob.size and seen == sorted(seen)
    again = push_blob(store, blob, verify=True)  # the device hashes the stored blob again
    assert again.status == "verified" and again.sent == 0


def test_default_store_probes_the_hasher_in_its_home_round_trip(transport):
    store = open_store(transport)
    assert store.hasher is not None and store.hasher.name == "openssl"


def test_resumable_put_cuts_what_lies_beyond_the_offset(transport, tmp_path):
    """``Transport.put(offset=N)``'s contract on the OpenSSH path: ``remote`` cut to N, the rest appended."""
    local = tmp_path / "local.bin"
    data = os.urandom(300_000)
    local.write_bytes(data)
    remote = tmp_path / "remote.part"
    remote.write_bytes(data[:100_000] + b"junk left by a cut attempt" * 50)
    transport.put(local, str(remote), offset=100_000)
    assert transport.last_put_via and transport.last_put_via.startswith("openssh (")
    assert remote.read_bytes() == data
    fresh = tmp_path / "sub" / "dir" / "fresh.part"  # offset 0 creates it, directories too
    transport.put(local, str(fresh), offset=0)
    assert fresh.read_bytes() == data


def test_cut_openssh_upload_resumes_from_the_verified_prefix(transport, tmp_path):
    blob = _blob(tmp_path, 24 << 20)
    store = _store(transport, tmp_path)
    killed = []

    def progress(sha, done, total):
        running = transport._bulk.running if transport._bulk else None
        if not killed and running is not None and done >= total // 2:
            killed.append(done)
            os.kill(running.pid, signal.SIGKILL)  # the client and its TCP connection go away

    res = push_blob(store, blob, progress=progress)
    assert killed, "the upload never reached the kill point"
    assert res.status == "resumed" and res.attempts == 2 and res.resumed_from > 0
    assert res.sent < blob.size + killed[0]  # the prefix on the device was not sent again
    assert any("cut" in n for n in res.notes)
    assert res.via.startswith("openssh (")
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_corrupted_transfer_never_lands_under_the_final_name(transport, tmp_path):
    blob = _blob(tmp_path, 8 << 20)
    store = _store(transport, tmp_path)
    flipped = []

    def progress(sha, done, total):
        if not flipped and done >= total // 4:
            with open(blob.path, "r+b") as f:  # bytes not sent yet change: the stream is corrupt
                f.seek(total - 1000)
                f.write(b"\xff" * 16)
            flipped.append(done)

    with pytest.raises(HashMismatch):
        push_blob(store, blob, progress=progress)
    assert flipped
    assert not Path(store.blob(blob.sha256)).exists()
    assert not Path(store.part(blob.sha256)).exists()


def _other_host_key(kind: str, tmp_path: Path) -> paramiko.PKey:
    if kind == "ecdsa":
        return paramiko.ECDSAKey.generate()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    key_type, b64 = (tmp_path / "k.pub").read_text().split()[:2]
    return HostKey(key_type, "", f"{key_type} {b64}").pkey()


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa"])  # the server's own type, and another type
def test_openssh_path_refuses_any_key_but_the_verified_one(transport, tmp_path, monkeypatch, ssh_lab, kind):
    """Even with a user config and known_hosts that would accept the server (ignored: ``-F``)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
    )
    shutil.copy(ssh_lab.known_hosts_path, home / ".ssh" / "known_hosts")
    monkeypatch.setenv("HOME", str(home))
    impostor_key = bulk.OpenSSHBulk(
        transport.hop,
        _other_host_key(kind, tmp_path),
        name="orin-agx",
        timeout=10,
        binary=shutil.which("ssh"),
    )
    local = tmp_path / "x.bin"
    local.write_bytes(os.urandom(10_000))
    remote = tmp_path / "never.part"
    try:
        with pytest.raises(HostKeyError, match="host key other than the trusted"):
            impostor_key.send(local, str(remote), 0)
    finally:
        impostor_key.close()
    assert not remote.exists()
    assert not impostor_key.dir.exists()  # the private known_hosts and config are gone


def test_the_trusted_key_is_the_one_paramiko_verified(transport):
    b, why = transport._bulk_path()
    assert why is None and b is not None
    line = b.files.known_hosts.read_text().split()
    assert line[0] == pinned_client.HOST_ALIAS and len(line) == 3
    assert line[2] == transport.paramiko_transport.get_remote_server_key().get_base64()
    cfg = b.config.read_text()
    for must in ("StrictHostKeyChecking yes", "GlobalKnownHostsFile /dev/null", "BatchMode yes"):
        assert must in cfg
    assert "PasswordAuthentication no" in cfg and "ProxyCommand none" in cfg


@pytest.mark.parametrize("why", ["switched off", "no ssh binary"])
def test_sftp_takes_over_without_an_openssh_client(ssh_endpoint, tmp_path, monkeypatch, why):
    if why == "switched off":
        monkeypatch.setenv(pinned_client.ENV_SWITCH, "off")
    else:
        empty = tmp_path / "bin"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))  # the device's commands run over paramiko
    blob = _blob(tmp_path, 2 << 20)
    t = SSHTransport.connect(ssh_endpoint, timeout=30)
    try:
        res = push_blob(_store(t, tmp_path), blob)
    finally:
        t.close()
    assert res.status == "uploaded" and res.via.startswith("sftp (paramiko; ")
    assert ("EDGELAB_SSH_BULK=off" if why == "switched off" else "no ssh client on PATH") in res.via
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_sftp_takes_over_where_openssh_cannot_log_in(ssh_lab, ssh_endpoint, tmp_path):
    """A key file OpenSSH refuses (readable by others) that paramiko still uses: BatchMode never
    prompts, the push falls back to SFTP and says why."""
    loose = tmp_path / "loose_key"
    shutil.copy(ssh_lab.client_key_path, loose)
    loose.chmod(0o644)
    extra = {**ssh_endpoint.extra, "identity_file": str(loose)}
    ep = dataclasses.replace(ssh_endpoint, ssh_user=ssh_endpoint.ssh_user, extra=extra)
    blob = _blob(tmp_path, 1 << 20)
    t = SSHTransport.connect(ep, timeout=30)
    try:
        res = push_blob(_store(t, tmp_path), blob)
    finally:
        t.close()
    assert res.status == "uploaded"
    assert res.via.startswith("sftp (paramiko; ssh could not run the upload"), res.via
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_a_changed_host_key_is_refused_before_any_openssh_client_starts(ssh_endpoint, tmp_path):
    from edgelab.artifacts.push import push_to_device

    blob = _blob(tmp_path, 100_000)
    wrong = dataclasses.replace(ssh_endpoint, host_key_fingerprint="SHA256:" + "A" * 43)
    before = len(bulk._REGISTRY)
    res = push_to_device(lambda: SSHTransport.connect(wrong, timeout=30), "orin-agx", [blob])
    assert not res.ok and "HOST KEY CHANGED" in (res.error or "")
    assert len(bulk._REGISTRY) == before  # no uploader (nor its client) was ever made for it


def test_ctrl_c_stops_the_openssh_client_and_the_next_push_resumes(transport, tmp_path):
    import threading

    from edgelab.errors import Interrupted

    blob = _blob(tmp_path, 16 << 20)
    store = _store(transport, tmp_path)
    cancel = threading.Event()
    clients = []

    def progress(sha, done, total):
        if transport._bulk and transport._bulk.running is not None:
            clients.append(transport._bulk.running)
        if done >= total // 2:
            cancel.set()  # what push_parallel does on a Ctrl-C

    with pytest.raises(Interrupted):
        push_blob(store, blob, progress=progress, cancel=cancel)
    assert clients and all(c.poll() is not None for c in clients)  # no ssh left running
    res = push_blob(store, blob)
    assert res.status == "resumed" and 0 < res.resumed_from < blob.size
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_a_prepared_client_that_died_waiting_is_replaced(transport, tmp_path):
    transport.prepare_put()
    b = transport._bulk
    assert b is not None and b._pending is not None
    os.kill(b._pending.proc.pid, signal.SIGKILL)
    b._pending.proc.wait()
    local = tmp_path / "l.bin"
    local.write_bytes(os.urandom(200_000))
    remote = tmp_path / "r.part"
    transport.put(local, str(remote), offset=0)
    assert transport.last_put_via.startswith("openssh (") and remote.read_bytes() == local.read_bytes()
