"""Devices on another lab host: a second lab host made here (edgelab.sim.labhost: a network namespace
with its own adb server and phones, and an sshd that is the only way to the SSH device behind it).

Reached three ways, as a shared lab reaches them: the adb server by address (``--adb-server
10.A.B.2:5037``), the adb server on that host's loopback through an SSH tunnel (``--adb-server
ssh://labhost2``), and an SSH device behind the jump host (``--jump labhost2``, and ``ProxyJump``
from ~/.ssh/config through ``device import ssh-config``). Keys authenticate every hop (the test's
~/.ssh/config names them); nothing secret is in the database; the lab host's key is refused until
trusted. `device check`, `probe`, `push`, `reserve` and `deploy` then work across both lab hosts.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.sim import labhost

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]
runner = CliRunner()
NS_DEVICES = ["lh2-s25", "lh2-rb3g2", "lh2-orin", "lh2-orin-cfg"]


@pytest.fixture(scope="module")
def lh2(tmp_path_factory, ssh_lab, adb_lab):
    """(LabHost, db url, env): labhost2 running, the primary lab registered, labhost2's devices added by CLI."""
    from edgelab.sim.lab import LabStatus, register
    from edgelab.store import db as dbmod

    reason = labhost.unavailable()
    if reason:
        pytest.skip(f"no second lab host here: {reason}")
    base = tmp_path_factory.mktemp("labhost2")
    host = labhost.start(base / "lab")
    try:
        home = base / "home"
        (home / ".ssh").mkdir(parents=True)
        inside = host.ssh.device("orin-agx")
        (home / ".ssh" / "config").write_text(
            f"Host labhost2\n    HostName {host.address}\n    User {host.user}\n\n"
            f"Host lh2-orin-cfg\n    HostName {inside.address}\n    Port {inside.port}\n    User {host.user}\n"
            "    ProxyJump labhost2\n\n"
            f"Host *\n    IdentityFile {host.client_key_path}\n"
        )
        url = f"sqlite:///{base / 'lab.db'}"
        register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
        env = {
            **os.environ,
            "EDGELAB_DB": url,
            "HOME": str(home),
            "EDGELAB_HOME": str(base / "edgelab-home"),
            "EDGELAB_SIM_DIR": str(ssh_lab.state_dir),
            "COLUMNS": "300",
        }
        env.pop("EDGELAB_LEASE", None)
        env.pop("SSH_AUTH_SOCK", None)
        s25, rb3g2 = host.adb.device("s25"), host.adb.device("rb3g2")
        for args in (
            ["lh2-s25", "--adb", s25.serial, "--adb-server", host.adb_server],
            ["lh2-rb3g2", "--adb", rb3g2.serial, "--adb-server", "ssh://labhost2"],
            [
                "lh2-orin",
                "--ssh",
                f"{host.user}@{inside.address}:{inside.port}",
                "--jump",
                "labhost2",
                "--class",
                "jetson",
            ],
        ):
            out = runner.invoke(app, ["device", "add", *args], env=env)
            assert out.exit_code == 0, out.output
        out = runner.invoke(app, ["device", "import", "ssh-config", "--pattern", "lh2-*"], env=env)
        assert out.exit_code == 0 and "added lh2-orin-cfg" in out.output, out.output
        _mark_virtual(url, NS_DEVICES)
        yield host, url, env
    finally:
        from edgelab.transport.adb import tunnel as adb_tunnel
        from edgelab.transport.ssh import close_all

        adb_tunnel.close_all()
        close_all()
        dbmod.dispose_engines()
        labhost.stop(base / "lab")


def _mark_virtual(url: str, names: list[str]) -> None:
    """They are the lab's personas, added as an operator adds devices: say so, as `sim up` does for its own
    (a virtual device runs the reference runtime with random weights and never qualifies anything)."""
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import get_device

    with session_scope(get_engine(url)) as s:
        for name in names:
            get_device(s, name).virtual = True


