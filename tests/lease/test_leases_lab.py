"""Leases and admission with real workloads on the virtual lab: deploy keeps its lease until stop,
another holder is refused naming the holder, bench and deploy share one memory ledger, and
`device rm` orphans nothing; on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from deploy.test_deploy_helpers import DEPLOY_DEVICES, alive_on_host
from sqlmodel import select
from typer.testing import CliRunner

from edgelab.bench import BenchRequest, run_bench
from edgelab.cli import app
from edgelab.deploy import control, launch
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import LeaseHeld, Refusal
from edgelab.lease import acquire, holders_by_device, release
from edgelab.lease.owner import Holder
from edgelab.store.db import session_scope
from edgelab.store.deployments import Reservation, get_deployment, open_reservations
from edgelab.store.devices import get_device
from edgelab.store.leases import Lease

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]
runner = CliRunner()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def deploy_lab(request, tmp_path_factory, ssh_lab, adb_lab):
    """The virtual lab registered and probed in a SQLite file, then in a database on the tests' PostgreSQL."""
    from edgelab.deploy.options import Options
    from edgelab.inventory.probe import probe_devices
    from edgelab.sim.lab import LabStatus, register
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('leases') / 'lab.db'}"
    else:
        url = request.getfixturevalue("pg_server").create_database()
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    engine = get_engine(url)
    outcomes = probe_devices(engine, DEPLOY_DEVICES, timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    yield url, engine, Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 30})
    dbmod.dispose_engines()


def _holder(engine, name: str) -> Lease | None:
    with session_scope(engine, write=False) as s:
        return holders_by_device(s, [get_device(s, name)]).get(name)


def _open(engine, name: str) -> list[Reservation]:
    with session_scope(engine, write=False) as s:
        return open_reservations(s, get_device(s, name).id)


def test_a_deployment_keeps_its_lease_until_stop_and_others_are_refused_naming_the_holder(
    deploy_lab, monkeypatch
):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("rb3g2", "qwen3-tts"), opts=opts)
    try:
        lease = _holder(engine, "rb3g2")
        assert lease is not None and lease.auto and dep.lease_id == lease.id
        monkeypatch.setenv("EDGELAB_OWNER", "bob@lab2")
        with pytest.raises(LeaseHeld) as err:
            run_bench(
                engine,
                BenchRequest("rb3g2", "qwen3-tts", runtime="reference", requests=1, frames=2, frames_per_s=0),
                opts=opts,
            )
        assert (
            lease.owner in str(err.value)
            and f"until deployment {dep.run_id} is stopped" in str(err.value)
            and "--wait" in err.value.remedy
        )
        with pytest.raises(LeaseHeld) as err:  # a kick cannot pull the device from under a running deployment
            acquire(engine, names=["rb3g2"], ttl_s=60, kick=True)
        assert f"edgelab stop {dep.run_id}" in err.value.remedy
        out = runner.invoke(app, ["--db", url, "device", "rm", "rb3g2", "--yes"], env=_env(url))
        assert out.exit_code == 1 and dep.run_id in out.output and "--force" in out.output
        monkeypatch.delenv("EDGELAB_OWNER")
        # the same holder may bench beside its own deployment; admission then counts both
        with pytest.raises(Refusal) as err:
            run_bench(
                engine, BenchRequest("rb3g2", "internvla-a1", runtime="reference", requests=1), opts=opts
            )
        assert err.value.code == "budget_exceeds_device" and err.value.pool == "ram"
        assert err.value.numbers["reserved"] + err.value.numbers["requested"] > err.value.numbers["capacity"]
    finally:
        control.stop(engine, dep.run_id, opts=opts)
    assert _holder(engine, "rb3g2") is None
    with session_scope(engine, write=False) as s:
        ended = s.get(Lease, dep.lease_id)
    assert ended.end_reason == "released" and dep.run_id in ended.ended_by


def _env(url: str) -> dict[str, str]:
    import os

    return {**os.environ, "EDGELAB_DB": url}


