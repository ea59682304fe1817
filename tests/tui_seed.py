"""A seeded lab database for the TUI tests and benchmarks/tui_start.py: devices and probe snapshots at fixed times.

The rows are written through the store API exactly as `device add` and `probe` write them;
the facts are built with the probe's own Facts model (as tests/probe/test_profile_derive.py does),
so the device page derives a real profile from them. Every seeded device is VIRTUAL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from edgelab.probe.facts import Accelerator, CpuCluster, Facts, MemoryPool
from edgelab.store.db import session_scope
from edgelab.store.devices import add_device
from edgelab.store.models import Device, ProbeSnapshot
from edgelab.store.snapshots import add_snapshot, facts_hash

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GIB = 1024**3


def orin(temp: float) -> Facts:
    f = Facts()
    f.identity.model, f.identity.module_pnumber, f.identity.soc_part = (
        "NVIDIA Jetson AGX Orin Developer Kit",
        "p3701-0005",
        "tegra234",
    )
    f.os.family, f.os.arch, f.os.l4t_version, f.os.distro = "linux", "aarch64", "36.4.4", "Ubuntu 22.04.5 LTS"
    f.cpu.clusters = [CpuCluster(cpus=list(range(12)), max_khz=2201600)]
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=64 * GIB))
    f.memory.unified = True
    f.accelerators.append(
        Accelerator(
            kind="gpu", vendor="NVIDIA", name="Orin integrated GPU", apis=["CUDA sm_87"], cuda_arch="sm_87"
        )
    )
    f.power.temperatures_c = {"cpu": temp, "gpu": temp - 2.5}
    return f


def phone(temp: float) -> Facts:
    f = Facts()
    f.identity.model, f.identity.soc_part, f.identity.board_platform = "Galaxy S25", "SM8750", "sun"
    f.os.family, f.os.arch = "android", "aarch64"
    f.cpu.features = ["neon", "fp16", "dotprod", "i8mm", "bf16"]
    f.cpu.clusters = [
        CpuCluster(cpus=[6, 7], max_khz=4473600),
        CpuCluster(cpus=[0, 1, 2, 3, 4, 5], max_khz=3532800),
    ]
    f.memory.pools.append(MemoryPool(kind="ram", total_bytes=12 * GIB))
    f.memory.unified = True
    f.accelerators += [
        Accelerator(kind="gpu", vendor="Qualcomm", name="Adreno 830", apis=["Vulkan", "OpenCL"]),
        Accelerator(kind="npu", vendor="Qualcomm", name="Hexagon v79", apis=["QNN HTP v79"]),
    ]
    f.power.temperatures_c = {"cpu-0": temp}
    return f


KINDS = (
    ("orin-agx", "jetson", "ssh", orin),
    ("s25", "npu_phone", "adb", phone),
)
STATES = ("online", "online", "offline", "unauthorized", "online", "unknown")


def seed(engine, n: int = 6, *, history: int = 3) -> list[str]:
    """``n`` devices alternating Jetson (ssh) / phone (adb); every third never probed; returns their names."""
    names = []
    with session_scope(engine) as s:
        for i in range(n):
            base, cls, transport, facts_of = KINDS[i % 2]
            name = f"{base}-{i:03d}"
            d = Device(
                name=name,
                transport=transport,
                device_class=cls,
                virtual=True,
                state=STATES[i % len(STATES)],
                tags=["lab-a" if i % 2 else "lab-b"],
                created_at=NOW,
                updated_at=NOW,
                last_checked=NOW,
                last_seen=NOW - timedelta(minutes=i),
            )
            if transport == "ssh":
                d.ssh_host, d.ssh_user, d.ssh_port = f"127.0.0.{11 + i % 200}", "lab", 2222
            else:
                d.adb_serial = f"127.0.0.1:{5586 + i}"
            if d.state == "unauthorized":
                d.state_detail = "adb: device unauthorized"
            add_device(s, d)
            s.flush()
            names.append(name)
            if i % 3 == 2:
                continue
            for h in range(history):
                facts = facts_of(40.0 + (i * 7 + h * 3) % 45).to_dict()
                add_snapshot(
                    s,
                    ProbeSnapshot(
                        device_id=d.id,
                        device_name=name,
                        taken_at=NOW - timedelta(minutes=5 * (i % 7) + 60 * (history - 1 - h)),
                        duration_s=0.5,
                        edgelab_version="0.1.0",
                        family=facts["os"]["family"],
                        ok=True,
                        raw={"family": facts["os"]["family"], "sections": {}},
                        facts=facts,
                        facts_hash=facts_hash(facts),
                        device_class=cls,
                        catalog_entry=None,
                        classification=None,
                        warnings=[],
                        virtual=True,
                    ),
                )
    return names
