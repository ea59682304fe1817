"""`device import ssh-config` from a real config file into a real SQLite file."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from edgelab.errors import ConfigError
from edgelab.inventory.importers import import_ssh_config, read_ssh_config
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device, get_device, list_devices
from edgelab.store.models import Device

CONFIG = """\
Host Orin_AGX
    HostName 192.168.1.20
    User nvidia
    Port 2222
    IdentityFile ~/.ssh/id_orin

Host thor bastion
    HostName %h.lab.example

Host behind
    HostName 10.1.2.3
    ProxyJump ops@bastion:2022

Host *.corp !nope
    User corp

Host existing
    HostName 10.9.9.9

# OpenSSH: the first value obtained wins, so defaults go last
Host *
    ServerAliveInterval 30
    User defaultuser
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ssh_config"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "inv.db"))
    dbmod.dispose_engines()


def test_read_ssh_config_keeps_concrete_hosts_resolved(config):
    hosts = {h.alias: h for h in read_ssh_config(config)}
    assert set(hosts) == {"Orin_AGX", "thor", "bastion", "behind", "existing"}
    orin = hosts["Orin_AGX"]
    assert (orin.hostname, orin.user, orin.port, orin.proxyjump) == ("192.168.1.20", "nvidia", 2222, None)
    assert (hosts["thor"].hostname, hosts["thor"].user) == ("thor.lab.example", "defaultuser")
    assert hosts["behind"].proxyjump == "ops@bastion:2022"
    assert [h.alias for h in read_ssh_config(config, "b*")] == ["bastion", "behind"]


def test_import_adds_normalized_names_and_skips_known(engine, config):
    with session_scope(engine) as s:
        add_device(s, Device(name="existing", transport="ssh", ssh_host="10.0.0.1"))
    with session_scope(engine) as s:
        report = import_ssh_config(s, config)
    assert sorted(d.name for d in report.added) == ["bastion", "behind", "orin_agx", "thor"]
    assert [n for n, _ in report.skipped] == ["existing"]
    with session_scope(engine) as s:
        orin = get_device(s, "orin_agx")
        behind = get_device(s, "behind")
        assert get_device(s, "existing").ssh_host == "10.0.0.1"  # untouched
        assert len(list_devices(s)) == 5
    assert (orin.ssh_user, orin.ssh_host, orin.ssh_port, orin.transport) == (
        "nvidia",
        "192.168.1.20",
        2222,
        "ssh",
    )
    assert behind.ssh_jump == "ops@bastion:2022"
    # a second import changes nothing
    with session_scope(engine) as s:
        again = import_ssh_config(s, config)
    assert again.added == [] and len(again.skipped) == 5


def test_missing_config_is_a_config_error(tmp_path, engine):
    with pytest.raises(ConfigError) as err, session_scope(engine) as s:
        import_ssh_config(s, tmp_path / "nope")
    assert "--file" in err.value.remedy


@pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")
def test_resolution_agrees_with_openssh(config):
    """`ssh -G` (OpenSSH's own resolver, no connection made) gives the same host, user, port and jump."""
    for host in read_ssh_config(config):
        out = subprocess.run(
            ["ssh", "-G", "-F", str(config), host.alias], capture_output=True, text=True, check=True
        )
        got = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
        assert got["hostname"] == host.hostname.lower()
        assert got["user"] == host.user
        assert int(got["port"]) == (host.port or 22)
        assert got.get("proxyjump") == host.proxyjump


def test_include_is_read_and_an_include_that_names_nothing_is_said(tmp_path, engine):
    """``Include`` was ignored without a word: the included hosts now come in (as OpenSSH reads
    the file), and an Include that matches no file is a note, not silence."""
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    (conf_d / "lab.conf").write_text("Host included-board\n  HostName 10.0.0.77\n  User nvidia\n")
    config = tmp_path / "config"
    config.write_text(
        f"Include {conf_d}/*.conf\nInclude {tmp_path}/nothing-here/*\nHost top\n  HostName 10.0.0.1\n"
    )
    notes: list[str] = []
    hosts = {h.alias: h for h in read_ssh_config(config, notes=notes)}
    assert hosts["included-board"].hostname == "10.0.0.77" and hosts["included-board"].user == "nvidia"
    assert "top" in hosts
    assert any("names no file" in n and f"{config}:2" in n for n in notes), notes
    assert any("lab.conf (Include)" in n for n in notes), notes
    with session_scope(engine) as s:
        report = import_ssh_config(s, config)
    assert "included-board" in [d.name for d in report.added] and any(
        "names no file" in n for n in report.notes
    )
