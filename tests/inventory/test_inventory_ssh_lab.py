"""`device check --all` and `device trust` across every persona of the virtual SSH lab (one real sshd)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import list_devices
from edgelab.transport import ssh

pytestmark = pytest.mark.ssh
runner = CliRunner()


@pytest.fixture
def lab(request, tmp_path, monkeypatch):
    try:
        info = request.getfixturevalue("ssh_lab")
    except pytest.FixtureLookupError:
        pytest.skip("the ssh_lab fixture (tests/fixtures/ssh_lab.py) is not available")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EDGELAB_HOME", str(home / ".edgelab"))
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(home / "no-sim"))  # trust must come from `device trust` here
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("EDGELAB_DB", raising=False)
    addresses = sorted({d.address for d in info.devices})
    (home / ".ssh" / "config").write_text(
        "".join(f"Host {a}\n  IdentityFile {info.client_key_path}\n" for a in addresses)
    )
    dbmod.dispose_engines()
    ssh.close_all()
    try:
        yield info, tmp_path / "lab.db"
    finally:
        ssh.close_all()
        dbmod.dispose_engines()


def cli(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


def test_check_all_refuses_unknown_keys_then_reaches_every_persona(lab):
    info, db = lab
    names = sorted(d.name for d in info.devices)
    assert names
    for d in info.devices:
        res = cli(
            db,
            "device",
            "add",
            d.name,
            "--ssh",
            f"{info.user}@{d.address}:{d.port}",
            "--shell",
            d.shell,
            "--class",
            d.device_class,
        )
        assert res.exit_code == 0, res.output

    res = cli(db, "device", "check", "--all", "--json", "--timeout", "20")
    assert res.exit_code == 1
    assert {r["name"]: r["state"] for r in json.loads(res.stdout)} == {n: "untrusted" for n in names}
    assert "edgelab device trust" in res.stderr

    for name in names:
        res = cli(db, "device", "trust", name, "--yes", "--json")
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["fingerprint"] == info.host_key_fingerprint

    res = cli(db, "device", "check", "--all", "--json", "--timeout", "20")
    assert res.exit_code == 0, res.output
    assert {r["name"]: r["state"] for r in json.loads(res.stdout)} == {n: "online" for n in names}
    with session_scope(get_engine(str(db)), write=False) as s:
        rows = list_devices(s)
    assert all(r.state == "online" and r.last_seen and r.host_key_fingerprint for r in rows)