def test_bench_and_deploy_together_cannot_overcommit_the_pool(deploy_lab):
    url, engine, opts = deploy_lab
    cancel = threading.Event()
    result: dict = {}

    def bench() -> None:  # a paced TTS bench that runs until cancelled
        try:
            result["res"] = run_bench(
                engine,
                BenchRequest(
                    "rb3g2",
                    "qwen3-tts",
                    runtime="reference",
                    warmup=0,
                    requests=1000,
                    frames=20,
                    frames_per_s=12.5,
                ),
                opts=opts,
                cancel=cancel,
            )
        except BaseException as e:  # noqa: BLE001
            result["err"] = e

    t = threading.Thread(target=bench)
    t.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not [r for r in _open(engine, "rb3g2") if r.run_id]:
            assert t.is_alive(), result
            time.sleep(0.1)
        held = [r for r in _open(engine, "rb3g2") if r.run_id]
        assert held and all(r.deployment_id is None for r in held)
        with pytest.raises(Refusal) as err:
            launch.deploy(engine, DeployRequest("rb3g2", "internvla-a1"), opts=opts)
        r = err.value
        assert (
            r.code == "budget_exceeds_device" and r.pool == "ram" and r.numbers["reserved"] == held[0].bytes
        )
        assert "ram:" in str(r) and "requested" in str(r) and "capacity" in str(r)
    finally:
        cancel.set()
        t.join(timeout=120)
    assert result.get("res") is not None and result["res"].state == "stopped", result
    assert _open(engine, "rb3g2") == [] and _holder(engine, "rb3g2") is None
    second = launch.deploy(engine, DeployRequest("rb3g2", "internvla-a1"), opts=opts)  # fits once freed
    control.stop(engine, second.run_id, opts=opts)


def test_a_kicked_bench_stops_and_its_memory_is_freed(deploy_lab, monkeypatch):
    url, engine, opts = deploy_lab
    monkeypatch.setenv("EDGELAB_LEASE_TTL", "1.5")
    result: dict = {}

    def bench() -> None:
        result["res"] = run_bench(
            engine,
            BenchRequest(
                "s25", "qwen3-tts", runtime="reference", warmup=0, requests=1000, frames=20, frames_per_s=12.5
            ),
            opts=opts,
        )

    t = threading.Thread(target=bench)
    t.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not [r for r in _open(engine, "s25") if r.run_id]:
            time.sleep(0.1)
        lease = acquire(engine, names=["s25"], ttl_s=60, kick=True, holder=Holder("ops@lab"))
    finally:
        t.join(timeout=120)
    assert result["res"].state == "stopped"
    with session_scope(engine, write=False) as s:
        kicked = s.exec(select(Lease).where(Lease.end_reason == "kicked")).all()
        assert any(k.ended_by == f"kicked by ops@lab (lease {lease.id})" for k in kicked)
    assert _open(engine, "s25") == []
    release(engine, lease.id, holder=Holder("ops@lab"))


def test_device_rm_force_stops_the_deployment_and_ends_its_lease(deploy_lab):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    with session_scope(engine, write=False) as s:
        from edgelab.store.deployments import processes

        pids = [p.pid for p in processes(s, dep.id)]
    out = runner.invoke(app, ["--db", url, "device", "rm", "s25", "--yes", "--force"], env=_env(url))
    assert out.exit_code == 0, out.output
    assert f"stopped {dep.run_id}" in out.output and "removed s25" in out.output
    with session_scope(engine, write=False) as s:
        assert s.exec(select(Lease).where(Lease.id == dep.lease_id)).one().end_reason == "released"
        from edgelab.store.models import Device

        assert s.exec(select(Device).where(Device.name == "s25")).first() is None
    assert not any(alive_on_host(p) for p in pids)
    with pytest.raises(Exception):  # noqa: B017 - the row is gone with its device
        with session_scope(engine, write=False) as s:
            get_deployment(s, dep.run_id)


def test_a_deployment_under_the_callers_lease_pins_it_until_stop(deploy_lab):
    url, engine, opts = deploy_lab
    mine = acquire(engine, names=["orin-agx"], ttl_s=600, purpose="my session")
    dep = launch.deploy(engine, DeployRequest("orin-agx", "qwen3-tts"), opts=opts, lease_id=mine.id)
    try:
        assert dep.lease_id == mine.id
        with pytest.raises(LeaseHeld) as err:  # releasing it would orphan the running deployment
            release(engine, mine.id)
        assert f"edgelab stop {dep.run_id}" in err.value.remedy
    finally:
        control.stop(engine, dep.run_id, opts=opts)
    with session_scope(engine, write=False) as s:
        after = s.get(Lease, mine.id)
    assert after.released_at is None and after.users == 0  # a reserved lease outlives what ran under it
    assert release(engine, mine.id).end_reason == "released"
