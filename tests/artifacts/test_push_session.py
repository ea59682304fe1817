"""A fresh push in one OpenSSH login (``transport.ssh.session_transport``), on the virtual Jetson's
real sshd: the request loop's framing, the push end to end without paramiko, a cut resumed, a
corrupt stream refused, another host key refused, and the paramiko fallbacks."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.errors import HashMismatch, HostKeyError
from edgelab.transport import open_push_transport, start_push_session
from edgelab.transport.options import SSHOptions
from edgelab.transport.quoting import Shell, join_posix
from edgelab.transport.ssh.openssh.session import LOOP, Session
from edgelab.transport.ssh.session_transport import SessionTransport, plan

pytestmark = pytest.mark.skipif(not shutil.which("ssh"), reason="no OpenSSH client on this host")


def _blob(tmp_path: Path, size: int, name: str = "blob.bin") -> BlobSpec:
    p = tmp_path / name
    p.write_bytes(os.urandom(size))
    return BlobSpec(p, sha256_path(p), size)


def _logins(ssh_lab) -> int:
    """Logins the lab's sshd accepted so far (its VERBOSE log)."""
    log = Path(ssh_lab.state_dir) / "ssh" / "sshd.log"
    return log.read_text(errors="replace").count("Accepted publickey")


@pytest.fixture
def session(ssh_endpoint):
    t = start_push_session(ssh_endpoint, timeout=30)
    assert isinstance(t, SessionTransport), "the virtual Jetson must be reachable by a session"
    try:
        yield t
    finally:
        t.close()


def test_the_loop_frames_any_output_and_keeps_commands_apart(session):
    """Output that looks like a frame, stderr, exit codes, a command that exits, no stdin, 1 MiB."""
    tricky = session.run(["sh", "-c", 'printf "edgelab-rc 0 0 0\\n"; echo oops >&2; exit 7'])
    assert (tricky.exit_code, tricky.stdout, tricky.stderr) == (7, "edgelab-rc 0 0 0\n", "oops\n")
    assert session.run(["sh", "-c", "exit 3"]).exit_code == 3  # its exit ends only itself
    assert session.run(["cat"]).stdout == ""  # a command never reads the session's own stdin
    big = session.run(["sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x"])
    assert big.ok and big.stdout == "x" * (1 << 20)
    uni = session.run(["printf", "%s", "Grüße [s25] $HOME 'q' \"d\""])
    assert uni.stdout == "Grüße [s25] $HOME 'q' \"d\""
    assert session.logins == 1 and session.fell_back is None


def test_a_raw_session_answers_in_order(ssh_endpoint, tmp_path):
    """``Session`` alone, on the lab's own ssh_config: three requests, one login, then the end."""
    t = start_push_session(ssh_endpoint, timeout=30)
    assert isinstance(t, SessionTransport)
    try:
        s = Session(t.files.argv(join_posix(["sh", "-c", LOOP, "x"])), tmp_path / "log", name="raw")
        try:
            got = [s.run(join_posix(["echo", str(i)]), timeout=30).stdout for i in range(3)]
            assert got == ["0\n", "1\n", "2\n"]
            assert s.close() == 0  # its stdin closed: the loop ends, ssh exits 0
        finally:
            s.stop()
    finally:
        t.close()


_CHILD = r"""
import json, sys
from pathlib import Path
from edgelab.artifacts.devstore import open_store
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.transport import start_push_session
from edgelab.transport.base import Endpoint
from edgelab.transport.quoting import Shell
a = json.loads(sys.argv[1])
ep = Endpoint(**{**a["endpoint"], "shell": Shell(a["endpoint"]["shell"])})
t = start_push_session(ep, timeout=30)
store = open_store(t, root=a["root"], inspect=a["sha"])
res = push_blob(store, BlobSpec(Path(a["path"]), a["sha"], a["size"]))
t.close()
print(json.dumps({"status": res.status, "via": res.via, "hasher": res.hasher, "logins": t.logins,
                  "paramiko": any(m.split(".")[0] in ("paramiko", "cryptography", "nacl") for m in sys.modules)}))
"""


