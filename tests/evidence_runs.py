"""Helpers for matrix tests: a probed device of a catalog entry, and a run with complete evidence.

A complete run is what the matrix accepts: finished, a real runtime on real weights, the
protocol's counts (1 warm-up + 20 measured per band) and every provenance field filled.
Each keyword spoils one condition, so a test can show the refusal it names.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from edgelab.store.devices import add_device
from edgelab.store.models import Device, ProbeSnapshot
from edgelab.store.runs import RunRequest, create_run
from edgelab.store.snapshots import add_snapshot


def probed_device(
    s: Session,
    name: str,
    entry: str | None,
    *,
    virtual: bool = False,
    transport: str = "adb",
    device: Device | None = None,
) -> Device:
    """A device (``device``, or a new one) whose latest probe matched catalog entry ``entry`` (its matrix row)."""
    dev = device or add_device(
        s, Device(name=name, transport=transport, adb_serial=f"SER-{name}", virtual=virtual)
    )
    s.flush()
    add_snapshot(
        s,
        ProbeSnapshot(
            device_id=dev.id,
            device_name=name,
            edgelab_version="0.1.0",
            family="android",
            ok=True,
            facts={"name": name},
            facts_hash="f" * 64,
            device_class="npu_phone",
            catalog_entry=entry,
            virtual=virtual,
        ),
    )
    return dev


def complete_provenance(device: str, runtime: str, weights: str) -> dict[str, Any]:
    return {
        "device": device,
        "device_class": "npu_phone",
        "facts_hash": "f" * 64,
        "virtual": False,
        "runtime": runtime,
        "runtime_build": f"{runtime} b6500 opencl",
        "runtime_sha256": "b" * 64,
        "artifacts": {"model.gguf": "c" * 64},
        "weights": weights,
        "strategy": "S3",
        "profile": "npu_phone",
        "command": "llama-server -m model.gguf",
        "edgelab_version": "0.1.0",
        "git": {"commit": "0" * 40, "dirty": False},
        "cache": "warm",
        "power": {"charger": "usb", "battery_pct": 80},
        "source": "bench:single_request_batch1_v1",
    }


def evidence_run(
    s: Session,
    rid: str,
    device: str | None,
    pipeline: str,
    *,
    runtime: str = "llama.cpp",
    weights: str = "real",
    warmup: int = 1,
    measured: int = 20,
    bands: tuple[str, ...] = ("short",),
    state: str = "finished",
    virtual: bool = False,
    protocol: str | None = "single_request_batch1_v1",
    drop: tuple[str, ...] = (),
    kind: str = "bench",
    **extra: Any,
) -> str:
    """A run of ``pipeline`` on ``device``; ``drop`` names provenance fields to leave unknown."""
    prov = complete_provenance(device or "?", runtime, weights)
    for key in drop:
        prov[key] = None
    meta = {"protocol": protocol, "weights": weights, "warmup": warmup, "requests": measured, "batch": 1}
    create_run(
        s,
        id=rid,
        device_name=device,
        pipeline=pipeline,
        runtime=runtime,
        strategy="S3",
        kind=kind,
        state=state,
        virtual=virtual,
        provenance=prov,
        meta=meta,
        **extra,
    )
    t = 1_700_000_000.0
    for band in bands:
        for i in range(warmup + measured):
            s.add(
                RunRequest(
                    run_id=rid,
                    request=f"{rid}-{band}-{i}",
                    phase="warmup" if i < warmup else "measured",
                    band=band,
                    submitted=t + i,
                    finished=t + i + 0.5,
                    ok=True,
                )
            )
    s.flush()
    return rid