def _fresh_connections() -> None:
    """No pooled SSH connection or adb tunnel of earlier tests: a refusal must come from the handshake."""
    from edgelab.transport.adb import tunnel as adb_tunnel
    from edgelab.transport.ssh import close_all

    adb_tunnel.close_all()
    close_all()


def cli(env, *args):
    return runner.invoke(app, list(args), env=env)


@pytest.fixture(scope="module")
def trusted(lh2):
    """labhost2's key, then the jump device's own, trusted the way an operator does it (device trust)."""
    host, _url, env = lh2
    offers = []
    for name in ("lh2-rb3g2", "lh2-orin", "lh2-orin-cfg"):
        while True:
            out = cli(env, "device", "trust", name, "--yes", "--json")
            assert out.exit_code == 0, out.output
            offer = json.loads(out.stdout)
            offers.append(offer)
            if offer["via"] is None or name == "lh2-rb3g2":
                break
    return offers


def test_the_lab_host_key_is_refused_until_trusted_and_trust_shows_its_fingerprint(lh2, trusted, tmp_path):
    host, _url, env = lh2
    fresh = {**env, "EDGELAB_HOME": str(tmp_path / "nobody-trusted-anything")}
    _fresh_connections()
    out = cli(fresh, "device", "check", "lh2-rb3g2", "lh2-orin", "--json")
    assert out.exit_code == 1
    states = {r["name"]: r for r in json.loads(out.stdout)}
    assert {r["state"] for r in states.values()} == {"untrusted"}, states
    assert host.gateway_fingerprint in json.dumps(states)  # refused naming the key it saw
    # what the operator was shown and trusted: labhost2's key first (known_hosts only), then the device's
    gateway, device = trusted[0], trusted[1]
    assert gateway["via"] == "labhost2" and gateway["fingerprint"] == host.gateway_fingerprint
    assert gateway["host"] == host.address and gateway["port"] == 22
    assert gateway["name"] == "lh2-rb3g2" and device["name"] == "lh2-orin"
    assert device["via"] is None and device["fingerprint"] == host.ssh.host_key_fingerprint
    assert trusted[2]["name"] == "lh2-orin-cfg" and trusted[2]["fingerprint"] == host.ssh.host_key_fingerprint


def test_the_device_behind_the_jump_host_is_not_reachable_from_here(lh2):
    host, _url, _env = lh2
    inside = host.ssh.device("orin-agx")
    with pytest.raises(OSError):  # 127.0.0.11 here is this host's loopback, where nothing serves that port
        with socket.create_connection((inside.address, inside.port), timeout=3) as s:
            assert not s.recv(4).startswith(b"SSH")
            raise OSError("something else answered")


def test_no_credential_of_a_hop_is_stored(lh2):
    from sqlalchemy import text

    from edgelab.store.db import get_engine

    _host, url, _env = lh2
    with get_engine(url).connect() as c:
        rows = c.execute(
            text("SELECT name, ssh_jump, adb_server, ssh_user FROM device WHERE name LIKE 'lh2-%'")
        ).all()
    got = {r.name: (r.ssh_jump, r.adb_server) for r in rows}
    assert got["lh2-orin"][0] == "labhost2" and got["lh2-orin-cfg"][0] == "labhost2"
    assert got["lh2-rb3g2"][1] == "ssh://labhost2/5037"
    out = cli(
        _env, "device", "add", "x", "--adb", "1.2.3.4:5555", "--adb-server", "ssh://me:hunter2pw@labhost2"
    )
    assert out.exit_code == 2 and "hunter2pw" not in out.output


def test_check_and_probe_across_both_lab_hosts(lh2, trusted):
    _host, _url, env = lh2
    names = [*NS_DEVICES, "s25", "orin-agx"]
    out = cli(env, "device", "check", *names, "--timeout", "20", "--json")
    assert out.exit_code == 0, out.output
    assert {r["name"]: r["state"] for r in json.loads(out.stdout)} == dict.fromkeys(names, "online")
    out = cli(env, "probe", "lh2-s25", "lh2-rb3g2", "lh2-orin", "--json")
    assert out.exit_code == 0, out.output
    facts = {r["name"]: r for r in json.loads(out.stdout)}
    assert set(facts) == {"lh2-s25", "lh2-rb3g2", "lh2-orin"}, facts
    assert all(r["ok"] for r in facts.values()), facts