def test_a_fresh_push_is_one_login_and_never_loads_paramiko(ssh_endpoint, ssh_lab, tmp_path):
    blob = _blob(tmp_path, (3 << 20) + 77)
    root = tmp_path / "device-store"
    arg = {
        "endpoint": {**dataclasses.asdict(ssh_endpoint), "shell": ssh_endpoint.shell.value},
        "root": str(root),
        "sha": blob.sha256,
        "path": str(blob.path),
        "size": blob.size,
    }
    before = _logins(ssh_lab)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(arg)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["status"] == "uploaded" and got["hasher"] == "openssl"
    assert got["via"] == "openssh session (aes128-gcm@openssh.com)"
    assert got["logins"] == 1 and got["paramiko"] is False
    deadline = time.monotonic() + 5
    while _logins(ssh_lab) == before and time.monotonic() < deadline:
        time.sleep(0.05)  # sshd logs the login asynchronously
    assert _logins(ssh_lab) - before == 1  # one login did the store's question and the upload
    assert sha256_path(root / blob.sha256) == blob.sha256
    assert not (root / f"{blob.sha256}.part").exists()


@pytest.mark.parametrize("mode", ["part", "fed"])  # the session goes on after it / ends with it
def test_a_cut_session_upload_resumes_in_a_new_login(session, tmp_path, monkeypatch, mode):
    from edgelab.transport.ssh import session_transport

    if mode == "fed":
        monkeypatch.setattr(session_transport, "KEEP_SESSION_BELOW", 0)
    blob = _blob(tmp_path, 24 << 20)
    store = open_store(session, root=str(tmp_path / "device-store"))
    killed = []

    def progress(sha, done, total):
        s = session._session
        if not killed and s is not None and done >= total // 2:
            killed.append(done)
            os.kill(s.proc.pid, signal.SIGKILL)  # the client and its TCP connection go away

    res = push_blob(store, blob, progress=progress)
    assert killed, "the upload never reached the kill point"
    assert res.status == "resumed" and res.attempts == 2 and res.resumed_from > 0
    assert res.sent < blob.size + killed[0]  # the prefix on the device was not sent again
    assert res.via.startswith("openssh session (")
    assert session.logins == 2 and session.fell_back is None
    assert sha256_path(Path(res.remote_path)) == blob.sha256


def test_several_blobs_share_one_login_and_a_large_one_ends_it(session, ssh_endpoint, tmp_path, monkeypatch):
    from edgelab.artifacts.push import push_to_device
    from edgelab.transport.ssh import session_transport

    monkeypatch.setattr(session_transport, "KEEP_SESSION_BELOW", 2 << 20)
    small = [_blob(tmp_path, 300_000 + i, name=f"s{i}.bin") for i in range(3)]
    res = push_to_device(lambda: session, "orin", small)  # the default store; it closes the transport
    assert res.ok, res.error
    assert [b.status for b in res.blobs] == ["uploaded"] * 3
    assert session.logins == 1  # the store's question and three uploads: one login
    t = start_push_session(ssh_endpoint, timeout=30)
    assert isinstance(t, SessionTransport)
    try:
        store = open_store(t, root=str(tmp_path / "device-store"))
        large = push_blob(store, _blob(tmp_path, 3 << 20, name="large.bin"))
        assert large.status == "uploaded" and t._session is not None and t._session.ended
        after = push_blob(store, _blob(tmp_path, 1000, name="after.bin"))
        assert after.status == "uploaded" and t.logins == 2  # the large one ended its login
        for b in [*res.blobs, large, after]:
            assert t.run(["sha256sum", b.remote_path]).stdout.split()[0] == b.sha256
        assert t.run(["rm", "-f", *(b.remote_path for b in res.blobs)]).ok
    finally:
        t.close()


