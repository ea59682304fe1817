"""`edgelab push`, `store ls`, `gc` end to end on a virtual phone registered in the inventory."""

from __future__ import annotations

import json
import os

import pytest
from fixtures.adb_lab import adb_endpoint
from sqlmodel import select
from typer.testing import CliRunner

from edgelab.artifacts.devstore import ANDROID_ROOT
from edgelab.artifacts.hashing import sha256_path
from edgelab.cli import app
from edgelab.lease import Holder, acquire
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.models import Device
from edgelab.transport.adb import ADBTransport

runner = CliRunner()
PERSONA = "sa8775p"


@pytest.fixture
def db(tmp_path, adb_lab):
    dbmod.dispose_engines()
    url = str(tmp_path / "push.db")
    ep = adb_endpoint(adb_lab, PERSONA)
    with session_scope(get_engine(url)) as s:
        add_device(
            s,
            Device(
                name="phone",
                transport="adb",
                adb_serial=ep.adb_serial,
                adb_server=ep.adb_server,
                shell="toybox",
                virtual=True,
            ),
        )
    t = ADBTransport.connect(ep)
    t.run(["rm", "-rf", ANDROID_ROOT])
    try:
        yield url
    finally:
        t.run(["rm", "-rf", ANDROID_ROOT])
        t.close()
        dbmod.dispose_engines()


def cli(db, *args):
    return runner.invoke(app, ["--db", db, *args])


