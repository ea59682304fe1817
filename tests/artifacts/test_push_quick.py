"""A fresh `edgelab push` to a free device without the ORM, and the resumable ADB put under it.

On a virtual phone (the real adb server in front of the emulator): the quick path writes the same
rows the full path writes (its own lease, given back; the verification the next re-push trusts),
a device under someone's lease goes to the full path, which refuses before a byte is sent; the
append refuses a partial that is not exactly ``offset`` bytes long; a ``.part`` corrupted while it
uploads is never renamed into place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from fixtures.adb_lab import adb_endpoint
from typer.testing import CliRunner

from edgelab.artifacts.devstore import ANDROID_ROOT, open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.cli import app
from edgelab.errors import HashMismatch, LeaseHeld, TransportError
from edgelab.lease import acquire, begin_use, end_use
from edgelab.lease.owner import Holder
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.leases import Lease, LeaseDevice
from edgelab.store.models import Device
from edgelab.transport.adb import ADBTransport

runner = CliRunner()
PERSONA = "sa8775p"
BOB = Holder("bob@lab2")


@pytest.fixture
def phone(adb_lab):
    t = ADBTransport.connect(adb_endpoint(adb_lab, PERSONA))
    t.run(["rm", "-rf", ANDROID_ROOT])
    try:
        yield t
    finally:
        t.run(["rm", "-rf", ANDROID_ROOT])
        t.close()


@pytest.fixture
def db(tmp_path, adb_lab, phone):
    dbmod.dispose_engines()
    url = str(tmp_path / "quick.db")
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
    try:
        yield url
    finally:
        dbmod.dispose_engines()


def _push_in_subprocess(db: str, name: str, owner: str = "alice@lab1") -> tuple[int, str, str]:
    """``edgelab push NAME -d phone --json`` in a fresh interpreter; stderr's last line says whether
    SQLAlchemy was loaded (ORM) or not (NO-ORM)."""
    probe = (
        "import sys\n"
        "from edgelab.cli import main\n"
        f"sys.argv = ['edgelab', '--db', {db!r}, 'push', {name!r}, '-d', 'phone', '--json']\n"
        "code = 0\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code or 0\n"
        "print('ORM' if 'sqlalchemy' in sys.modules else 'NO-ORM', file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "EDGELAB_OWNER": owner, "COLUMNS": "300"}
    env.pop("EDGELAB_LEASE", None)
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    return res.returncode, res.stdout, res.stderr


def _leases(db: str) -> list[tuple[Lease, list[LeaseDevice]]]:
    from sqlmodel import select

    with session_scope(get_engine(db), write=False) as s:
        out = []
        for lease in s.exec(select(Lease).order_by(Lease.acquired_at)).all():
            rows = list(s.exec(select(LeaseDevice).where(LeaseDevice.lease_id == lease.id)).all())
            out.append((Lease(**lease.model_dump()), [LeaseDevice(**r.model_dump()) for r in rows]))
        return out


def test_fresh_push_to_a_free_device_skips_the_orm_and_writes_what_the_full_path_writes(db, phone, tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom(3 << 20))
    sha = sha256_path(f)
    assert (
        runner.invoke(
            app, ["--db", db, "artifact", "add", str(f), "--kind", "weights", "--target", "any"]
        ).exit_code
        == 0
    )
    code, out, err = _push_in_subprocess(db, "w.bin")
    assert code == 0, err
    blob = json.loads(out)[0]["blobs"][0]
    assert blob["status"] == "uploaded" and blob["sent"] == f.stat().st_size
    assert err.strip().splitlines()[-1] == "NO-ORM", err
    assert phone.get(f"{ANDROID_ROOT}/{sha}", tmp_path / "back.bin") == sha
    # its own lease, taken and given back as begin_use/end_use leave one
    [(lease, rows)] = _leases(db)
    assert lease.owner == "alice@lab1" and lease.auto and lease.users == 0
    assert lease.end_reason == "released" and lease.released_at is not None and lease.purpose == "push w.bin"
    assert lease.acquired_at <= lease.released_at and lease.expires_at > lease.acquired_at
    assert [(r.device_name, r.held_key) for r in rows] == [("phone", None)] and rows[
        0
    ].physical_key.startswith("adb:")
    # the verification it recorded is the one the unchanged re-push trusts (read back by the ORM too)
    from edgelab.artifacts.stamps import DbStamps

    with session_scope(get_engine(db), write=False) as s:
        from edgelab.store.devices import get_device

        dev_id = get_device(s, "phone").id
    assert DbStamps(get_engine(db), dev_id).get(sha) == open_store(phone).inspect(sha)[0]
    code, out, err = _push_in_subprocess(db, "w.bin")
    assert code == 0 and json.loads(out)[0]["blobs"][0]["status"] == "present", err
    assert len(_leases(db)) == 1  # the re-push took no lease: it wrote nothing


def test_a_device_under_someone_elses_lease_is_refused_before_a_byte_is_sent(db, phone, tmp_path):
    f = tmp_path / "r.bin"
    f.write_bytes(os.urandom(100_000))
    assert (
        runner.invoke(
            app, ["--db", db, "artifact", "add", str(f), "--kind", "weights", "--target", "any"]
        ).exit_code
        == 0
    )
    taken = acquire(get_engine(db), names=["phone"], holder=BOB, ttl_s=600, purpose="bench")
    code, out, err = _push_in_subprocess(db, "r.bin")
    assert code == 1
    assert "leased to bob@lab2" in " ".join((out + err).split())
    assert err.strip().splitlines()[-1] == "ORM"  # the full path decided
    assert open_store(phone).list() == []  # nothing sent
    assert [lease.id for lease, _ in _leases(db) if lease.released_at is None] == [taken.id]


def test_the_quick_lease_is_the_orms_lease(db, monkeypatch):
    """While held, the ORM refuses the device to another holder; renewed by its heartbeat; ended, the device is free."""
    from edgelab.lease import quick
    from edgelab.store import quickwrite
    from edgelab.store.quickread import read_table

    monkeypatch.setenv("EDGELAB_LEASE_TTL", "0.6")
    monkeypatch.setenv("EDGELAB_OWNER", "alice@lab1")
    conn = quickwrite.connect(db)
    assert conn is not None
    try:
        rows = read_table("device", url=db)[1]
        held = quick.take(conn, rows, "push x")
        assert held is not None
        assert quick.take(conn, rows, "push y") is None  # a lease is open: not this path's to decide
        with pytest.raises(LeaseHeld, match="alice@lab1"):
            begin_use(get_engine(db), ["phone"], "bench", holder=BOB)
        first = _leases(db)[0][0].expires_at
        time.sleep(1.0)  # past the TTL: only the heartbeat keeps it
        assert _leases(db)[0][0].expires_at > first
        with pytest.raises(LeaseHeld):
            begin_use(get_engine(db), ["phone"], "bench", holder=BOB)  # its sweep found nothing expired
        held.end()
    finally:
        conn.close()
    use = begin_use(get_engine(db), ["phone"], "bench", holder=BOB)
    end_use(get_engine(db), use)


def test_adb_resumable_put_cuts_back_a_longer_partial_and_refuses_a_shorter_one(phone, tmp_path):
    local = tmp_path / "a.bin"
    data = os.urandom(700_000)
    local.write_bytes(data)
    remote = "/data/local/tmp/edgelab-append-test/a.bin"
    prefix = tmp_path / "prefix.bin"
    try:
        prefix.write_bytes(data[:299_990])
        phone.put(prefix, remote)  # 10 bytes short of the offset we claim: nothing to append to
        with pytest.raises(TransportError, match="holds 299990 bytes, not 300000"):
            phone.put(local, remote, offset=300_000)
        prefix.write_bytes(data[:300_000] + b"stale tail a cut left")
        phone.put(prefix, remote)
        seen = []
        assert phone.put(local, remote, offset=300_000, progress=lambda d, t: seen.append((d, t))) is None
        assert seen and seen[-1] == (700_000, 700_000) and all(d >= 300_000 for d, _ in seen)
        assert phone.get(remote, tmp_path / "back.bin") == sha256_path(local)
        phone.run(["rm", "-rf", "/data/local/tmp/edgelab-append-test"])
        assert phone.put(local, remote, offset=0) is None  # offset 0 creates it, directory and all
        assert phone.get(remote, tmp_path / "back.bin") == sha256_path(local)
    finally:
        phone.run(["rm", "-rf", "/data/local/tmp/edgelab-append-test"])


def test_a_part_corrupted_while_it_uploads_is_never_renamed_into_place(phone, tmp_path):
    p = tmp_path / "c.bin"
    p.write_bytes(os.urandom(5 << 20))
    blob = BlobSpec(p, sha256_path(p), p.stat().st_size)
    store = open_store(phone)
    other = ADBTransport.connect(phone.endpoint)
    hit = []

    def corrupt(sha, done, total):  # another writer flips 4 bytes of the arrived prefix on the device
        if not hit and done >= total // 2:
            # the bytes sent are buffered on the way: wait until the device's .part holds byte 1004
            script = (
                'i=0; while [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -lt 4096 ]; do '
                "i=$((i + 1)); [ $i -lt 200 ] || exit 9; sleep 0.05; done; "
                'printf XXXX | dd of="$1" bs=1 seek=1000 conv=notrunc 2>/dev/null'
            )
            hit.append(other.run(["sh", "-c", script, "x", store.part(sha)], timeout=30).ok)

    try:
        with pytest.raises(HashMismatch):
            push_blob(store, blob, progress=corrupt)
    finally:
        other.close()
    assert hit == [True]
    assert [e.name for e in store.list()] == []  # neither the blob nor the corrupt .part is left
