"""How an SSH endpoint resolves: OpenSSH config files in order, endpoint fields on top, jump chains."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgelab.errors import ConfigError
from edgelab.transport.base import Endpoint
from edgelab.transport.ssh.config import config_files, parse_jump_spec, resolve


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("EDGELAB_HOME", str(h / ".edgelab"))
    monkeypatch.delenv("EDGELAB_SIM_DIR", raising=False)
    monkeypatch.setenv("USER", "operator")
    return h


def ep(**kw) -> Endpoint:
    return Endpoint(name=kw.pop("name", "dev"), kind="ssh", **kw)


def test_user_config_resolves_alias(home: Path) -> None:
    (home / ".ssh" / "config").write_text(
        "Host orin\n  HostName orin.lab.invalid\n  User nvidia\n  Port 2200\n  IdentityFile ~/.ssh/orin_key\n"
        "  ServerAliveInterval 30\n  UserKnownHostsFile ~/.ssh/lab_hosts ~/.ssh/more_hosts\n  IdentitiesOnly yes\n"
    )
    hop = resolve(ep(ssh_host="orin"))
    assert (hop.host, hop.port, hop.user) == ("orin.lab.invalid", 2200, "nvidia")
    assert hop.identity_files == (str(home / ".ssh" / "orin_key"),)
    assert hop.known_hosts == (str(home / ".ssh" / "lab_hosts"), str(home / ".ssh" / "more_hosts"))
    assert hop.keepalive_s == 30 and hop.jump == () and hop.identities_only


def test_endpoint_fields_win_over_config(home: Path) -> None:
    (home / ".ssh" / "config").write_text(
        "Host orin\n  HostName orin.lab.invalid\n  User nvidia\n  Port 2200\n"
    )
    hop = resolve(ep(ssh_host="orin", ssh_user="root", ssh_port=22))
    assert (hop.host, hop.port, hop.user) == ("orin.lab.invalid", 22, "root")


def test_defaults_without_config(home: Path) -> None:
    hop = resolve(ep(ssh_host="bare.lab.invalid"))
    assert (hop.host, hop.port, hop.keepalive_s, hop.jump) == ("bare.lab.invalid", 22, 15.0, ())
    assert hop.user  # the local user name


def test_sim_config_is_read_last_and_explicit_first(home: Path, tmp_path: Path, monkeypatch) -> None:
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "ssh_config").write_text("Host thor\n  HostName 127.0.0.13\n  Port 4022\n  User lab\n")
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(sim))
    (home / ".ssh" / "config").write_text("Host thor\n  User me\n")
    hop = resolve(ep(ssh_host="thor"))
    assert (hop.host, hop.port, hop.user) == ("127.0.0.13", 4022, "me")  # first obtained value wins
    explicit = tmp_path / "explicit"
    explicit.write_text("Host thor\n  Port 5000\n")
    assert resolve(ep(ssh_host="thor"), ssh_config=explicit).port == 5000
    assert config_files(explicit) == [explicit, home / ".ssh" / "config", sim / "ssh_config"]


def test_extra_identity_and_known_hosts(home: Path) -> None:
    hop = resolve(
        ep(ssh_host="h", extra={"identity_file": "/k/id", "known_hosts": "/k/kh"}), known_hosts="/x/kh"
    )
    assert hop.identity_files == ("/k/id",)
    assert hop.known_hosts == ("/k/kh", "/x/kh")


def test_proxyjump_chain_from_config(home: Path) -> None:
    (home / ".ssh" / "config").write_text(
        "Host bastion\n  HostName bastion.lab.invalid\n  User jump\n"
        "Host inner\n  HostName inner.lab.invalid\n  ProxyJump bastion,relay:2201\n"
        "Host relay\n  HostName relay.lab.invalid\n  User relay\n"
    )
    hop = resolve(ep(ssh_host="inner", host_key_fingerprint="SHA256:x"))
    assert hop.host == "inner.lab.invalid" and hop.expected_fingerprint == "SHA256:x"
    (relay,) = hop.jump
    assert (relay.host, relay.port, relay.user, relay.expected_fingerprint) == (
        "relay.lab.invalid",
        2201,
        "relay",
        None,
    )
    (bastion,) = relay.jump
    assert (bastion.host, bastion.port, bastion.user, bastion.jump) == ("bastion.lab.invalid", 22, "jump", ())
    assert hop.pool_key != resolve(ep(ssh_host="inner.lab.invalid")).pool_key


def test_endpoint_jump_wins_and_none_disables(home: Path) -> None:
    (home / ".ssh" / "config").write_text("Host inner\n  ProxyJump bastion\n")
    assert resolve(ep(ssh_host="inner", ssh_jump="me@other:2022")).jump[0].host == "other"
    assert resolve(ep(ssh_host="inner", ssh_jump="none")).jump == ()


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("host", (None, "host", None)),
        ("u@host:2222", ("u", "host", 2222)),
        ("ssh://u@host:2", ("u", "host", 2)),
        ("[::1]:2200", (None, "::1", 2200)),
        ("u@[fe80::1]", ("u", "fe80::1", None)),
    ],
)
def test_parse_jump_spec(spec, expected) -> None:
    assert parse_jump_spec(spec) == expected


@pytest.mark.parametrize("spec", ["u@", "host:port"])
def test_bad_jump_spec(spec) -> None:
    with pytest.raises(ConfigError):
        parse_jump_spec(spec)


def test_device_stored_by_address_finds_keys_of_its_named_block(home: Path) -> None:
    (home / ".ssh" / "config").write_text(
        "Host orin-agx\n  HostName 127.0.0.11\n  Port 2222\n  IdentityFile /lab/key\n"
        "  UserKnownHostsFile /lab/known_hosts\n"
    )
    hop = resolve(ep(name="orin-agx", ssh_host="127.0.0.11", ssh_port=4000))
    assert (hop.host, hop.port) == ("127.0.0.11", 4000)
    assert hop.identity_files == ("/lab/key",) and hop.known_hosts == ("/lab/known_hosts",)
    assert resolve(ep(name="other", ssh_host="127.0.0.11")).identity_files == ()


def test_include_is_expanded_in_place(home: Path) -> None:
    (home / ".ssh" / "config.d").mkdir()
    (home / ".ssh" / "config.d" / "lab.conf").write_text(
        "Host jetson\n  HostName jetson.lab.invalid\n  Port 2022\n"
    )
    (home / ".ssh" / "config").write_text("Include config.d/*.conf\nHost *\n  User everyone\n")
    hop = resolve(ep(ssh_host="jetson"))
    assert (hop.host, hop.port, hop.user) == ("jetson.lab.invalid", 2022, "everyone")