def test_a_corrupt_stream_never_lands_under_the_final_name(session, tmp_path):
    blob = _blob(tmp_path, 8 << 20)
    store = open_store(session, root=str(tmp_path / "device-store"))
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


def _keypair(tmp_path: Path, name: str) -> tuple[Path, str]:
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key, (tmp_path / f"{name}.pub").read_text().split()[1]


def test_another_host_key_is_refused_never_fallen_back(ssh_endpoint, tmp_path):
    """Trust on file names another key for this address: ssh meets the real one and refuses."""
    _key, b64 = _keypair(tmp_path, "impostor")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{ssh_endpoint.ssh_host}]:{ssh_endpoint.ssh_port} ssh-ed25519 {b64}\n")
    import base64

    from edgelab.transport.ssh.known_hosts import fingerprint

    ep = dataclasses.replace(
        ssh_endpoint,
        host_key_fingerprint=fingerprint(base64.b64decode(b64)),
        extra={**ssh_endpoint.extra, "known_hosts": str(kh)},
    )
    t = start_push_session(ep, timeout=30)
    assert isinstance(t, SessionTransport)
    try:
        with pytest.raises(HostKeyError, match="other than the trusted"):
            t.run(["true"])
        assert t.fell_back is None  # refused, not handed to paramiko
    finally:
        t.close()


