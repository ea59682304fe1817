"""`device import adb` and `device check` against the virtual ADB lab (real adb server, emulated devices)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import get_device, list_devices, normalize_name

pytestmark = pytest.mark.adb
runner = CliRunner()


def cli(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


def test_import_then_check_every_adb_device(dbpath, adb_lab):
    seen = {d.serial: d for d in adb_lab.devices}
    res = cli(dbpath, "device", "import", "adb", "--adb-server", adb_lab.adb_server, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert sorted(report["added"]) == sorted(normalize_name(s) for s in seen)
    again = json.loads(
        cli(dbpath, "device", "import", "adb", "--adb-server", adb_lab.adb_server, "--json").stdout
    )
    assert again["added"] == [] and len(again["skipped"]) == len(seen)

    res = cli(dbpath, "device", "check", "--all", "--json", "--timeout", "10")
    results = {r["name"]: r["state"] for r in json.loads(res.stdout)}
    want = {normalize_name(s): ("online" if d.state == "device" else d.state) for s, d in seen.items()}
    assert results == want
    assert "unauthorized" in want.values()  # the lab serves one device that never authorizes
    assert res.exit_code == (0 if set(want.values()) == {"online"} else 1)

    engine = get_engine(str(dbpath))
    with session_scope(engine, write=False) as s:
        rows = {d.name: d for d in list_devices(s)}
    for name, state in want.items():
        assert rows[name].state == state and rows[name].last_checked is not None
        assert (rows[name].last_seen is not None) == (state == "online")
        assert rows[name].adb_server == adb_lab.adb_server and rows[name].shell == "toybox"


def test_added_adb_device_checks_online(dbpath, adb_lab):
    s25 = adb_lab.device("s25")
    assert (
        cli(
            dbpath,
            "device",
            "add",
            "s25",
            "--adb",
            s25.serial,
            "--adb-server",
            adb_lab.adb_server,
            "--class",
            "npu_phone",
        ).exit_code
        == 0
    )
    res = cli(dbpath, "device", "check", "s25")
    assert res.exit_code == 0, res.output
    assert "online" in res.stdout
    with session_scope(get_engine(str(dbpath)), write=False) as s:
        assert get_device(s, "s25").state == "online"
