"""`store.quickread` reads a device listing as the ORM does, and steps aside when it cannot."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from edgelab.inventory.view import device_record
from edgelab.store import quickread
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device, list_devices, record_state
from edgelab.store.migrate import head_revision
from edgelab.store.models import Device
from edgelab.store.schema import scanned_head


def _seed(url: str) -> None:
    with session_scope(get_engine(url)) as s:
        add_device(
            s,
            Device(
                name="orin",
                transport="ssh",
                ssh_user="nvidia",
                ssh_host="127.0.0.2",
                ssh_port=2222,
                ssh_jump="bastion",
                device_class="jetson",
                tags=["lab", "a b"],
                notes="n [x]",
                host_key_fingerprint="SHA256:abc",
                host_key_type="ssh-ed25519",
                virtual=True,
                last_seen=datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC),
            ),
        )
        add_device(
            s,
            Device(
                name="s25",
                transport="adb",
                adb_serial="emulator-5554",
                adb_server="127.0.0.1:5037",
                shell="toybox",
                device_class="npu_phone",
            ),
        )
        record_state(s, "s25", "online", "ok")


def _orm(url, **kw):
    with session_scope(get_engine(url), write=False) as s:
        return [device_record(d) for d in list_devices(s, **kw)]


def test_scanned_head_is_alembics_head():
    assert scanned_head() == head_revision()


def test_same_records_as_the_orm(dbpath):
    url = f"sqlite:///{dbpath}"
    _seed(url)
    for kw in ({}, {"tag": "lab"}, {"device_class": "npu_phone"}, {"tag": "none"}):
        columns, rows = quickread.list_devices(url=url, **kw)
        quick = [device_record(d, columns) for d in rows]
        assert json.dumps(quick) == json.dumps(_orm(url, **kw)), kw
    assert [c.name for c in Device.__table__.columns] == columns


def test_steps_aside_when_it_cannot_read_it_plainly(dbpath, tmp_path):
    url = f"sqlite:///{dbpath}"
    assert quickread.list_devices(url=url) is None  # no file yet: the ORM path creates and migrates it
    _seed(url)
    assert quickread.list_devices(url="sqlite://") is None
    assert quickread.list_devices(url="postgresql+psycopg://u@127.0.0.1/db") is None
    conn = sqlite3.connect(dbpath)
    conn.execute("UPDATE alembic_version SET version_num = 'zz_newer'")
    conn.commit()
    conn.close()
    assert quickread.list_devices(url=url) is None  # another schema: the ORM path says what is wrong


def test_a_leased_device_is_left_to_the_lease_code(dbpath):
    """`device ls` shows who holds a device; with any open lease the listing takes the ORM path."""
    from edgelab.lease import Holder, acquire, release

    url = f"sqlite:///{dbpath}"
    _seed(url)
    assert quickread.list_devices(url=url, unleased=True) is not None
    lease = acquire(get_engine(url), names=["s25"], holder=Holder(owner="alice@lab1"))
    assert quickread.list_devices(url=url, unleased=True) is None
    assert quickread.list_devices(url=url) is not None  # the device rows alone are still plain to read
    release(get_engine(url), lease.id, holder=Holder(owner="alice@lab1"))
    assert quickread.list_devices(url=url, unleased=True) is not None


def test_several_tables_in_one_read_are_each_what_read_table_reads(dbpath):
    """``read_tables`` (one open, one schema check: the push's five tables) answers what
    ``read_table`` answers per table, and steps aside as a whole when any table cannot be read."""
    url = f"sqlite:///{dbpath}"
    _seed(url)
    specs = {"device": "name", "device_store_entry": "id", "alembic_version": "version_num"}
    both = quickread.read_tables(specs, url=url)
    assert both is not None and list(both) == list(specs)
    for table, order_by in specs.items():
        one = quickread.read_table(table, url=url, order_by=order_by)
        assert one is not None
        assert both[table][0] == one[0] and [vars(r) for r in both[table][1]] == [vars(r) for r in one[1]]
    assert [d.name for d in both["device"][1]] == ["orin", "s25"]
    assert quickread.read_tables({**specs, "device": "no_such_column"}, url=url) is None
    assert quickread.read_tables({**specs, "no_such_table": "id"}, url=url) is None
    assert quickread.read_tables(specs, url=url, unless="SELECT 1") is None
