# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Provenance without holes: a bench on the virtual phone and Jetson records the runtime build and
its SHA-256, artifacts, weights, the observed cache condition and what the device says of its power;
a later run is warm, a push in between makes it cold again; unknown is said, never null."""

from __future__ import annotations

import re

from deploy.test_deploy_helpers import deploy_lab  # noqa: F401 - fixture

from edgelab.bench import BenchRequest, run_bench
from edgelab.matrix.evidence import missing_provenance
from edgelab.metrics.provenance import (
    UNKNOWN,
    observe_cache,
    power_condition,
    reference_build,
    run_provenance,
)
from edgelab.store.artifacts import Artifact, ArtifactFile, DeviceStoreEntry
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.store.models import utcnow
from edgelab.store.runs import get_run


def _bench(engine, opts, device="s25"):
    res = run_bench(
        engine,
        BenchRequest(
            device,
            "qwen3-tts",
            runtime="reference",
            warmup=1,
            requests=2,
            band="short",
            frames=3,
            frames_per_s=0,
        ),
        opts=opts,
    )
    with session_scope(engine, write=False) as s:
        return dict(get_run(s, res.run_id).provenance), dict(get_run(s, res.run_id).meta)


def test_a_bench_run_has_every_provenance_field_and_the_cache_is_observed(deploy_lab):
    _url, engine, opts = deploy_lab
    first, meta = _bench(engine, opts)
    build, sha = reference_build()
    assert (
        first["runtime_build"] == build
        and first["runtime_sha256"] == sha
        and re.fullmatch(r"[0-9a-f]{64}", sha)
    )
    assert first["artifacts"] == {} and first["weights"] == "random" and meta["weights"] == "random"
    assert (
        first["strategy_label"].endswith("(reference imitation)")
        and first["runtime_library"]["sha256"] == sha
    )
    assert first["cache"] == "cold" and "first run" in first["cache_basis"]
    assert (
        first["power"]["charger"] and first["power"]["battery_pct"] is not None
    )  # the phone's dumpsys battery
    assert missing_provenance(first, meta) == []  # complete: the matrix refuses it for other reasons
    second, _ = _bench(engine, opts)
    assert second["cache"] == "warm" and second["cache_basis"].startswith("run ")
    jetson, _ = _bench(engine, opts, device="orin-agx")
    assert jetson["power"]["mode"] == "MAXN" and jetson["cache"] == "cold"


def test_a_push_after_the_last_run_makes_the_next_load_cold(deploy_lab):
    _url, engine, _opts = deploy_lab
    with session_scope(engine) as s:
        art = Artifact(
            name="tiny-gguf", digest="d" * 64, kind="weights", target="any", meta={"weights": "random"}
        )
        s.add(art)
        s.flush()
        s.add(ArtifactFile(artifact_id=art.id, path="model.gguf", size=3, sha256="e" * 64))
        dev = get_device(s, "rb3g2")
        prov = run_provenance(
            s,
            source="bench",
            device="rb3g2",
            runtime="llama.cpp",
            plan={
                "artifacts": [
                    {
                        "role": "weights",
                        "name": "tiny-gguf",
                        "kind": "weights",
                        "present": True,
                        "placeholder": "model",
                        "digest": "d" * 64,
                        "sha256": "e" * 64,
                        "file": "model.gguf",
                        "bytes": 3,
                        "ext": ".gguf",
                    },
                    {"role": "vocoder", "kind": "model", "present": False, "placeholder": "vocoder"},
                ]
            },
        )
        # by role: the file the process loads (its blob's SHA-256); a model not bound is not in it
        assert prov["artifacts"] == {"weights": "e" * 64}
        assert (
            prov["models"]["weights"]["artifact"] == "tiny-gguf" and prov["models"]["weights"]["bytes"] == 3
        )
        assert prov["weights"] == "random"  # the artifact's own word, read from the registry
        assert prov["runtime_build"] == UNKNOWN  # no runtime build bound: unknown, said so
        assert prov["cache"] == "cold"
        from edgelab.store.runs import create_run

        create_run(
            s,
            id="r-prev",
            device_name="rb3g2",
            runtime="llama.cpp",
            state="finished",
            provenance={"artifacts": {"weights": "e" * 64}},
        )
        s.flush()
        assert observe_cache(s, device="rb3g2", runtime="llama.cpp", artifact_digests=["e" * 64])[0] == "warm"
        s.add(
            DeviceStoreEntry(device_id=dev.id, sha256="e" * 64, size=3, verified_at=utcnow())
        )  # pushed again
        s.flush()
        state, why = observe_cache(s, device="rb3g2", runtime="llama.cpp", artifact_digests=["e" * 64])
        assert state == "cold" and "pushed" in why
        s.rollback()


def test_power_condition_says_unknown_when_the_device_says_nothing():
    assert power_condition({}) == UNKNOWN
    assert power_condition({"power": {"battery": {"level_pct": 50, "plugged": "none"}}}) == {
        "battery_pct": 50,
        "charger": "none",
        "on": "battery",
    }
