"""`edgelab device ...` end to end on a real SQLite file: JSON listings, exit codes, remedies, no secrets."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device, get_device
from edgelab.store.models import Device

runner = CliRunner()


def cli(db, *args, input=None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def ok_json(db, *args):
    res = cli(db, *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_add_ls_show_rm_json(dbpath):
    res = cli(
        dbpath,
        "device",
        "add",
        "orin-agx",
        "--ssh",
        "nvidia@127.0.0.11:2222",
        "--class",
        "jetson",
        "--tag",
        "gpu",
        "--tag",
        "lab",
        "--notes",
        "bench 3",
    )
    assert res.exit_code == 0, res.output
    assert (
        cli(
            dbpath,
            "device",
            "add",
            "s25",
            "--adb",
            "127.0.0.1:5586",
            "--adb-server",
            "127.0.0.1:5999",
            "--class",
            "npu_phone",
        ).exit_code
        == 0
    )
    rows = ok_json(dbpath, "device", "ls")
    assert [r["name"] for r in rows] == ["orin-agx", "s25"]
    orin, s25 = rows
    assert (
        orin["class"] == "jetson"
        and orin["transport"] == "ssh"
        and orin["address"] == "nvidia@127.0.0.11:2222"
    )
    assert (orin["ssh_port"], orin["tags"], orin["notes"], orin["shell"]) == (
        2222,
        ["gpu", "lab"],
        "bench 3",
        "posix",
    )
    assert (orin["state"], orin["last_seen"], orin["virtual"]) == ("unknown", None, False)
    assert (s25["adb_serial"], s25["adb_server"], s25["shell"]) == (
        "127.0.0.1:5586",
        "127.0.0.1:5999",
        "toybox",
    )
    assert [r["name"] for r in ok_json(dbpath, "device", "ls", "--tag", "gpu")] == ["orin-agx"]
    assert [r["name"] for r in ok_json(dbpath, "device", "ls", "--class", "npu_phone")] == ["s25"]
    assert ok_json(dbpath, "device", "show", "s25") == s25

    res = cli(dbpath, "device", "rm", "orin-agx", input="n\n")
    assert res.exit_code == 1 and "--yes" in res.stderr
    assert cli(dbpath, "device", "rm", "orin-agx", "--yes").exit_code == 0
    assert [r["name"] for r in ok_json(dbpath, "device", "ls")] == ["s25"]
    assert cli(dbpath, "device", "rm", "s25", input="y\n").exit_code == 0
    assert ok_json(dbpath, "device", "ls") == []


def test_listings_mark_virtual_devices(dbpath):
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:
        add_device(
            s,
            Device(name="thor", transport="ssh", ssh_host="127.0.0.13", virtual=True, device_class="jetson"),
        )
        add_device(s, Device(name="real-one", transport="ssh", ssh_host="10.0.0.9"))
    res = cli(dbpath, "device", "ls")
    assert res.exit_code == 0
    lines = {line.split()[0]: line for line in res.stdout.splitlines()[1:] if line.strip()}
    assert "VIRTUAL" in lines["thor"] and "VIRTUAL" not in lines["real-one"]
    assert "VIRTUAL" in cli(dbpath, "device", "show", "thor").stdout
    assert ok_json(dbpath, "device", "show", "thor")["virtual"] is True


@pytest.mark.parametrize(
    "args",
    [
        ["device", "add", "x"],  # neither --ssh nor --adb
        ["device", "add", "x", "--ssh", "h", "--adb", "s"],
        ["device", "add", "Bad Name", "--ssh", "h"],
        ["device", "add", "x", "--ssh", "h:notaport"],
        ["device", "add", "x", "--ssh", "h", "--shell", "cmd"],
        ["device", "add", "x", "--ssh", "h", "--class", "toaster"],
        ["device", "add", "x", "--adb", "s", "--jump", "gw"],
        ["device", "check"],  # neither names nor --all
        ["device", "check", "a", "--all"],
        ["device", "ls", "--no-such-option"],
    ],
)
def test_usage_errors_exit_2(dbpath, args):
    res = cli(dbpath, *args)
    assert res.exit_code == 2, res.output


def test_invalid_name_says_the_rule_and_a_fix(dbpath):
    res = cli(dbpath, "device", "add", "Orin AGX", "--ssh", "h")
    assert res.exit_code == 2
    assert "lowercase" in res.stderr and "'orin-agx'" in res.stderr


def test_unknown_device_exits_1_with_remedy(dbpath):
    cli(dbpath, "device", "add", "orin-nano", "--ssh", "h")
    for args in (
        ["device", "show", "orin-nan"],
        ["device", "rm", "ghost", "--yes"],
        ["device", "check", "ghost"],
    ):
        res = cli(dbpath, *args)
        assert res.exit_code == 1, args
        assert "no device named" in res.stderr and "->" in res.stderr
    assert "orin-nano" in cli(dbpath, "device", "show", "orin-nan").stderr


def test_duplicate_add_exits_1(dbpath):
    assert cli(dbpath, "device", "add", "thor", "--ssh", "h").exit_code == 0
    res = cli(dbpath, "device", "add", "thor", "--ssh", "h2")
    assert res.exit_code == 1 and "already exists" in res.stderr and "device rm thor" in res.stderr


def test_password_is_refused_and_never_stored(dbpath):
    for args in (
        ["--ssh", "root:hunter2@jetson"],
        ["--ssh", "jetson", "--jump", "ops:hunter2@gw"],
        ["--adb", "R5CX", "--adb-server", "u:hunter2@labhost:5037"],
    ):
        res = cli(dbpath, "device", "add", "leaky", *args)
        assert res.exit_code == 2, res.output
        assert "secret" in res.stderr or "password" in res.stderr or "user part" in res.stderr
        assert "hunter2" not in res.output
    assert ok_json(dbpath, "device", "ls") == []
    dbmod.dispose_engines()
    for path in dbpath.parent.glob("lab.db*"):
        assert b"hunter2" not in path.read_bytes()


def test_import_ssh_config_cli(dbpath, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(
        "Host rig-1\n  HostName 10.0.0.1\n  User pi\nHost rig-2 other\n  HostName 10.0.0.2\nHost *\n  Port 2200\n"
    )
    report = ok_json(dbpath, "device", "import", "ssh-config", "--file", str(cfg), "--pattern", "rig-*")
    assert report == {"added": ["rig-1", "rig-2"], "skipped": [], "notes": []}
    rows = {r["name"]: r for r in ok_json(dbpath, "device", "ls")}
    assert rows["rig-1"]["address"] == "pi@10.0.0.1:2200"
    res = cli(dbpath, "device", "import", "ssh-config", "--file", str(tmp_path / "missing"))
    assert res.exit_code == 2 and "--file" in res.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_records_state(dbpath):
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:
        add_device(s, Device(name="labhost", transport="local"))
    port = _closed_port()  # nothing listens there: a refused connection, on loopback only
    assert cli(dbpath, "device", "add", "gone", "--ssh", f"127.0.0.1:{port}").exit_code == 0

    res = cli(dbpath, "device", "check", "labhost", "--json")
    assert res.exit_code == 0, res.output
    [r] = json.loads(res.stdout)
    assert (r["name"], r["state"]) == ("labhost", "online")

    res = cli(dbpath, "device", "check", "--all", "--json", "--timeout", "3")
    assert res.exit_code == 1
    states = {r["name"]: r["state"] for r in json.loads(res.stdout)}
    assert states == {"gone": "offline", "labhost": "online"}
    assert "gone" in res.stderr
    with session_scope(engine) as s:
        gone, local = get_device(s, "gone"), get_device(s, "labhost")
    assert (
        gone.state == "offline"
        and gone.last_checked is not None
        and gone.last_seen is None
        and gone.state_detail
    )
    assert local.state == "online" and local.last_seen is not None


def test_trust_refuses_adb_devices(dbpath):
    cli(dbpath, "device", "add", "s25", "--adb", "R5CX")
    res = cli(dbpath, "device", "trust", "s25", "--yes")
    assert res.exit_code == 2 and "host keys" in res.stderr


def test_console_script_in_a_real_process(dbpath):
    env_cmd = [sys.executable, "-c", "from edgelab.cli import main; main()", "--db", str(dbpath)]
    add = subprocess.run(
        [*env_cmd, "device", "add", "wsl-hx370", "--ssh", "127.0.0.14"], capture_output=True, text=True
    )
    assert add.returncode == 0, add.stderr
    ls = subprocess.run([*env_cmd, "device", "ls", "--json"], capture_output=True, text=True)
    assert ls.returncode == 0 and json.loads(ls.stdout)[0]["name"] == "wsl-hx370"
    bad = subprocess.run([*env_cmd, "device", "add"], capture_output=True, text=True)
    assert bad.returncode == 2
    con = sqlite3.connect(dbpath)
    assert con.execute("SELECT name FROM device").fetchall() == [("wsl-hx370",)]
    con.close()


@pytest.mark.parametrize("url", ["/proc/no-such-dir/lab.db", "nosuchdialect://x/y"])
def test_unusable_database_is_one_line_and_exit_2(dbpath, url):
    res = runner.invoke(app, ["--db", url, "device", "ls"])
    assert res.exit_code == 2
    assert "error:" in res.stderr and "--db" in res.stderr and "Traceback" not in res.output


def test_import_adb_without_a_server_exits_1(dbpath):
    res = cli(dbpath, "device", "import", "adb", "--adb-server", f"127.0.0.1:{_closed_port()}")
    assert res.exit_code == 1
    assert "adb server" in res.stderr and "->" in res.stderr
