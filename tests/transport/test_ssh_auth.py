"""Authentication and reachability states against real processes: default keys, ssh-agent, silent ports."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from edgelab.transport import ssh
from edgelab.transport.base import Endpoint
from edgelab.transport.quoting import Shell, join_powershell
from edgelab.transport.ssh import SSHTransport
from transport.test_ssh_hostkeys import TmpSshd, _ssh_keygen_fingerprint, isolated_home  # noqa: F401 - autouse


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = TmpSshd(tmp_path_factory.mktemp("sshd-auth")).start()
    try:
        yield server
    finally:
        ssh.close_all()
        server.stop()


def _pinned(server: TmpSshd, **fields) -> Endpoint:
    fp = _ssh_keygen_fingerprint(server.host_key.with_suffix(".pub"))
    return Endpoint(
        name="dev",
        kind="ssh",
        ssh_user=server.user,
        ssh_host="127.0.0.1",
        ssh_port=server.port,
        host_key_fingerprint=fp,
        **fields,
    )


def test_default_key_in_home_is_used(sshd: TmpSshd) -> None:
    home = Path(os.environ["HOME"])  # a tmp dir: see isolated_home
    assert SSHTransport.check(_pinned(sshd))[0] == "auth-failed"
    ssh.close_all()
    shutil.copy(sshd.client_key, home / ".ssh" / "id_ed25519")
    os.chmod(home / ".ssh" / "id_ed25519", 0o600)
    assert SSHTransport.check(_pinned(sshd)) == ("online", None)
    ssh.close_all()
    # IdentitiesOnly: only the configured file (a stranger's key here) may be offered.
    stranger = home / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    (home / ".ssh" / "config").write_text(
        f"Host 127.0.0.1\n  IdentityFile {stranger}\n  IdentitiesOnly yes\n"
    )
    state, detail = SSHTransport.check(_pinned(sshd))
    assert state == "auth-failed" and "id_ed25519" not in detail


def test_ssh_agent_key_is_used(sshd: TmpSshd, tmp_path: Path, monkeypatch) -> None:
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        # The socket file exists once bound, before the agent listens: wait until it answers
        # (`ssh-add -l` exits 2 while it cannot connect, 1 for an empty agent).
        for _ in range(200):
            if (
                sock.exists()
                and subprocess.run(["ssh-add", "-l"], env=env, capture_output=True).returncode != 2
            ):
                break
            threading.Event().wait(0.02)
        subprocess.run(["ssh-add", "-q", str(sshd.client_key)], env=env, check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        assert SSHTransport.check(_pinned(sshd)) == ("online", None)
    finally:
        ssh.close_all()
        agent.send_signal(signal.SIGTERM)
        agent.wait(10)


def test_a_port_that_never_speaks_ssh_is_offline() -> None:
    """A listener that accepts and stays silent: the banner timeout bounds the wait."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        state, detail = SSHTransport.check(
            Endpoint(name="mute", kind="ssh", ssh_host="127.0.0.1", ssh_port=port), timeout=1.0
        )
        assert state == "offline"
        assert f"127.0.0.1:{port}" in detail
    finally:
        stop.set()
        th.join()
        for c in held:
            c.close()
        server.close()


def test_powershell_devices_get_an_encoded_command() -> None:
    """Windows OpenSSH hands the line to its shell (cmd.exe by default): only base64 crosses it,
    decoded it runs the argv and passes its exit code on (winscripts.run_native)."""
    from edgelab.transport import winscripts

    t = SSHTransport.__new__(SSHTransport)
    t.shell = Shell.POWERSHELL
    argv = ["Get-CimInstance", "Win32_VideoController", "it's $(x); `n"]
    line = t.command_line(argv)
    prog, *flags, encoded = line.split(" ")
    assert (prog, flags) == ("powershell", ["-NoProfile", "-NonInteractive", "-EncodedCommand"])
    assert base64.b64decode(encoded).decode("utf-16-le") == winscripts.run_native(argv)
    assert join_powershell(argv) in winscripts.run_native(argv)
