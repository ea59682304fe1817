"""Operator-typed addresses: parsed exactly, passwords refused before anything is stored."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgelab.errors import ConfigError
from edgelab.inventory.address import (
    SshAddress,
    parse_adb_serial,
    parse_adb_server,
    parse_jump,
    parse_ssh_address,
)
from edgelab.inventory.build import adb_device, ssh_device


@pytest.mark.parametrize(
    "text, want",
    [
        ("host", SshAddress(None, "host", None)),
        ("nvidia@192.168.1.20", SshAddress("nvidia", "192.168.1.20", None)),
        ("nvidia@orin.lab:2222", SshAddress("nvidia", "orin.lab", 2222)),
        ("127.0.0.11:22", SshAddress(None, "127.0.0.11", 22)),
        ("ssh://u@h:7", SshAddress("u", "h", 7)),
        ("[::1]:2200", SshAddress(None, "::1", 2200)),
        ("root@::1", SshAddress("root", "::1", None)),
        ("DOMAIN_user@win-box", SshAddress("DOMAIN_user", "win-box", None)),
    ],
)
def test_parse_ssh_address(text, want):
    assert parse_ssh_address(text) == want


@pytest.mark.parametrize(
    "text", ["", "@h", "u@", "h:0", "h:70000", "h:x", "a b", "h;rm -rf /", "u@h$(id)", "[::1", "[::1]x"]
)
def test_bad_ssh_addresses(text):
    with pytest.raises(ConfigError) as err:
        parse_ssh_address(text)
    assert err.value.remedy


def test_password_in_address_is_refused_and_not_echoed():
    with pytest.raises(ConfigError) as err:
        parse_ssh_address("root:hunter2@jetson")
    assert "password" in str(err.value)
    assert "hunter2" not in str(err.value) and "hunter2" not in err.value.remedy


@given(
    user=st.from_regex(r"[a-z_][a-z0-9_-]{0,10}", fullmatch=True),
    host=st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True),
    port=st.one_of(st.none(), st.integers(1, 65535)),
)
def test_address_round_trips(user, host, port):
    addr = SshAddress(user, host, port)
    assert parse_ssh_address(str(addr)) == addr


def test_jump_chain_and_adb_server():
    assert parse_jump("bastion, u@gw:2022") == "bastion,u@gw:2022"
    with pytest.raises(ConfigError):
        parse_jump("a,,b")
    with pytest.raises(ConfigError):
        parse_jump("u:pw@gw")
    assert parse_adb_server("labhost") == "labhost:5037"
    assert parse_adb_server("10.0.0.2:5038") == "10.0.0.2:5038"
    assert parse_adb_server("[::1]:6000") == "[::1]:6000"
    for bad in ("u:p@h:5037", "h:99999", "h h"):
        with pytest.raises(ConfigError):
            parse_adb_server(bad)
    assert parse_adb_serial(" R5CX1234 ") == "R5CX1234"
    with pytest.raises(ConfigError):
        parse_adb_serial("two words")


def test_builders_apply_defaults_and_validate():
    d = ssh_device("orin", "nvidia@h:2222", jump="gw", device_class="jetson", tags=["b", "a"])
    assert (d.transport, d.ssh_user, d.ssh_host, d.ssh_port, d.ssh_jump, d.shell, d.tags) == (
        "ssh",
        "nvidia",
        "h",
        2222,
        "gw",
        "posix",
        ["a", "b"],
    )
    a = adb_device("s25", "127.0.0.1:5586", adb_server="labhost")
    assert (a.shell, a.adb_server) == ("toybox", "labhost:5037")
    with pytest.raises(ConfigError):
        ssh_device("orin", "h", device_class="mainframe")
    with pytest.raises(ConfigError):
        ssh_device("orin", "h", shell="cmd")
    with pytest.raises(ConfigError):
        ssh_device("Orin!", "h")


@pytest.mark.parametrize(
    "text,want",
    [
        ("ssh://bob@labhost2", "ssh://bob@labhost2/5037"),
        ("ssh://labhost2:2222/5038", "ssh://labhost2:2222/5038"),
        ("SSH://bob@10.0.0.2/5037", "ssh://bob@10.0.0.2/5037"),
        ("ssh://[fd00::2]:22", "ssh://[fd00::2]:22/5037"),
    ],
)
def test_adb_server_through_ssh_is_normalised(text, want):
    from edgelab.transport.adb import tunnel as adb_tunnel

    assert parse_adb_server(text) == want
    spec = adb_tunnel.parse(want)
    assert str(spec) == want and adb_tunnel.is_tunnel(want)
    ep = spec.endpoint()
    assert (
        ep.kind == "ssh"
        and ep.ssh_host == spec.host
        and ep.ssh_port == spec.port
        and ep.ssh_user == spec.user
    )


@pytest.mark.parametrize(
    "text", ["ssh://bob:pw1234@labhost2", "ssh://labhost2/99999", "ssh://labhost2/x", "ssh://"]
)
def test_bad_adb_servers_through_ssh_are_refused_without_the_password(text):
    with pytest.raises(ConfigError) as err:
        parse_adb_server(text)
    assert "pw1234" not in str(err.value)
    with pytest.raises(ConfigError):  # the row validator refuses it too, whatever built the row
        adb_device("p", "R5CX1", adb_server=text)