def test_no_trusted_key_on_file_goes_to_paramiko_which_refuses_it(ssh_endpoint, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    ep = dataclasses.replace(
        ssh_endpoint, host_key_fingerprint=None, extra={**ssh_endpoint.extra, "known_hosts": str(empty)}
    )
    assert plan(ep, SSHOptions(timeout=30)) == "no trusted host key on file"
    assert start_push_session(ep, timeout=30) is None
    with pytest.raises(HostKeyError, match="unknown host key"):
        open_push_transport(ep, timeout=30)


def test_a_key_openssh_will_not_use_falls_back_to_paramiko(ssh_endpoint, tmp_path):
    """OpenSSH refuses a private key others can read; paramiko uses it: the push still lands."""
    loose = tmp_path / "loose_key"
    shutil.copy(ssh_endpoint.extra["identity_file"], loose)
    loose.chmod(0o644)
    ep = dataclasses.replace(ssh_endpoint, extra={**ssh_endpoint.extra, "identity_file": str(loose)})
    t = start_push_session(ep, timeout=30)
    assert isinstance(t, SessionTransport)
    try:
        blob = _blob(tmp_path, 1 << 20)
        store = open_store(t, root=str(tmp_path / "device-store"))
        res = push_blob(store, blob)
        assert res.status == "uploaded"
        assert t.fell_back and "could not log in" in t.fell_back
        assert res.via and res.via.startswith("sftp (paramiko;")  # its own ssh client refused it too
        assert sha256_path(Path(res.remote_path)) == blob.sha256
    finally:
        t.close()


def test_what_a_session_cannot_carry_is_said(ssh_endpoint, monkeypatch):
    opts = SSHOptions(timeout=30)
    win = dataclasses.replace(ssh_endpoint, shell=Shell.POWERSHELL)
    assert plan(win, opts) == "Windows endpoint"
    jumped = dataclasses.replace(
        ssh_endpoint, ssh_jump=f"root@{ssh_endpoint.ssh_host}:{ssh_endpoint.ssh_port}"
    )
    assert "jump host" in str(plan(jumped, opts))
    monkeypatch.setenv("EDGELAB_SSH_SESSION", "off")
    assert plan(ssh_endpoint, opts) == "EDGELAB_SSH_SESSION=off"
    monkeypatch.delenv("EDGELAB_SSH_SESSION")
    monkeypatch.setenv("EDGELAB_SSH_BULK", "off")
    assert plan(ssh_endpoint, opts) == "EDGELAB_SSH_BULK=off"


@pytest.fixture
def lab_db(tmp_path, ssh_lab, monkeypatch):
    """An inventory holding the virtual Jetson as ``sim up`` registers it (by address, the lab's
    ssh_config naming its key and known_hosts)."""
    from edgelab.sim.lab import _ssh_rows
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import add_device

    monkeypatch.setenv("EDGELAB_SIM_DIR", str(ssh_lab.state_dir))
    dbmod.dispose_engines()
    url = str(tmp_path / "push.db")
    with session_scope(get_engine(url)) as s:
        for row in _ssh_rows(ssh_lab):
            if row.name == "orin-agx":
                add_device(s, row)
    try:
        yield url
    finally:
        dbmod.dispose_engines()


def test_edgelab_push_fresh_stale_and_unchanged_each_take_one_login(lab_db, ssh_lab, ssh_endpoint, tmp_path):
    from typer.testing import CliRunner

    from edgelab.cli import app

    runner = CliRunner()
    blob = _blob(tmp_path, (2 << 20) + 5, name="weights.bin")
    name = f"sess-{blob.sha256[:8]}"
    add = runner.invoke(
        app,
        [
            "--db",
            lab_db,
            "artifact",
            "add",
            str(blob.path),
            "--kind",
            "weights",
            "--target",
            "any",
            "--name",
            name,
        ],
    )
    assert add.exit_code == 0, add.output
    t = start_push_session(ssh_endpoint, timeout=30)
    assert t is not None
    try:
        assert t.run(["true"]).ok  # this test's own login is done (and logged) before any count

        def push() -> tuple[dict, int]:
            before = _logins(ssh_lab)
            res = runner.invoke(app, ["--db", lab_db, "push", name, "-d", "orin-agx", "--json"])
            assert res.exit_code == 0, res.output
            deadline = time.monotonic() + 5
            while _logins(ssh_lab) == before and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # a second login, were there one, is logged by now
            return json.loads(res.stdout)[0]["blobs"][0], _logins(ssh_lab) - before

        fresh, logins = push()
        assert fresh["status"] == "uploaded" and logins == 1
        assert fresh["via"] == "openssh session (aes128-gcm@openssh.com)" and fresh["hasher"] == "openssl"
        # the store wiped behind edgelab's back: the re-push check finds the blob gone and its
        # login serves the push that follows
        assert t.run(["rm", "-f", fresh["remote_path"]]).ok
        stale, logins = push()
        assert stale["status"] == "uploaded" and logins == 1
        same, logins = push()
        assert same["status"] == "present" and logins == 1 and same["sent"] == 0
        assert t.run(["sha256sum", same["remote_path"]]).stdout.split()[0] == blob.sha256
        assert t.run(["rm", "-f", same["remote_path"]]).ok
    finally:
        t.close()


def test_ctrl_c_stops_the_session_and_the_next_push_resumes_in_a_new_login(session, tmp_path):
    import threading

    from edgelab.errors import Interrupted

    blob = _blob(tmp_path, 16 << 20)
    store = open_store(session, root=str(tmp_path / "device-store"))
    cancel = threading.Event()
    clients = []

    def progress(sha, done, total):
        if session._session is not None:
            clients.append(session._session.proc)
        if done >= total // 2:
            cancel.set()  # what push_parallel does on a Ctrl-C

    with pytest.raises(Interrupted):
        push_blob(store, blob, progress=progress, cancel=cancel)
    assert clients and all(c.poll() is not None for c in clients)  # no ssh left running
    res = push_blob(store, blob)
    assert res.status == "resumed" and 0 < res.resumed_from < blob.size
    assert session.logins == 2 and sha256_path(Path(res.remote_path)) == blob.sha256


def test_a_session_that_died_between_commands_is_replaced_by_a_new_login(session, tmp_path):
    assert session.run(["true"]).ok
    first = session._session
    assert first is not None
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait()
    from edgelab.errors import TransportError

    with pytest.raises(TransportError):
        session.run(["true"])  # the request met a dead session: said, not retried behind the caller
    assert session.run(["echo", "again"]).stdout == "again\n"
    assert session.logins == 2 and session.fell_back is None


def test_prefetch_answers_each_blob_as_its_own_inspect_would(session, tmp_path):
    root = tmp_path / "device-store"
    store = open_store(session, root=str(root))
    whole, part, absent = ("a" * 64, "b" * 64, "c" * 64)
    store.ensure()
    (root / whole).write_bytes(b"x" * 10)
    (root / f"{part}.part").write_bytes(b"y" * 7)
    before = session.logins
    store.prefetch([whole, part, absent, whole])
    fresh = open_store(session, root=str(root))  # asks per blob
    for sha in (whole, part, absent):
        assert store.inspect(sha) == fresh.inspect(sha)
    assert store.inspect(whole)[0] == fresh.inspect(whole)[0]  # used once: then asked again
    assert store.inspect(part)[1][0] == 7 and store.inspect(absent) == (None, None)
    assert session.logins == before


def _trusted_at(ssh_endpoint, tmp_path: Path, port: int):
    """The lab device's endpoint moved to 127.0.0.1:``port``, its host key trusted there."""
    lab_kh = Path(ssh_endpoint.extra["known_hosts"]).read_text().split("\n")[0].split()
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{port} {lab_kh[1]} {lab_kh[2]}\n")
    return dataclasses.replace(
        ssh_endpoint,
        ssh_host="127.0.0.1",
        ssh_port=port,
        host_key_fingerprint=None,
        extra={**ssh_endpoint.extra, "known_hosts": str(kh)},
    )


def test_a_host_that_accepts_and_never_answers_is_said_once_not_waited_twice(ssh_endpoint, tmp_path):
    """A frozen sshd (the TCP connection accepted, no banner): the session's own timeout says so
    as the paramiko path would, and paramiko is not made to wait a second time."""
    import socket

    from edgelab.errors import SSHNotAnswering

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    try:
        t = start_push_session(_trusted_at(ssh_endpoint, tmp_path, srv.getsockname()[1]), timeout=2)
        assert isinstance(t, SessionTransport)
        try:
            with pytest.raises(SSHNotAnswering, match="did not answer within 2s"):
                t.run(["true"])
            assert t.fell_back is None
        finally:
            t.close()
    finally:
        srv.close()


def test_a_refused_connection_is_said_without_trying_paramiko(ssh_endpoint, tmp_path):
    import socket

    from edgelab.errors import SSHUnreachable

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t = start_push_session(_trusted_at(ssh_endpoint, tmp_path, port), timeout=5)
    assert isinstance(t, SessionTransport)
    try:
        with pytest.raises(SSHUnreachable, match=f"connection refused at 127.0.0.1:{port}"):
            t.run(["true"])
        assert t.fell_back is None
    finally:
        t.close()


def test_private_client_files_a_dead_process_left_are_removed_by_the_next(tmp_path, monkeypatch):
    """A process killed before its exit handlers ran leaves its ``edgelab-ssh-<pid>-*`` directory;
    the next ``ClientFiles`` removes it, and never a live process's."""
    import tempfile

    from edgelab.transport.ssh.config import Hop
    from edgelab.transport.ssh.openssh.pinned_client import ClientFiles, PinnedKey

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / "edgelab-ssh-999999-x1"  # no such process
    live = tmp_path / f"edgelab-ssh-{os.getppid()}-x2"  # this test's parent runs
    other = tmp_path / "edgelab-ssh-notapid-x3"
    for d in (dead, live, other):
        d.mkdir()
        (d / "config").write_text("Host x\n")
    key = tmp_path / "id"
    key.write_text("")
    hop = Hop(name="d", host="127.0.0.1", port=22, user="u", identity_files=(str(key),), identities_only=True)
    files = ClientFiles([(hop, [PinnedKey("ssh-ed25519", "AAAA")])], timeout=5, binary="ssh")
    try:
        assert files.dir.parent == tmp_path and files.dir.name.startswith(f"edgelab-ssh-{os.getpid()}-")
        assert not dead.exists() and live.exists() and other.exists()
    finally:
        files.close()
    assert not files.dir.exists()
