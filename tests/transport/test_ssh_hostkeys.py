"""Host-key trust against a real OpenSSH sshd: unknown refused, trusted accepted, changed refused loudly.

``TmpSshd`` (also used by test_ssh_transport) is a throwaway real sshd in a tmp
dir on free high ports, loopback only, with its own host and client keys, so
a test can restart it with a new host key without touching the shared lab.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from edgelab.errors import HostKeyError
from edgelab.transport import ssh
from edgelab.transport.base import Endpoint
from edgelab.transport.ssh import SSHTransport, fetch_host_key, hostkeys
from edgelab.transport.ssh.hostkeys import add_known_host, fingerprint, remove_known_host

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"

pytestmark = pytest.mark.skipif(
    not Path(SSHD).exists(), reason="needs OpenSSH sshd (apt install openssh-server)"
)


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _keygen(path: Path, kind: str = "ed25519") -> None:
    for p in (path, path.with_suffix(".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "edgelab-test", "-f", str(path)], check=True
    )


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (sshd's per-connection processes)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry.name))
    return kids


class TmpSshd:
    """A real sshd on ``addresses`` (loopback), one free port, key auth with a generated client key."""

    def __init__(self, root: Path, addresses: tuple[str, ...] = ("127.0.0.1",), key_type: str = "ed25519"):
        self.root = root
        self.addresses = addresses
        self.port = free_port(addresses[0])
        self.user = getpass.getuser()
        self.key_type = key_type
        self.host_key = root / f"host_{key_type}"
        self.client_key = root / "client_ed25519"
        self.proc: subprocess.Popen | None = None
        root.mkdir(parents=True, exist_ok=True)
        _keygen(self.host_key, key_type)
        _keygen(self.client_key)
        (root / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())

    @property
    def host_key_line(self) -> str:
        return " ".join(self.host_key.with_suffix(".pub").read_text().split()[:2])

    @property
    def host_key_fingerprint(self) -> str:
        return fingerprint(hostkeys.HostKey("", "", self.host_key_line).pkey())

    def write_config(self) -> Path:
        cfg = self.root / "sshd_config"
        listen = "\n".join(f"ListenAddress {a}:{self.port}" for a in self.addresses)
        cfg.write_text(
            f"""{listen}
