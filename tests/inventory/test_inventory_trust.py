"""`device check` and `device trust` against a real throwaway sshd: unknown refused, trusted, changed refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transport.test_ssh_hostkeys import SSHD, TmpSshd  # the real-sshd helper of the SSH transport tests
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import get_device
from edgelab.transport import ssh

pytestmark = [pytest.mark.ssh, pytest.mark.skipif(not Path(SSHD).exists(), reason="needs OpenSSH sshd")]
runner = CliRunner()


@pytest.fixture
def lab(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EDGELAB_HOME", str(home / ".edgelab"))
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(home / "no-sim"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("EDGELAB_DB", raising=False)
    dbmod.dispose_engines()
    server = TmpSshd(tmp_path / "sshd").start()
    try:
        # the client key comes from ssh config, as for a real device: nothing secret in the database
        (home / ".ssh" / "config").write_text(f"Host 127.0.0.1\n  IdentityFile {server.client_key}\n")
        yield server, tmp_path / "lab.db", home / ".edgelab" / "known_hosts"
    finally:
        ssh.close_all()
        server.stop()
        dbmod.dispose_engines()


def cli(db, *args, input=None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def row(db):
    with session_scope(get_engine(str(db)), write=False) as s:
        return get_device(s, "dev")


def test_trust_lifecycle(lab):
    server, db, known_hosts = lab
    assert cli(db, "device", "add", "dev", "--ssh", f"{server.user}@127.0.0.1:{server.port}").exit_code == 0

    res = cli(db, "device", "check", "dev", "--json")
    assert res.exit_code == 1
    assert json.loads(res.stdout)[0]["state"] == "untrusted"
    assert "device trust" in res.stderr
    assert row(db).state == "untrusted"

    res = cli(db, "device", "trust", "dev", input="n\n")
    assert res.exit_code == 1 and server.host_key_fingerprint in res.stdout
    assert row(db).host_key_fingerprint is None and not known_hosts.exists()

    res = cli(db, "device", "trust", "dev", "--yes", "--json")
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    assert shown["fingerprint"] == server.host_key_fingerprint and shown["key_type"] == "ssh-ed25519"
    assert (row(db).host_key_fingerprint, row(db).host_key_type) == (
        server.host_key_fingerprint,
        "ssh-ed25519",
    )
    assert server.host_key_line in known_hosts.read_text()

    res = cli(db, "device", "check", "dev")
    assert res.exit_code == 0, res.output
    assert row(db).state == "online" and row(db).last_seen is not None

    old = server.host_key_fingerprint
    ssh.close_all()
    server.new_host_key()
    assert server.host_key_fingerprint != old
    res = cli(db, "device", "check", "dev", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)[0]["state"] != "online"

    res = cli(db, "device", "trust", "dev", "--yes")
    assert res.exit_code == 1
    assert "CHANGED" in res.stdout + res.stderr and "--replace" in res.stderr
    assert row(db).host_key_fingerprint == old

    res = cli(db, "device", "trust", "dev", "--yes", "--replace")
    assert res.exit_code == 0, res.output
    assert row(db).host_key_fingerprint == server.host_key_fingerprint
    assert cli(db, "device", "check", "dev").exit_code == 0