def test_shell_runs_inside_the_second_lab_host(lh2, trusted):
    """A command on a labhost2 device runs in labhost2's network namespace (it sees eth0 with its address)."""
    host, _url, env = lh2
    for name in ("lh2-orin", "lh2-rb3g2"):
        out = cli(env, "shell", name, "--", "cat", "/proc/net/fib_trie")
        assert out.exit_code == 0, out.output
        assert host.address in out.stdout and host.peer not in out.stdout, name


def test_push_to_both_lab_hosts_is_verified(lh2, trusted, tmp_path):
    _host, _url, env = lh2
    blob = tmp_path / "w.bin"
    blob.write_bytes(os.urandom(300_000))
    out = cli(env, "artifact", "add", str(blob), "--kind", "other", "--target", "any")
    assert out.exit_code == 0, out.output
    out = cli(env, "push", "w.bin", "-d", "lh2-rb3g2", "-d", "lh2-orin", "-d", "s25", "--verify", "--json")
    assert out.exit_code == 0, out.output
    res = {r["device"]: r for r in json.loads(out.stdout)}
    assert set(res) == {"lh2-rb3g2", "lh2-orin", "s25"} and all(r["ok"] for r in res.values()), res
    again = cli(env, "push", "w.bin", "-d", "lh2-rb3g2", "-d", "lh2-orin", "--verify", "--json")
    assert {b["status"] for r in json.loads(again.stdout) for b in r["blobs"]} == {"verified"}


def test_reserve_across_both_lab_hosts_and_others_are_refused(lh2, trusted):
    _host, _url, env = lh2
    out = cli(
        {**env, "EDGELAB_OWNER": "alice@lab1"},
        "reserve",
        "lh2-s25",
        "lh2-orin",
        "s25",
        "--for",
        "5m",
        "--json",
    )
    assert out.exit_code == 0, out.output
    lease = json.loads(out.stdout)
    try:
        other = cli({**env, "EDGELAB_OWNER": "bob@lab2"}, "reserve", "lh2-orin", "--for", "5m")
        assert other.exit_code == 1 and "alice@lab1" in other.output
        # the same SSH device imported from ProxyJump is the same device for leasing
        same = cli({**env, "EDGELAB_OWNER": "bob@lab2"}, "reserve", "lh2-orin-cfg", "--for", "5m")
        assert same.exit_code == 1 and "alice@lab1" in same.output
        free = cli({**env, "EDGELAB_OWNER": "bob@lab2"}, "reserve", "lh2-rb3g2", "--for", "5m", "--json")
        assert free.exit_code == 0, free.output
        assert (
            cli({**env, "EDGELAB_OWNER": "bob@lab2"}, "release", json.loads(free.stdout)["id"]).exit_code == 0
        )
    finally:
        assert cli({**env, "EDGELAB_OWNER": "alice@lab1"}, "release", lease["id"]).exit_code == 0


@pytest.mark.parametrize("device,pipeline", [("lh2-rb3g2", "qwen3-tts"), ("lh2-orin", "qwen3-tts-1.7b")])
def test_deploy_on_the_second_lab_host_runs_there_and_stops(lh2, trusted, device, pipeline):
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.deployments import get_deployment, processes

    host, url, env = lh2
    assert cli(env, "probe", device).exit_code == 0
    out = cli(env, "deploy", pipeline, "--device", device, "--json")
    assert out.exit_code == 0, out.output
    dep = json.loads(out.stdout)
    run = dep["run"]
    try:
        assert dep["state"] == "running" and [p["phase"] for p in dep["phases"]][:3] == [
            "admitted",
            "connected",
            "pushed",
        ]
        with session_scope(get_engine(url), write=False) as s:
            pids = [p.pid for p in processes(s, get_deployment(s, run).id)]
        assert pids and set(pids) <= set(_netns_pids(host.netns)), pids  # it runs on labhost2, nowhere else
        logs = cli(env, "logs", run)
        assert logs.exit_code == 0 and json.loads(logs.stdout.splitlines()[0])["device"] == device, (
            logs.output
        )
    finally:
        stop = cli(env, "stop", run, "--json")
    assert stop.exit_code == 0, stop.output
    assert json.loads(stop.stdout)["state"] == "stopped"
    assert not set(pids) & set(_netns_pids(host.netns))  # stopped there too


