"""Probing every virtual device end to end: real sshd, real adb server, real processes in personas."""

from __future__ import annotations

import socket

import pytest

from edgelab.inventory.probe import facts_from_raw, probe_device, probe_devices
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device, get_device
from edgelab.store.models import Device
from edgelab.store.snapshots import facts_hash, latest_snapshot

EXPECTED = {  # virtual device -> (catalog entry, class)
    "orin-agx": ("jetson-agx-orin-64gb", "jetson"),
    "orin-nano": ("jetson-orin-nano-8gb", "jetson"),
    "thor": ("jetson-agx-thor", "jetson"),
    "wsl-hx370": ("hx370-rtx5090-wsl", "cuda_discrete"),
    "win-hx370-rtx5090": ("hx370-rtx5090-win", "cuda_discrete"),
    "xelite-pc": ("snapdragon-x-elite-pc", "arm64_cpu"),
    "s25": ("galaxy-s25", "npu_phone"),
    "s24": ("galaxy-s24", "npu_phone"),
    "rb3g2": ("rb3-gen2", "npu_phone"),
    "sa8775p": ("sa8775p-adp", "npu_phone"),
}


def _dead_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_db(tmp_path_factory, ssh_lab, adb_lab):
    """A fresh database holding every virtual device, plus one whose sshd is down."""
    url = f"sqlite:///{tmp_path_factory.mktemp('probe-lab') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    engine = get_engine(url)
    with session_scope(engine) as s:
        add_device(
            s,
            Device(
                name="dead-orin",
                transport="ssh",
                ssh_host="127.0.0.11",
                ssh_port=_dead_port(),
                host_key_fingerprint=ssh_lab.host_key_fingerprint,
                virtual=True,
            ),
        )
    yield url, engine
    dbmod.dispose_engines()


@pytest.fixture(scope="module")
def fleet(lab_db, ssh_lab):
    url, engine = lab_db
    names = [*EXPECTED, "dead-orin", "s24-locked"]
    seen = []
    outcomes = probe_devices(
        engine,
        names,
        parallel=16,
        timeout=60,
        ssh_config=str(ssh_lab.ssh_config_path),
        on_progress=lambda o: seen.append(o.name),
    )
    assert sorted(seen) == sorted(names)
    return {o.name: o for o in outcomes}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_virtual_device_lands_on_its_catalog_entry_and_class(fleet, name):
    outcome = fleet[name]
    assert outcome.ok, outcome.error
    snap = outcome.snapshot
    entry, cls = EXPECTED[name]
    assert (snap.catalog_entry, snap.device_class) == (entry, cls), snap.classification
    assert snap.virtual is True
    assert snap.facts_hash == facts_hash(snap.facts)
    assert snap.edgelab_version and snap.duration_s > 0


def test_snapshot_keeps_raw_outputs_and_reparsing_gives_the_same_facts(fleet, lab_db):
    _url, engine = lab_db
    with session_scope(engine, write=False) as s:
        for name in EXPECTED:
            snap = latest_snapshot(s, name)
            sections = snap.raw["sections"]
            assert sections, name
            assert all("output" in sec and "exit_code" in sec for sec in sections.values())
            again = facts_from_raw(snap.raw).to_dict()
            assert again == snap.facts, name
            assert facts_hash(again) == snap.facts_hash


def test_raw_sections_are_what_the_device_shows(fleet):
    raw = fleet["orin-agx"].snapshot.raw["sections"]
    with open("edgelab/sim/personas/orin-agx/root/etc/nv_tegra_release") as f:
        assert raw["nv_tegra_release"]["output"] == f.read()
    assert "sun" in fleet["s25"].snapshot.raw["sections"]["getprop"]["output"]
    assert fleet["win-hx370-rtx5090"].snapshot.family == "windows"


def test_a_device_whose_sshd_is_down_fails_alone(fleet, lab_db):
    _url, engine = lab_db
    dead = fleet["dead-orin"]
    assert not dead.ok and dead.snapshot is not None and dead.error
    assert dead.snapshot.raw["sections"] == {}
    assert fleet["s24-locked"].ok is False
    assert all(fleet[n].ok for n in EXPECTED)
    with session_scope(engine, write=False) as s:
        assert get_device(s, "dead-orin").state == "offline"
        assert get_device(s, "s24-locked").state in ("unauthorized", "offline")
        orin = get_device(s, "orin-agx")
        assert orin.state == "online" and orin.last_seen is not None


def test_probe_past_its_timeout_is_killed_over_ssh(lab_db, ssh_lab, monkeypatch):
    import dataclasses

    from edgelab.probe.collectors import COLLECTORS, Source, linux

    # A source that outlasts the probe (a whole probe now takes less than any short timeout).
    slow = Source("slow", "sleep 60", None, "sleep 60")
    monkeypatch.setitem(
        COLLECTORS, "linux", dataclasses.replace(linux.COLLECTOR, sources=(*linux.SOURCES, slow))
    )
    _url, engine = lab_db
    snap = probe_device(engine, "orin-agx", timeout=3, ssh_config=str(ssh_lab.ssh_config_path))
    assert not snap.ok
    assert "ran past" in snap.error


def test_unknown_device_is_not_found(lab_db):
    from edgelab.errors import NotFound

    _url, engine = lab_db
    with pytest.raises(NotFound):
        probe_devices(engine, ["no-such-device"])
