"""SSHTransport against a real sshd: run, timeouts that kill, streams, SFTP, pooling, ProxyJump.

A throwaway sshd (see test_ssh_hostkeys.TmpSshd) listens on three loopback
addresses, so a jump chain 127.0.0.2 -> 127.0.0.3 -> 127.0.0.4 is real SSH
forwarding through real sshd processes.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import threading
import time
import uuid
from pathlib import Path

import paramiko
import pytest

from edgelab.config import known_hosts_path
from edgelab.errors import HostKeyError, RemoteTimeout, TransportError
from edgelab.transport import ssh
from edgelab.transport.base import Endpoint
from edgelab.transport.ssh import SSHTransport
from edgelab.transport.ssh.hostkeys import add_known_host
from transport.test_ssh_hostkeys import TmpSshd, isolated_home  # noqa: F401 - autouse fixture

ADDRS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = TmpSshd(tmp_path_factory.mktemp("sshd"), addresses=ADDRS).start()
    try:
        yield server
    finally:
        ssh.close_all()
        server.stop()


@pytest.fixture
def trusted(sshd: TmpSshd) -> TmpSshd:
    """The sshd's key recorded in edgelab's known_hosts for every address."""
    key = sshd.host_key_line
    from edgelab.transport.ssh.hostkeys import HostKey

    for a in ADDRS:
        add_known_host(known_hosts_path(), a, sshd.port, HostKey("", "", key))
    return sshd


@pytest.fixture
def t(trusted: TmpSshd):
    transport = SSHTransport.connect(trusted.endpoint("dev"), timeout=10)
    try:
        yield transport
    finally:
        transport.close()


@pytest.fixture
def rdir(t: SSHTransport):
    path = f"/tmp/edgelab-ssh-test-{uuid.uuid4().hex[:10]}"
    assert t.run(["mkdir", "-p", path]).ok
    yield path
    t.run(["rm", "-rf", path])


def _alive(t: SSHTransport, pid: int) -> bool:
    return t.run(["kill", "-0", str(pid)]).exit_code == 0


def _gone(t: SSHTransport, pid: int, seconds: float = 10) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(t, pid):
            return True
        time.sleep(0.1)
    return False


def _pid(t: SSHTransport, path: str) -> int:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        r = t.run(["cat", path])
        if r.ok and r.stdout.strip().isdigit():
            return int(r.stdout.strip())
        time.sleep(0.05)
    raise AssertionError(f"no pid in {path}")


# --------------------------------------------------------------------------------------------- run


def test_run_exit_code_stdout_stderr(t: SSHTransport) -> None:
    r = t.run(["sh", "-c", "echo out; echo err >&2; exit 5"])
    assert (r.exit_code, r.stdout, r.stderr, r.argv) == (
        5,
        "out\n",
        "err\n",
        ("sh", "-c", "echo out; echo err >&2; exit 5"),
    )
    assert t.run(["edgelab-no-such-command"]).exit_code == 127


def test_run_arguments_arrive_exactly(t: SSHTransport) -> None:
    nasty = ["a b", "it's", '"q"', "$(id)", "`id`", "a;b", "*", "x\ny", "\\", "~", "-n", "$HOME", "é ✓"]
    r = t.run(["printf", "%s\\0", *nasty])
    assert r.stdout.split("\0")[:-1] == nasty


def test_run_stdin_and_large_output_without_deadlock(t: SSHTransport) -> None:
    data = os.urandom(3 << 20).hex().encode()  # 6 MiB in, 6 MiB out and 6 MiB on stderr at once
    r = t.run(["sh", "-c", "tee /dev/stderr"], input=data, timeout=120)
    assert r.ok
    assert r.stdout.encode() == data and r.stderr.encode() == data


def test_run_timeout_kills_the_remote_group(t: SSHTransport, rdir: str) -> None:
    script = f"echo $$ > {rdir}/leader; sleep 300 & echo $! > {rdir}/child; wait"
    with pytest.raises(RemoteTimeout) as err:
        t.run(["sh", "-c", script], timeout=1.5)
    assert "ran past 1.5s on dev" in str(err.value)
    leader, child = _pid(t, f"{rdir}/leader"), _pid(t, f"{rdir}/child")
    assert _gone(t, leader), "the timed-out command survived"
    assert _gone(t, child), "a child of the timed-out command survived"


# ------------------------------------------------------------------------------------------ stream


def test_stream_lines_wait_and_stderr(t: SSHTransport) -> None:
    proc = t.stream(["sh", "-c", "echo one; echo oops >&2; echo two; exit 4"])
    assert list(proc.lines()) == ["one", "two"]
    assert proc.wait(timeout=30) == 4
    assert proc.stderr == "oops\n"


def test_stream_cancel_kills_the_process_group(t: SSHTransport, rdir: str) -> None:
    proc = t.stream(["sh", "-c", f"sleep 300 & echo $! > {rdir}/child; echo started; wait"])
    lines = proc.lines()
    assert next(lines) == "started"
    leader = proc.pid
    child = _pid(t, f"{rdir}/child")
    assert leader is not None and _alive(t, leader) and _alive(t, child)
    assert proc.wait(timeout=0.2) is None
    proc.cancel()
    proc.cancel()
    assert _gone(t, leader) and _gone(t, child)
    assert list(lines) == []


def test_cancel_also_kills_a_member_that_ignores_term(t: SSHTransport, rdir: str) -> None:
    script = f"(trap '' TERM; exec sleep 300 >/dev/null 2>&1) & echo $! > {rdir}/child; echo started; wait"
    proc = t.stream(["sh", "-c", script])
    assert next(proc.lines()) == "started"
    child = _pid(t, f"{rdir}/child")
    proc.cancel()
    assert _gone(t, child), "a TERM-ignoring group member survived cancel"


# ------------------------------------------------------------------------------------------- files


def test_put_get_20mb_byte_exact(t: SSHTransport, rdir: str, tmp_path: Path) -> None:
    data = os.urandom(20 * 1024 * 1024 + 7)
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    src.chmod(0o750)
    digest = hashlib.sha256(data).hexdigest()
    seen: list[tuple[int, int]] = []
    remote = f"{rdir}/new/dirs/it's $(x).bin"
    assert t.put(src, remote, progress=lambda d, n: seen.append((d, n))) == digest
    assert seen[-1] == (len(data), len(data)) and len(seen) >= 20
    assert t.run(["sha256sum", remote]).stdout.split()[0] == digest
    assert t.run(["stat", "-c", "%a", remote]).stdout.strip() == "750"
    assert t.run(["ls", "-A", f"{rdir}/new/dirs"]).stdout == "it's $(x).bin\n"  # no .edgelab-part left
    back = tmp_path / "back" / "blob.bin"
    got: list[tuple[int, int]] = []
    assert t.get(remote, back, progress=lambda d, n: got.append((d, n))) == digest
    assert back.read_bytes() == data
    assert got[-1] == (len(data), len(data))
    assert not back.with_name("blob.bin.edgelab-part").exists()


def test_put_expands_home_and_get_missing_file_fails_clearly(t: SSHTransport, tmp_path: Path) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"hi\n")
    name = f".edgelab-ssh-test-{uuid.uuid4().hex[:8]}"
    home = Path(pwd.getpwnam(t.hop.user).pw_dir)
    try:
        t.put(src, f"~/{name}/f")
        assert (home / name / "f").read_bytes() == b"hi\n"
    finally:
        t.run(["rm", "-rf", str(home / name)])
    with pytest.raises(Exception) as err:
        t.get("/nonexistent/edgelab/file", tmp_path / "x")
    assert "no such file on dev" in str(err.value)
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------------- pool & reconnect


def test_connections_are_pooled_and_reconnected_once(trusted: TmpSshd) -> None:
    ep = trusted.endpoint("pooled", address="127.0.0.3")
    a = SSHTransport.connect(ep, timeout=10)
    b = SSHTransport.connect(ep, timeout=10)
    assert a.paramiko_transport is b.paramiko_transport
    first = a.paramiko_transport
    first.close()  # the connection drops (device rebooted, NAT timeout, ...)
    assert a.run(["echo", "back"]).stdout == "back\n"
    assert a.paramiko_transport is not first and a.paramiko_transport.is_active()
    assert b.run(["true"]).ok and b.paramiko_transport is a.paramiko_transport
    a.close()
    b.close()
    c = SSHTransport.connect(ep, timeout=10)  # still pooled after close
    assert c.paramiko_transport is a.paramiko_transport
    c.close()


def test_a_connection_drop_during_run_is_an_error_not_an_exit_code(trusted: TmpSshd, rdir: str) -> None:
    t = SSHTransport.connect(trusted.endpoint("dropper", address="127.0.0.4"), timeout=10)
    try:
        client, pidfile = t.paramiko_transport, Path(rdir) / "pid"  # this sshd runs on the lab host

        def drop_once_running() -> None:
            end = time.monotonic() + 30
            while not pidfile.exists() and time.monotonic() < end:
                time.sleep(0.02)
            client.close()

        threading.Thread(target=drop_once_running, daemon=True).start()
        with pytest.raises(TransportError) as err:
            t.run(["sh", "-c", f"echo $$ > {rdir}/pid; exec sleep 30"], timeout=60)
        assert "connection dropped while sh ran" in str(err.value)
        assert t.run(["true"]).ok  # and the next call reconnects
        t.run(["kill", str(_pid(t, f"{rdir}/pid"))])  # sshd leaves a non-pty command running
    finally:
        t.close()


# ------------------------------------------------------------------------------------------- jumps


def _sock_chain(t: paramiko.Transport) -> list[str]:
    """How each layer is carried: 'tcp' or 'channel' (a direct-tcpip channel of a jump host)."""
    out = []
    while isinstance(t.sock, paramiko.Channel):
        out.append("channel")
        t = t.sock.get_transport()
    out.append("tcp")
    return out


def test_proxy_jump_through_one_and_two_hops(trusted: TmpSshd) -> None:
    one = trusted.endpoint(
        "via-one", address="127.0.0.3", ssh_jump=f"{trusted.user}@127.0.0.2:{trusted.port}"
    )
    with SSHTransport.connect(one, timeout=10) as t1:
        assert t1.run(["echo", "hopped"]).stdout == "hopped\n"
        assert _sock_chain(t1.paramiko_transport) == ["channel", "tcp"]
        jump = t1.paramiko_transport.sock.get_transport()
        assert jump.getpeername()[0] == "127.0.0.2"
        r = t1.run(["sh", "-c", "echo $SSH_CONNECTION"])
        assert r.stdout.split()[2] == "127.0.0.3"  # the target sshd saw us arrive at its address
    chain = f"127.0.0.2:{trusted.port},127.0.0.3:{trusted.port}"
    two = trusted.endpoint("via-two", address="127.0.0.4", ssh_jump=chain)
    with SSHTransport.connect(two, timeout=10) as t2:
        assert t2.run(["true"]).ok
        assert _sock_chain(t2.paramiko_transport) == ["channel", "channel", "tcp"]


def test_proxy_jump_from_ssh_config(trusted: TmpSshd, tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host bastion\n  HostName 127.0.0.2\n  Port {trusted.port}\n  User {trusted.user}\n"
        f"  IdentityFile {trusted.client_key}\n"
        f"Host inner\n  HostName 127.0.0.4\n  Port {trusted.port}\n  User {trusted.user}\n"
        f"  IdentityFile {trusted.client_key}\n  ProxyJump bastion\n  ServerAliveInterval 7\n"
    )
    ep = Endpoint(name="inner", kind="ssh", ssh_host="inner")
    with SSHTransport.connect(ep, ssh_config=cfg, timeout=10) as t:
        assert t.hop.keepalive_s == 7
        assert t.run(["true"]).ok
        assert _sock_chain(t.paramiko_transport) == ["channel", "tcp"]
        assert t.paramiko_transport.sock.get_transport().getpeername()[0] == "127.0.0.2"


@pytest.mark.skipif(not shutil.which("ssh"), reason="no OpenSSH client on this host")
def test_resumable_put_through_two_jump_hosts_goes_over_openssh(trusted: TmpSshd, tmp_path: Path) -> None:
    """The OpenSSH path's ProxyJump chain: every hop a block of edgelab's private config."""
    chain = f"127.0.0.2:{trusted.port},127.0.0.3:{trusted.port}"
    ep = trusted.endpoint("via-two-put", address="127.0.0.4", ssh_jump=chain)
    local = tmp_path / "l.bin"
    data = os.urandom((2 << 20) + 7)
    local.write_bytes(data)
    remote = tmp_path / "remote" / "l.part"
    with SSHTransport.connect(ep, timeout=10) as t:
        t.put(local, str(remote), offset=0)
        assert t.last_put_via and t.last_put_via.startswith("openssh ("), t.last_put_via
        cfg = t._bulk.config.read_text()
        assert "ProxyJump edgelab-jump-0" in cfg and "ProxyJump edgelab-jump-1" in cfg
        assert remote.read_bytes() == data
        # a jump host showing a key other than the one verified for it stops the upload
        jumps = t._jump_keys()
        jumps[0] = (jumps[0][0], paramiko.ECDSAKey.generate())
        key = t.paramiko_transport.get_remote_server_key()
        impostor = ssh.openssh.bulk.OpenSSHBulk(
            t.hop, key, name="via-two-put", timeout=10, binary=shutil.which("ssh"), jumps=jumps
        )
        try:
            with pytest.raises(HostKeyError):
                impostor.send(local, str(tmp_path / "never.part"), 0)
        finally:
            impostor.close()
        assert not (tmp_path / "never.part").exists()


def test_untrusted_jump_host_is_refused(sshd: TmpSshd) -> None:
    # Only the target is trusted (pinned); the jump host is unknown and must be refused by name.
    from transport.test_ssh_hostkeys import _ssh_keygen_fingerprint

    fp = _ssh_keygen_fingerprint(sshd.host_key.with_suffix(".pub"))
    jump = f"127.0.0.2:{sshd.port}"
    ep = sshd.endpoint("inner", address="127.0.0.4", ssh_jump=jump, host_key_fingerprint=fp)
    with pytest.raises(HostKeyError) as err:
        SSHTransport.connect(ep, timeout=10)
    assert f"unknown host key for {jump}" in str(err.value)