def _netns_pids(netns: str) -> list[int]:
    import subprocess

    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


def test_forward_reaches_a_port_on_labhost2s_loopback_by_each_route(lh2, trusted, monkeypatch):
    """``Transport.forward``: a port that listens only on labhost2's loopback, reached from here through the
    adb server by address, through the ssh:// tunnel, and through the jump host."""
    import subprocess
    import sys

    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import get_device
    from edgelab.transport import open_transport

    host, url, env = lh2
    for key in ("HOME", "EDGELAB_HOME"):
        monkeypatch.setenv(key, env[key])
    echo = (
        "import socket,sys\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(8)\n"
        "print(s.getsockname()[1], flush=True)\n"
        "while True:\n  c,_=s.accept(); c.sendall(b'labhost2:'+c.recv(64)); c.close()\n"
    )
    srv = subprocess.Popen(
        ["ip", "netns", "exec", host.netns, sys.executable, "-c", echo], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(srv.stdout.readline())
        with pytest.raises(OSError):  # only there
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        for name in ("lh2-s25", "lh2-rb3g2", "lh2-orin"):
            with session_scope(get_engine(url), write=False) as s:
                endpoint = get_device(s, name).endpoint()
            t = open_transport(endpoint)
            try:
                with (
                    t.forward(port) as fwd,
                    socket.create_connection(("127.0.0.1", fwd.local_port), timeout=10) as c,
                ):
                    c.sendall(name.encode())
                    got = b""
                    while chunk := c.recv(64):
                        got += chunk
                assert got == f"labhost2:{name}".encode(), name
            finally:
                t.close()
    finally:
        srv.kill()
        srv.wait()


def test_an_untrusted_lab_host_is_named_with_the_device_to_trust_through(lh2, tmp_path):
    host, _url, env = lh2
    fresh = {**env, "EDGELAB_HOME": str(tmp_path / "nobody-trusted-anything")}
    _fresh_connections()
    out = cli(fresh, "device", "check", "lh2-rb3g2", "lh2-orin", "--json")
    details = {r["name"]: r["detail"] for r in json.loads(out.stdout)}
    for name, detail in details.items():
        assert "lab host" in detail and host.gateway_fingerprint in detail, detail
        assert f"edgelab device trust {name}`" in detail and "device trust labhost2" not in detail, detail
    out = cli(fresh, "shell", "lh2-orin", "--", "true")
    assert out.exit_code == 1 and "edgelab device trust lh2-orin" in out.output, out.output


def test_without_root_the_second_lab_host_says_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in labhost.unavailable()
    monkeypatch.setattr(labhost.shutil, "which", lambda _name: None)
    assert "no `ip` command" in labhost.unavailable()


def test_a_tunnel_host_that_refuses_every_key_is_auth_failed(lh2, trusted):
    host, _url, env = lh2
    out = cli(
        env,
        "device",
        "add",
        "lh2-nokey",
        "--adb",
        host.adb.device("s25").serial,
        "--adb-server",
        f"ssh://nobody@{host.address}",
    )
    assert out.exit_code == 0, out.output
    try:
        out = cli(env, "device", "check", "lh2-nokey", "--json")
        (rec,) = json.loads(out.stdout)
        assert out.exit_code == 1 and rec["state"] == "auth-failed", rec
        assert f"ssh://nobody@{host.address}/5037" in rec["detail"] and "refused every key" in rec["detail"]
    finally:
        assert cli(env, "device", "rm", "lh2-nokey", "--yes").exit_code == 0
