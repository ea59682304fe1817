"""``resolve_openssh`` (OpenSSH's ``ssh -G``) gives the Hop paramiko's ``resolve`` gives, and where
the two read a config differently, the difference is the one its docstring names."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgelab.errors import ConfigError
from edgelab.sim.lab import ssh_endpoint as lab_endpoint
from edgelab.sim.sshd import SshDevice, SshLabInfo, client_config
from edgelab.transport.base import Endpoint
from edgelab.transport.ssh.config import Hop, resolve, resolve_openssh

SSH = shutil.which("ssh")
ACCOUNT = pwd.getpwuid(os.getuid())
pytestmark = pytest.mark.skipif(SSH is None, reason="no OpenSSH client (ssh) on PATH to run ssh -G")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("EDGELAB_HOME", str(h / ".edgelab"))
    monkeypatch.delenv("EDGELAB_SIM_DIR", raising=False)
    # ssh's default User is the passwd name, paramiko's getpass.getuser(): one name, as on a real host
    monkeypatch.setenv("USER", ACCOUNT.pw_name)
    monkeypatch.setenv("LOGNAME", ACCOUNT.pw_name)
    return h


def ep(**kw) -> Endpoint:
    return Endpoint(name=kw.pop("name", "dev"), kind="ssh", **kw)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def both(endpoint: Endpoint, **kw) -> Hop:
    """The Hop of each resolver; asserts they are equal field by field, returns it."""
    by_paramiko = resolve(endpoint, **kw)
    by_openssh = resolve_openssh(endpoint, binary=SSH, **kw)
    assert by_openssh == by_paramiko
    return by_openssh


def test_importing_the_resolver_loads_no_paramiko() -> None:
    code = "import sys, edgelab.transport.ssh.config; print('paramiko' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plain_block_every_field(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg",
        "Host orin\n  HostName orin.lab.invalid\n  Port 2200\n  User nvidia\n"
        "  IdentityFile ~/.ssh/orin_key\n  IdentityFile /keys/second\n  IdentitiesOnly yes\n"
        "  UserKnownHostsFile /lab/known_hosts /lab/more_hosts\n  ServerAliveInterval 30\n"
        "  ConnectTimeout 7\n  HostKeyAlias orin-key\n",
    )
    hop = both(ep(ssh_host="orin"), ssh_config=cfg)
    assert (hop.host, hop.port, hop.user) == ("orin.lab.invalid", 2200, "nvidia")
    assert hop.identity_files == (str(home / ".ssh" / "orin_key"), "/keys/second")
    assert hop.known_hosts == ("/lab/known_hosts", "/lab/more_hosts")
    assert (hop.keepalive_s, hop.connect_timeout, hop.host_key_alias) == (30.0, 7.0, "orin-key")
    assert hop.identities_only and hop.jump == ()


def test_wildcard_defaults_after_a_specific_block(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg",
        "Host orin\n  User nvidia\n  Port 2200\nHost *\n  User everyone\n  Port 2022\n"
        "  IdentityFile /keys/all\n  ServerAliveInterval 5\n",
    )
    hop = both(ep(ssh_host="orin"), ssh_config=cfg)
    assert (hop.user, hop.port, hop.identity_files, hop.keepalive_s) == ("nvidia", 2200, ("/keys/all",), 5.0)
    other = both(ep(ssh_host="thor"), ssh_config=cfg)
    assert (other.user, other.port) == ("everyone", 2022)


def test_host_negation(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", "Host *.lab !bad.lab\n  User labuser\nHost *\n  User other\n")
    assert both(ep(ssh_host="good.lab"), ssh_config=cfg).user == "labuser"
    assert both(ep(ssh_host="bad.lab"), ssh_config=cfg).user == "other"


def test_match_host_sees_the_hostname(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg",
        "Host orin\n  HostName orin.lab.invalid\nMatch host *.lab.invalid\n  User matched\n  Port 2300\n",
    )
    hop = both(ep(ssh_host="orin"), ssh_config=cfg)
    assert (hop.host, hop.user, hop.port) == ("orin.lab.invalid", "matched", 2300)
    assert both(ep(ssh_host="elsewhere"), ssh_config=cfg).port == 22


def test_include_relative_and_absolute(home: Path, tmp_path: Path) -> None:
    (home / ".ssh" / "config.d").mkdir()
    write(
        home / ".ssh" / "config.d" / "lab.conf", "Host jetson\n  HostName jetson.lab.invalid\n  Port 2022\n"
    )
    write(tmp_path / "abs.conf", "Host thor\n  HostName thor.lab.invalid\n  User thor\n")
    write(
        home / ".ssh" / "config",
        f'Include config.d/*.conf\nInclude "{tmp_path / "abs.conf"}"\nHost *\n  User everyone\n',
    )
    hop = both(ep(ssh_host="jetson"))
    assert (hop.host, hop.port, hop.user) == ("jetson.lab.invalid", 2022, "everyone")
    hop = both(ep(ssh_host="thor"))
    assert (hop.host, hop.user) == ("thor.lab.invalid", "thor")


def test_files_in_precedence_order(home: Path, tmp_path: Path, monkeypatch) -> None:
    sim = tmp_path / "sim"
    sim.mkdir()
    write(sim / "ssh_config", "Host thor\n  HostName 127.0.0.13\n  Port 4022\n  User lab\n")
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(sim))
    write(home / ".ssh" / "config", "Host thor\n  User me\n")
    explicit = write(tmp_path / "explicit", "Host thor\n  Port 5000\n")
    assert (both(ep(ssh_host="thor")).user, both(ep(ssh_host="thor")).port) == ("me", 4022)
    assert both(ep(ssh_host="thor"), ssh_config=explicit).port == 5000


def test_proxyjump_chain_resolves_each_jump_as_a_hop(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg",
        "Host bastion\n  HostName bastion.lab.invalid\n  User jump\n  IdentityFile /keys/bastion\n"
        "Host inner\n  HostName inner.lab.invalid\n  ProxyJump bastion,relay:2201\n"
        "Host relay\n  HostName relay.lab.invalid\n  User relay\n",
    )
    hop = both(
        ep(ssh_host="inner", host_key_fingerprint="SHA256:x", extra={"identity_file": "/k/id"}),
        ssh_config=cfg,
    )
    (relay,) = hop.jump
    assert (relay.host, relay.port, relay.user, relay.expected_fingerprint) == (
        "relay.lab.invalid",
        2201,
        "relay",
        None,
    )
    (bastion,) = relay.jump
    assert (bastion.host, bastion.user, bastion.identity_files) == (
        "bastion.lab.invalid",
        "jump",
        ("/k/id", "/keys/bastion"),
    )
    assert hop.expected_fingerprint == "SHA256:x"


def test_endpoint_fields_win_over_config(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg",
        "Host orin\n  HostName orin.lab.invalid\n  User nvidia\n  Port 2200\n  ProxyJump bastion\n",
    )
    hop = both(ep(ssh_host="orin", ssh_user="root", ssh_port=22, ssh_jump="me@other:2022"), ssh_config=cfg)
    assert (hop.host, hop.port, hop.user) == ("orin.lab.invalid", 22, "root")
    assert (hop.jump[0].host, hop.jump[0].port, hop.jump[0].user) == ("other", 2022, "me")
    assert both(ep(ssh_host="orin", ssh_jump="none"), ssh_config=cfg).jump == ()


def test_extra_keys_and_known_hosts_come_first(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", "Host h\n  IdentityFile /cfg/id\n  UserKnownHostsFile /cfg/kh\n")
    hop = both(
        ep(ssh_host="h", extra={"identity_file": "/k/id", "known_hosts": "/k/kh"}),
        ssh_config=cfg,
        known_hosts="/x/kh",
    )
    assert hop.identity_files == ("/k/id", "/cfg/id")
    assert hop.known_hosts == ("/k/kh", "/x/kh", "/cfg/kh")


def test_device_stored_by_address_finds_its_named_block(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg",
        "Host orin-agx\n  HostName 127.0.0.11\n  Port 2222\n  IdentityFile /lab/key\n  UserKnownHostsFile /lab/known_hosts\n",
    )
    hop = both(ep(name="orin-agx", ssh_host="127.0.0.11", ssh_port=4000), ssh_config=cfg)
    assert (hop.host, hop.port) == ("127.0.0.11", 4000)
    assert hop.identity_files == ("/lab/key",) and hop.known_hosts == ("/lab/known_hosts",)
    assert both(ep(name="other", ssh_host="127.0.0.11"), ssh_config=cfg).identity_files == ()


def test_no_config_at_all(home: Path) -> None:
    hop = both(ep(ssh_host="bare.lab.invalid"))
    assert (hop.host, hop.port, hop.user, hop.keepalive_s, hop.identity_files, hop.known_hosts) == (
        "bare.lab.invalid",
        22,
        ACCOUNT.pw_name,
        15.0,
        (),
        (),
    )


def test_identity_tokens_both_expand(home: Path, tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "cfg", "Host orin\n  HostName o.lab\n  User bob\n  IdentityFile %d/keys/%h-%r-%u\n"
    )
    assert both(ep(ssh_host="orin"), ssh_config=cfg).identity_files == (
        f"{home}/keys/o.lab-bob-{ACCOUNT.pw_name}",
    )


@pytest.mark.parametrize(
    "text,alias",
    [
        ("Host orin\n  HostName orin.lab\nMatch originalhost orin\n  Port 2001\n", "orin"),
        ("Host orin\n  User nvidia\nMatch user nvidia\n  Port 2002\n", "orin"),
        (f"Match localuser {ACCOUNT.pw_name}\n  Port 2003\n", "orin"),
        ("Match all\n  Port 2004\n", "orin"),
        ("Match final\n  User fin\n", "orin"),
        ("Host=orin\n  Port=2005\n  IdentityFile = /k/eq\n", "orin"),
        ("# a comment\nHost a orin b # trailing\n  Port 2006\n", "orin"),
        ("Host orin\n  Port 2000\n", "ORIN"),  # Host patterns see the alias as given, under both
        (
            "Host inner\n  ProxyJump relay\nHost relay\n  HostName relay.lab\n  ProxyJump bastion\n"
            "Host bastion\n  User b\n",
            "inner",
        ),
    ],
)
def test_more_config_forms_agree(home: Path, tmp_path: Path, text: str, alias: str) -> None:
    both(ep(ssh_host=alias), ssh_config=write(tmp_path / "cfg", text))


def test_the_virtual_labs_generated_config(home: Path, tmp_path: Path, monkeypatch) -> None:
    state = tmp_path / "lab state"  # a space in the path: the config quotes it, ssh -G prints it bare
    state.mkdir()
    user = ACCOUNT.pw_name
    info = SshLabInfo(
        pid=0,
        port=2222,
        user=user,
        client_key_path=state / "ssh" / "client_key",
        host_key_fingerprint="SHA256:lab",
        host_key_type="ssh-ed25519",
        host_public_key_line="",
        devices=[
            SshDevice("orin-agx", "127.0.0.11", 2222, "posix", "jetson"),
            SshDevice("thor", "127.0.0.13", 2222, "posix", "jetson"),
        ],
        state_dir=state,
        ssh_config_path=state / "ssh_config",
        known_hosts_path=state / "known_hosts",
    )
    write(state / "ssh_config", client_config(info))
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(state))
    by_alias = both(ep(name="orin-agx"))
    assert (by_alias.host, by_alias.port, by_alias.identities_only) == ("127.0.0.11", 2222, True)
    assert by_alias.identity_files == (str(state / "ssh" / "client_key"),)
    assert by_alias.known_hosts == (str(state / "known_hosts"),)
    stored = both(lab_endpoint(info, "thor"))
    assert (stored.host, stored.port, stored.expected_fingerprint) == ("127.0.0.13", 2222, "SHA256:lab")
    # the named block's trust file, whole (extra's plain path is shlex-split by both resolvers alike)
    assert str(state / "known_hosts") in stored.known_hosts


# ---------------------------------------------------------------- refusals


def test_a_config_ssh_rejects_is_a_config_error(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", "Host orin\n  Port 2200\n  NoSuchOption yes\n")
    assert resolve(ep(ssh_host="orin"), ssh_config=cfg).port == 2200  # paramiko ignores the option
    with pytest.raises(ConfigError, match="Bad configuration option: nosuchoption") as err:
        resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=cfg)
    assert err.value.remedy


def test_a_bad_port_is_a_config_error_for_both(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", "Host orin\n  Port many\n")
    with pytest.raises(ConfigError):
        resolve(ep(ssh_host="orin"), ssh_config=cfg)
    with pytest.raises(ConfigError, match="many"):
        resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=cfg)


def test_a_config_others_can_write_is_refused_by_ssh(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", "Host orin\n  Port 2200\n")
    cfg.chmod(0o666)
    assert resolve(ep(ssh_host="orin"), ssh_config=cfg).port == 2200
    with pytest.raises(ConfigError, match="Bad owner or permissions"):
        resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=cfg)


def test_a_slow_match_exec_times_out(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", 'Match exec "sleep 5"\n  User slow\n')
    with pytest.raises(ConfigError, match="did not answer"):
        resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=cfg, timeout=0.5)


def test_a_missing_binary_is_a_config_error(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "cfg", "Host orin\n  Port 2200\n")
    with pytest.raises(ConfigError, match="cannot run"):
        resolve_openssh(ep(ssh_host="orin"), binary=str(tmp_path / "no-ssh"), ssh_config=cfg)


@pytest.mark.parametrize("alias", ["me@orin", "-oProxyCommand=true"])
def test_an_alias_ssh_would_read_as_more_is_refused(home: Path, tmp_path: Path, alias: str) -> None:
    cfg = write(tmp_path / "cfg", "Host orin\n  Port 2200\n")
    with pytest.raises(ConfigError, match="not a plain host name"):
        resolve_openssh(ep(ssh_host=alias), binary=SSH, ssh_config=cfg)


def test_a_config_path_an_include_cannot_name_is_refused(home: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "odd[1]", "Host orin\n  Port 2200\n")
    assert resolve(ep(ssh_host="orin"), ssh_config=cfg).port == 2200
    with pytest.raises(ConfigError, match="cannot be named in an OpenSSH Include"):
        resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=cfg)


def test_the_temporary_config_is_removed(home: Path, tmp_path: Path, monkeypatch) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    cfg = write(tmp_path / "cfg", "Host orin\n  Port 2200\n")
    assert resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=cfg).port == 2200
    with pytest.raises(ConfigError):
        resolve_openssh(ep(ssh_host="orin"), binary=SSH, ssh_config=write(cfg, "Bogus 1\n"))
    assert list(scratch.iterdir()) == []


# ---------------------------------------------------------------- where ssh and paramiko differ


def test_differences_ssh_follows_openssh(home: Path, tmp_path: Path, monkeypatch) -> None:
    """Each line: what paramiko's resolve gives, then what ssh -G gives (the docstring's list)."""

    def pair(text: str, **kw) -> tuple[Hop, Hop]:
        cfg = write(tmp_path / "cfg", text)
        endpoint = ep(ssh_host=kw.pop("alias", "orin"))
        return resolve(endpoint, ssh_config=cfg), resolve_openssh(endpoint, binary=SSH, ssh_config=cfg)

    p, o = pair("Host orin\n  ServerAliveInterval 0\n")  # equal to ssh's default: unset
    assert (p.keepalive_s, o.keepalive_s) == (0.0, 15.0)
    p, o = pair("Host orin\n  ServerAliveInterval 1m\n  ConnectTimeout 2m\n")  # ssh's time units
    assert (p.keepalive_s, p.connect_timeout, o.keepalive_s, o.connect_timeout) == (15.0, None, 60.0, 120.0)
    p, o = pair("Host ORIN\n  HostName Orin.Lab.Invalid\n", alias="ORIN")  # ssh lower-cases HostName
    assert (p.host, o.host) == ("Orin.Lab.Invalid", "orin.lab.invalid")
    p, o = pair("Host orin\n  IdentityFile /keys/%h-%p\n  Port 2200\n")  # %p: only ssh expands it
    assert (p.identity_files, o.identity_files) == (("/keys/orin-%p",), ("/keys/orin-2200",))
    p, o = pair("Host orin\n  HostKeyAlias k1\n  IdentityFile /k/%n-%k-%%-%i\n")
    assert (p.identity_files, o.identity_files) == (("/k/%n-%k-%%-%i",), (f"/k/orin-k1-%-{os.getuid()}",))
    p, o = pair("Host orin\n  Port 2200\n")  # no User: ssh's default is the passwd name
    assert p.user == o.user == ACCOUNT.pw_name
    monkeypatch.setenv("LOGNAME", "operator")
    p, o = pair("Host orin\n  Port 2200\n")
    assert (p.user, o.user) == ("operator", ACCOUNT.pw_name)
    p, o = pair("Host orin\n  UserKnownHostsFile ~/.ssh/lab_hosts\n")  # ssh: the passwd home
    assert p.known_hosts == (str(home / ".ssh" / "lab_hosts"),)
    assert o.known_hosts == (os.path.join(ACCOUNT.pw_dir, ".ssh", "lab_hosts"),)
