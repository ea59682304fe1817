"""Device leases on SQLite and on the tests' own PostgreSQL server: races, waits, expiry of a killed holder."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from edgelab.errors import LeaseHeld
from edgelab.lease import acquire, begin_use, end_use, release, whoami
from edgelab.lease.owner import Holder
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.leases import Lease
from edgelab.store.models import Device, utcnow

ALICE, BOB = Holder("alice@lab1"), Holder("bob@lab2")


def _devices(url: str, *rows: Device) -> None:
    with session_scope(get_engine(url)) as s:
        for d in rows:
            add_device(s, d)


def _phone(name: str, serial: str, server: str | None = None, tags=()) -> Device:
    return Device(
        name=name,
        transport="adb",
        adb_serial=serial,
        adb_server=server,
        shell="toybox",
        tags=list(tags),
        device_class="npu_phone",
    )


def _cli(url: str, owner: str, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "EDGELAB_DB": url, "EDGELAB_OWNER": owner, "COLUMNS": "300"}
    env.pop("EDGELAB_LEASE", None)
    exe = os.path.join(os.path.dirname(sys.executable), "edgelab")
    return subprocess.Popen(
        [exe, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def _lease(url: str, lease_id: str) -> Lease:
    with session_scope(get_engine(url), write=False) as s:
        return s.get(Lease, lease_id)


def _open_leases(url: str) -> list[Lease]:
    from sqlmodel import select

    with session_scope(get_engine(url), write=False) as s:
        return list(s.exec(select(Lease).where(Lease.released_at == None)).all())  # noqa: E711


def test_two_rows_for_one_phone_are_one_device_and_the_refusal_names_the_holder(db_url):
    _devices(
        db_url,
        _phone("s25", "R3CX1"),
        _phone("s25-again", "R3CX1", "localhost:5037"),
        _phone("s25-other-host", "R3CX1", "10.0.0.7:5037"),
    )
    engine = get_engine(db_url)
    lease = acquire(engine, names=["s25"], ttl_s=300, purpose="smoke", holder=ALICE)
    with pytest.raises(LeaseHeld) as err:
        acquire(engine, names=["s25-again"], ttl_s=300, holder=BOB)
    assert "alice@lab1" in str(err.value) and lease.id in str(err.value) and "until" in str(err.value)
    assert "s25-again (the same device as s25)" in str(err.value)
    assert "--wait" in err.value.remedy and "--kick" in err.value.remedy
    # the same serial behind another host's adb server is another phone
    other = acquire(engine, names=["s25-other-host"], ttl_s=300, holder=BOB)
    assert other.id != lease.id


def test_all_or_nothing_and_count_from_a_tag(db_url):
    _devices(db_url, *[_phone(f"p{i}", f"SER{i}", tags=["phone"]) for i in range(3)])
    engine = get_engine(db_url)
    acquire(engine, names=["p1"], ttl_s=60, holder=ALICE)
    with pytest.raises(LeaseHeld):
        acquire(engine, names=["p0", "p1"], ttl_s=60, holder=BOB)
    assert [x.owner for x in _open_leases(db_url)] == ["alice@lab1"]  # p0 was not taken half-way
    two = acquire(engine, tag="phone", count=2, ttl_s=60, holder=BOB)
    with session_scope(engine, write=False) as s:
        from edgelab.lease.service import devices_of

        assert sorted(d.device_name for d in devices_of(s, two.id)) == ["p0", "p2"]
    with pytest.raises(LeaseHeld) as err:
        acquire(engine, tag="phone", ttl_s=60, holder=Holder("carol@lab3"))
    assert "0 of 1" in str(err.value)


def _race_one(url: str, owner: str, q) -> None:
    dbmod.dispose_engines()
    try:
        lease = acquire(get_engine(url), tag="phone", count=1, ttl_s=300, holder=Holder(owner))
        q.put((owner, lease.id))
    except LeaseHeld:
        q.put((owner, None))


@pytest.mark.slow  # real processes racing: ~11 s here
def test_processes_racing_for_the_last_devices_of_a_tag_never_share_one(db_url, fault_figures):
    _devices(db_url, *[_phone(f"p{i}", f"SER{i}", tags=["phone"]) for i in range(2)])
    dbmod.dispose_engines()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_race_one, args=(db_url, f"op{i}@lab", q)) for i in range(5)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [lid for _, lid in got if lid]
    with session_scope(get_engine(db_url), write=False) as s:
        from edgelab.lease.service import devices_of

        held = [d.device_name for lid in winners for d in devices_of(s, lid)]
    ok = len(winners) == 2 and sorted(held) == ["p0", "p1"]
    fault_figures[f"lease races ({db_url.split(':', 1)[0].split('+')[0]})"].add(failures=0 if ok else 1)
    assert len(winners) == 2
    assert sorted(held) == ["p0", "p1"]


def test_two_cli_processes_racing_reserve_exactly_one_wins_and_wait_gets_it_on_release(db_url, fault_figures):
    _devices(db_url, _phone("s25", "R3CX1"))
    dbmod.dispose_engines()
    racers = [_cli(db_url, f"op{i}@lab", "reserve", "s25", "--for", "5m", "--json") for i in range(2)]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in racers]
    won = [o for o in outs if o[0] == 0]
    lost = [o for o in outs if o[0] != 0]
    kind = db_url.split(":", 1)[0].split("+")[0]
    fault_figures[f"lease races ({kind})"].add(failures=0 if len(won) == 1 and len(lost) == 1 else 1)
    assert len(won) == 1 and len(lost) == 1, outs
    import json

    winner = json.loads(won[0][1])
    assert lost[0][0] == 1 and f"leased to {winner['owner']}" in lost[0][1]
    waiter = _cli(db_url, "bob@lab2", "reserve", "s25", "--for", "5m", "--wait", "--timeout", "2m", "--json")
    time.sleep(1.0)
    assert waiter.poll() is None  # still waiting: the device is taken
    rel = _cli(db_url, winner["owner"], "release", winner["id"])
    assert rel.wait(timeout=120) == 0, rel.communicate()
    assert waiter.wait(timeout=120) == 0, waiter.communicate()
    got = json.loads(waiter.communicate()[0])
    assert got["owner"] == "bob@lab2" and got["devices"] == ["s25"]
    assert _lease(db_url, winner["id"]).end_reason == "released"


def test_wait_times_out_naming_the_holder(db_url):
    _devices(db_url, _phone("s25", "R3CX1"))
    engine = get_engine(db_url)
    acquire(engine, names=["s25"], ttl_s=300, holder=ALICE)
    with pytest.raises(LeaseHeld) as err:
        acquire(engine, names=["s25"], ttl_s=300, holder=BOB, wait=True, timeout_s=0.5, poll_s=0.1)
    assert "alice@lab1" in str(err.value) and "waited" in str(err.value)


def test_a_holder_killed_with_sigkill_frees_the_device_within_its_ttl(db_url):
    _devices(db_url, _phone("s25", "R3CX1"))
    dbmod.dispose_engines()
    ttl = 2.0
    holder = _cli(
        db_url,
        "alice@lab1",
        "reserve",
        "s25",
        "--for",
        f"{ttl:g}s",
        "--run",
        "sleep 120",
        start_new_session=True,
    )
    try:
        lease = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait for the lease and for one renewal by its heartbeat
            rows = _open_leases(db_url)
            if rows and rows[0].heartbeat_at > rows[0].acquired_at:
                lease = rows[0]
                break
            time.sleep(0.1)
        assert lease is not None, holder.communicate(timeout=5) if holder.poll() is not None else "no lease"
        with pytest.raises(LeaseHeld):  # renewed past its first TTL: still held
            acquire(get_engine(db_url), names=["s25"], ttl_s=60, holder=BOB)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # the holder and its command, by the group we started
        holder.wait(timeout=30)
        holder.communicate()
    killed = utcnow()
    last = _lease(db_url, lease.id)
    # the holder renewed at most one TTL ahead of its death: the lease ends by then, with no daemon
    assert last.expires_at <= killed + timedelta(seconds=ttl)
    assert last.released_at is None
    bob = acquire(
        get_engine(db_url), names=["s25"], ttl_s=60, holder=BOB, wait=True, timeout_s=60, poll_s=0.1
    )
    freed = _lease(db_url, lease.id)
    assert freed.end_reason == "expired" and freed.released_at >= last.expires_at
    assert bob.owner == "bob@lab2"


def test_kick_is_recorded_and_the_kicked_holders_renewal_fails(db_url):
    from edgelab.lease import kick, renew

    _devices(db_url, _phone("s25", "R3CX1"))
    engine = get_engine(db_url)
    a = acquire(engine, names=["s25"], ttl_s=300, holder=ALICE)
    b = kick(engine, ["s25"], ttl_s=60, holder=BOB)
    old = _lease(db_url, a.id)
    assert old.end_reason == "kicked" and old.ended_by == f"kicked by bob@lab2 (lease {b.id})"
    assert b.purpose == f"took s25 over from alice@lab1 (lease {a.id})"
    assert renew(engine, a.id) is False and renew(engine, b.id) is True
    with pytest.raises(LeaseHeld):  # bob's own lease is bob's: alice cannot release it
        release(engine, b.id, holder=ALICE)
    assert release(engine, b.id, holder=BOB).end_reason == "released"


def test_a_workload_joins_its_holders_lease_and_its_own_lease_ends_with_it(db_url):
    _devices(db_url, _phone("s25", "R3CX1"), _phone("s24", "R5CW2"))
    engine = get_engine(db_url)
    mine = acquire(engine, names=["s25"], ttl_s=300, holder=ALICE)
    use = begin_use(engine, ["s25", "s24"], "bench", holder=ALICE, ttl_s=30)
    assert use.by_device["s25"] == mine.id and use.by_device["s24"] != mine.id
    with pytest.raises(LeaseHeld):
        begin_use(engine, ["s24"], "bench", holder=BOB)
    second = begin_use(engine, ["s24"], "push", holder=ALICE)  # the same holder shares its workloads' lease
    end_use(engine, use)
    assert _lease(db_url, use.by_device["s24"]).released_at is None  # push still uses it
    end_use(engine, second)
    assert _lease(db_url, use.by_device["s24"]).end_reason == "released"
    assert _lease(db_url, mine.id).released_at is None  # a reserved lease outlives the workloads under it
    from edgelab.errors import ConfigError

    with pytest.raises(ConfigError):
        begin_use(engine, ["s24"], "bench", lease_id=mine.id, holder=ALICE)  # that lease does not cover s24


def test_owner_names_the_ci_job():
    h = whoami({"EDGELAB_OWNER": "ci@runner3", "CI_JOB_ID": "4711"})
    assert h.owner == "ci@runner3" and h.ci_job == "gitlab job 4711"
    assert (
        whoami({"GITHUB_RUN_ID": "99", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_JOB": "smoke"}).ci_job
        == "github run 99.2 smoke"
    )