def test_push_skip_store_ls_and_gc(db, tmp_path):
    a = tmp_path / "a.bin"
    a.write_bytes(os.urandom(150_000))
    b = tmp_path / "b.bin"
    b.write_bytes(os.urandom(1000))
    for f in (a, b):
        res = cli(
            db,
            "artifact",
            "add",
            str(f),
            "--kind",
            "weights",
            "--target",
            "android-arm64",
            "--meta",
            "checkpoint_id=test/x",
        )
        assert res.exit_code == 0, res.output
    res = cli(db, "push", "a.bin", "b.bin", "--device", "phone", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out[0]["ok"] and sorted(x["status"] for x in out[0]["blobs"]) == ["uploaded", "uploaded"]
    res = cli(db, "push", "a.bin", "--device", "phone", "--json")
    assert json.loads(res.stdout)[0]["blobs"][0]["status"] == "present"  # verified record + same stamp
    res = cli(db, "push", "a.bin", "--device", "phone", "--verify", "--json")
    assert json.loads(res.stdout)[0]["blobs"][0]["status"] == "verified"
    res = cli(db, "store", "ls", "phone", "--json")
    assert res.exit_code == 0, res.output
    listing = json.loads(res.stdout)
    assert listing["root"] == ANDROID_ROOT
    assert {e["name"]: e["artifacts"] for e in listing["entries"]} == {
        sha256_path(a): ["a.bin"],
        sha256_path(b): ["b.bin"],
    }
    assert cli(db, "artifact", "rm", "b.bin").exit_code == 0
    res = cli(db, "gc", "phone", "--dry-run", "--json")
    assert [e["name"] for e in json.loads(res.stdout)] == [sha256_path(b)]
    res = cli(db, "gc", "phone", "--json")
    assert [e["name"] for e in json.loads(res.stdout)] == [sha256_path(b)]
    res = cli(db, "store", "ls", "phone", "--json")
    assert [e["name"] for e in json.loads(res.stdout)["entries"]] == [sha256_path(a)]


def test_store_rm_removes_the_device_copy_and_its_record_so_the_next_push_sends_it(db, tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(os.urandom(70_000))
    b.write_bytes(os.urandom(900))
    for f in (a, b):
        assert cli(db, "artifact", "add", str(f), "--kind", "weights", "--target", "any").exit_code == 0
    assert cli(db, "push", "a.bin", "b.bin", "--device", "phone").exit_code == 0
    res = cli(db, "store", "rm", "phone", "a.bin", "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == [{"name": sha256_path(a), "size": 70_000, "artifacts": ["a.bin"]}]
    res = cli(db, "push", "a.bin", "--device", "phone", "--json")
    assert json.loads(res.stdout)[0]["blobs"][0]["status"] == "present"  # a dry run removed nothing
    res = cli(db, "store", "rm", "phone", "a.bin")
    assert res.exit_code == 0, res.output
    assert f"removed {sha256_path(a)} (70000 B; a.bin)" in res.stdout
    listing = json.loads(cli(db, "store", "ls", "phone", "--json").stdout)
    assert [e["name"] for e in listing["entries"]] == [sha256_path(b)]  # the other blob stays
    with session_scope(get_engine(db), write=False) as s:
        from edgelab.artifacts.stamps import DbStamps

        dev = s.exec(select(Device).where(Device.name == "phone")).one()
        recorded = set(DbStamps(get_engine(db), dev.id).all())
    assert sha256_path(a) not in recorded and sha256_path(b) in recorded
    res = cli(db, "push", "a.bin", "--device", "phone", "--json")
    assert json.loads(res.stdout)[0]["blobs"][0]["status"] == "uploaded"  # sent again, verified again
    assert "a.bin" in [x["name"] for x in json.loads(cli(db, "artifact", "ls", "--json").stdout)]
    res = cli(db, "store", "rm", "phone", "nope")
    assert res.exit_code == 1 and "nope" in res.output
    # someone else's lease: neither store rm nor gc touches the device
    acquire(get_engine(db), names=["phone"], holder=Holder("bob@lab2"), ttl_s=600, purpose="bench")
    for args in (("store", "rm", "phone", "a.bin"), ("gc", "phone")):
        res = cli(db, *args)
        assert res.exit_code == 1 and "leased to bob@lab2" in " ".join(res.output.split()), res.output
    listing = json.loads(cli(db, "store", "ls", "phone", "--json").stdout)
    assert sorted(e["name"] for e in listing["entries"]) == sorted([sha256_path(a), sha256_path(b)])


def test_push_errors(db, tmp_path):
    res = cli(db, "push", "nothing", "--device", "phone")
    assert res.exit_code == 1 and "no artifact" in " ".join(res.output.split())
    res = cli(db, "push", "x", "--device", "ghost")
    assert res.exit_code != 0
    f = tmp_path / "c.bin"
    f.write_bytes(b"abc")
    assert cli(db, "artifact", "add", str(f), "--kind", "other", "--target", "any").exit_code == 0
    f.write_bytes(b"abcd")  # changed after registration: refused, never pushed under the old hash
    res = cli(db, "push", "c.bin", "--device", "phone")
    assert res.exit_code == 1 and "changed since it was registered" in " ".join(res.output.split())


def test_unchanged_repush_skips_the_orm_and_falls_back_when_anything_changed(db, tmp_path):
    """The re-push answers "present" from SQLite + one device stat, without SQLAlchemy; a changed
    device blob (new change-time stamp) takes the full path, which re-hashes on the device."""
    import subprocess
    import sys

    a = tmp_path / "q.bin"
    a.write_bytes(os.urandom(70_000))
    assert cli(db, "artifact", "add", str(a), "--kind", "weights", "--target", "any").exit_code == 0
    assert (
        json.loads(cli(db, "push", "q.bin", "-d", "phone", "--json").stdout)[0]["blobs"][0]["status"]
        == "uploaded"
    )
    probe = (
        "import sys\n"
        "from edgelab.cli import main\n"
        f"sys.argv = ['edgelab', '--db', {db!r}, 'push', 'q.bin', '-d', 'phone', '--json']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('ORM' if 'sqlalchemy' in sys.modules else 'NO-ORM', file=sys.stderr)\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)[0]["blobs"][0]["status"] == "present"
    assert res.stderr.strip().splitlines()[-1] == "NO-ORM", res.stderr
    # as an operator types it (no --json): one plain line; neither Rich nor pydantic is loaded for it
    plain = probe.replace(", '--json'", "").replace(
        "'ORM' if 'sqlalchemy' in sys.modules",
        "'ORM' if {'sqlalchemy', 'rich', 'pydantic'} & set(sys.modules)",
    )
    res = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[:3] == ["phone", sha256_path(a)[:16], "present"], res.stdout
    assert res.stderr.strip().splitlines()[-1] == "NO-ORM", res.stderr
    # any write on the device moves the stamp: no longer trusted, hashed again by the full path
    t = ADBTransport.connect(adb_endpoint_for_db(db))
    try:
        sha = sha256_path(a)
        assert t.run(["touch", f"{ANDROID_ROOT}/{sha}"]).ok
    finally:
        t.close()
    leases_before = _lease_count(db)
    res = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[2] == "verified", res.stdout
    # not the re-push's answer: the full push (its own lease, the hash on the device), here on a free
    # device without the ORM either (quick_push), and with stderr a pipe, without Rich's live bars
    assert _lease_count(db) == leases_before + 1
    assert res.stderr.strip().splitlines()[-1] == "NO-ORM", res.stderr


def test_push_shows_progress_bars_on_a_terminal_only(db, tmp_path):
    """Transfer bars go to stderr when it is a terminal (as git and curl do); the result line is the same."""
    import pty
    import subprocess
    import sys

    a = tmp_path / "bar.bin"
    a.write_bytes(os.urandom(300_000))
    assert cli(db, "artifact", "add", str(a), "--kind", "weights", "--target", "any").exit_code == 0
    argv = [
        sys.executable,
        "-c",
        "from edgelab.cli import main; main()",
        "--db",
        db,
        "push",
        "bar.bin",
        "-d",
        "phone",
    ]
    master, slave = pty.openpty()
    try:
        res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, text=True, timeout=120)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the pty's other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert res.returncode == 0
    sha = sha256_path(a)
    assert res.stdout.split()[:3] == ["phone", sha[:16], "uploaded"], res.stdout
    assert f"phone {sha[:12]}".encode() in seen, seen[-400:]


def _lease_count(db):
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM lease").fetchone()[0]


def adb_endpoint_for_db(db):
    with session_scope(get_engine(db), write=False) as s:
        from edgelab.store.devices import get_device

        return get_device(s, "phone").endpoint()