HostKey {self.host_key}
PidFile {self.root}/sshd.pid
AuthorizedKeysFile {self.root}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowTcpForwarding yes
MaxStartups 200:30:400
MaxSessions 200
Subsystem sftp {SFTP_SERVER}
LogLevel ERROR
"""
        )
        return cfg

    def start(self) -> TmpSshd:
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        cfg = self.write_config()
        log = open(self.root / "sshd.log", "ab")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=log)
        log.close()
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text()}")
            try:
                socket.create_connection((self.addresses[0], self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("sshd did not start listening")

    def stop(self) -> None:
        """Stop the listener and every per-connection sshd it forked (by pid)."""
        if self.proc is None:
            return
        # Children first, while the listener lives to reap them (an orphan would stay a zombie
        # under an init that does not reap, as in many containers).
        for pid in _children(self.proc.pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5
        while _children(self.proc.pid) and time.monotonic() < end:
            time.sleep(0.05)
        kids = _children(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def new_host_key(self) -> None:
        self.stop()
        _keygen(self.host_key, self.key_type)
        self.start()

    def endpoint(self, name: str = "dev", address: str | None = None, **fields) -> Endpoint:
        extra = {"identity_file": str(self.client_key), **fields.pop("extra", {})}
        return Endpoint(
            name=name,
            kind="ssh",
            ssh_user=self.user,
            ssh_host=address or self.addresses[0],
            ssh_port=self.port,
            extra=extra,
            **fields,
        )


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No real ~/.ssh, agent or edgelab state leaks into (or out of) these tests."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EDGELAB_HOME", str(home / ".edgelab"))
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(home / "no-sim"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield home
    ssh.close_all()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = TmpSshd(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        ssh.close_all()
        server.stop()


@pytest.fixture
def own_sshd(tmp_path):
    """A private sshd for tests that restart it."""
    server = TmpSshd(tmp_path / "own-sshd").start()
    try:
        yield server
    finally:
        ssh.close_all()
        server.stop()


def _ssh_keygen_fingerprint(pub: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)], capture_output=True, text=True)
    return out.stdout.split()[1]


# ----------------------------------------------------------------------------------------------


def test_fingerprint_matches_openssh(sshd: TmpSshd) -> None:
    key = fetch_host_key(sshd.endpoint())
    assert key.fingerprint == _ssh_keygen_fingerprint(sshd.host_key.with_suffix(".pub"))
    assert key.public_line == sshd.host_key_line
    assert key.key_type == "ssh-ed25519"


def test_unknown_host_key_is_refused_with_the_trust_command(sshd: TmpSshd) -> None:
    ep = sshd.endpoint("orin-x")
    with pytest.raises(HostKeyError) as err:
        SSHTransport.connect(ep, timeout=10)
    assert "unknown host key for orin-x" in str(err.value)
    assert "edgelab device trust orin-x" in str(err.value)
    assert err.value.remedy == "edgelab device trust orin-x"
    assert ssh._POOL.size() == 0
    state, detail = SSHTransport.check(ep)
    assert state == "untrusted" and "edgelab device trust orin-x" in detail


def test_trusted_after_add_known_host(sshd: TmpSshd, isolated_home: Path) -> None:
    ep = sshd.endpoint("trusted")
    key = fetch_host_key(ep)
    from edgelab.config import known_hosts_path

    assert add_known_host(known_hosts_path(), "127.0.0.1", sshd.port, key) is True
    assert add_known_host(known_hosts_path(), "127.0.0.1", sshd.port, key) is False  # already there
    assert known_hosts_path().read_text().startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    assert (known_hosts_path().stat().st_mode & 0o777) == 0o600
    with SSHTransport.connect(ep, timeout=10) as t:
        r = t.run(["echo", "hello"])
    assert (r.exit_code, r.stdout) == (0, "hello\n")
    assert SSHTransport.check(ep) == ("online", None)


def test_users_known_hosts_and_hashed_entries_are_honoured(sshd: TmpSshd, isolated_home: Path) -> None:
    kh = isolated_home / ".ssh" / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_key_line}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert "127.0.0.1" not in kh.read_text()  # hashed now
    assert SSHTransport.check(sshd.endpoint()) == ("online", None)


def test_fingerprint_on_the_endpoint_is_trusted(sshd: TmpSshd) -> None:
    fp = _ssh_keygen_fingerprint(sshd.host_key.with_suffix(".pub"))
    ep = sshd.endpoint("pinned", host_key_fingerprint=fp)
    assert SSHTransport.check(ep) == ("online", None)


def test_a_different_fingerprint_is_refused_loudly(sshd: TmpSshd) -> None:
    real = _ssh_keygen_fingerprint(sshd.host_key.with_suffix(".pub"))
    # A connection to the same server is already pooled: a pin that disagrees must still refuse.
    assert SSHTransport.check(sshd.endpoint("pinned", host_key_fingerprint=real))[0] == "online"
    wrong = "SHA256:" + "A" * 43
    ep = sshd.endpoint("jetson", host_key_fingerprint=wrong)
    with pytest.raises(HostKeyError) as err:
        SSHTransport.connect(ep, timeout=10)
    msg = str(err.value)
    assert msg.startswith("HOST KEY CHANGED for jetson (127.0.0.1:")
    assert f"expected {wrong}, got {real}" in msg
    assert "edgelab device trust jetson --replace" in msg


def test_changed_host_key_is_refused_after_restart(own_sshd: TmpSshd, isolated_home: Path) -> None:
    from edgelab.config import known_hosts_path

    ep = own_sshd.endpoint("thor")
    old = fetch_host_key(ep)
    add_known_host(known_hosts_path(), "127.0.0.1", own_sshd.port, old)
    t = SSHTransport.connect(ep, timeout=10)
    assert t.run(["true"]).ok
    own_sshd.new_host_key()  # the "device" was reinstalled, or someone is in the middle
    new = fetch_host_key(ep)
    assert new.fingerprint != old.fingerprint
    with pytest.raises(HostKeyError) as err:
        t.run(["true"])  # the pooled connection died; the reconnect meets the new key
    assert f"HOST KEY CHANGED for thor (127.0.0.1:{own_sshd.port}): expected {old.fingerprint}" in str(
        err.value
    )
    assert f"got {new.fingerprint}" in str(err.value)
    state, detail = SSHTransport.check(ep)
    assert state == "untrusted" and "HOST KEY CHANGED" in detail
    # Without --replace the old record stays; with it, the new key is trusted.
    with pytest.raises(HostKeyError):
        add_known_host(known_hosts_path(), "127.0.0.1", own_sshd.port, new)
    add_known_host(known_hosts_path(), "127.0.0.1", own_sshd.port, new, replace=True)
    assert SSHTransport.check(ep) == ("online", None)
    assert known_hosts_path().read_text().count(f"[127.0.0.1]:{own_sshd.port} ") == 1


def test_revoked_key_is_refused(sshd: TmpSshd, isolated_home: Path) -> None:
    kh = isolated_home / ".ssh" / "known_hosts"
    kh.write_text(f"@revoked [127.0.0.1]:{sshd.port} {sshd.host_key_line}\n")
    state, detail = SSHTransport.check(sshd.endpoint())
    assert state == "untrusted" and "@revoked" in detail


def test_user_known_hosts_file_from_ssh_config(sshd: TmpSshd, tmp_path: Path) -> None:
    kh = tmp_path / "lab_known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_key_line}\n")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host labdev\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {kh}\n"
    )
    ep = Endpoint(name="labdev", kind="ssh", ssh_host="labdev")
    assert SSHTransport.check(ep, ssh_config=cfg) == ("online", None)


def test_wrong_key_is_auth_failed(sshd: TmpSshd, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    _keygen(stranger)
    ep = sshd.endpoint(
        "locked",
        host_key_fingerprint=_ssh_keygen_fingerprint(sshd.host_key.with_suffix(".pub")),
        extra={"identity_file": str(stranger)},
    )
    state, detail = SSHTransport.check(ep)
    assert state == "auth-failed"
    assert "refused every key" in detail and str(stranger) in detail


def test_closed_port_is_offline() -> None:
    port = free_port()
    state, detail = SSHTransport.check(Endpoint(name="gone", kind="ssh", ssh_host="127.0.0.1", ssh_port=port))
    assert state == "offline" and "connection refused" in detail


def test_known_hosts_file_editing(tmp_path: Path, sshd: TmpSshd) -> None:
    kh = tmp_path / "kh"
    key = fetch_host_key(sshd.endpoint())
    add_known_host(kh, "far.lab.invalid", 22, key)
    assert kh.read_text() == f"far.lab.invalid {key.public_line}\n"
    assert [e.key.get_base64() for e in hostkeys.lookup([kh], "far.lab.invalid")] == [
        key.public_line.split()[1]
    ]
    assert hostkeys.lookup([kh], "far.lab.invalid", 2222) == []
    assert remove_known_host(kh, "far.lab.invalid") == 1
    assert hostkeys.lookup([kh], "far.lab.invalid") == []
