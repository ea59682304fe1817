"""Runs in the store: provenance from the device's probe, states, stale runs, a 1 + 20 request TTS
bench whose summary recomputes identically from the raw samples (and stops doing so if a sample changes)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from edgelab.errors import ConfigError, NotFound
from edgelab.metrics import events as ev
from edgelab.metrics.audio import schedule_arrivals
from edgelab.metrics.ingest import Ingestor
from edgelab.metrics.provenance import PROVENANCE_KEYS
from edgelab.metrics.results import start_run, verify_recompute
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.models import Device, ProbeSnapshot, utcnow
from edgelab.store.runs import (
    RunSample,
    create_run,
    get_run,
    get_summary,
    mark_stale,
    requests_of,
    samples_of,
    set_state,
)
from edgelab.store.snapshots import add_snapshot


@pytest.fixture
def engine(db_url):
    """The same tests on SQLite and on the tests' own PostgreSQL server."""
    dbmod.dispose_engines()
    yield get_engine(db_url)
    dbmod.dispose_engines()


def _device(engine, name="virt-s25"):
    with session_scope(engine) as s:
        dev = add_device(s, Device(name=name, transport="adb", adb_serial="emulator-7001", virtual=True))
        add_snapshot(
            s,
            ProbeSnapshot(
                device_id=dev.id,
                device_name=name,
                edgelab_version="0.1.0",
                family="android",
                ok=True,
                facts={"x": 1},
                facts_hash="f" * 64,
                device_class="npu_phone",
                virtual=True,
            ),
        )


def test_start_run_fills_provenance_from_the_latest_probe(engine):
    _device(engine)
    rid = start_run(
        engine,
        pipeline="qwen3-tts",
        device="virt-s25",
        runtime="reference",
        strategy="S3",
        command=["edgelab", "bench", "qwen3-tts", "--device", "virt-s25", "--band", "short"],
        cache="warm",
        artifacts={"decoder.bin": "a" * 64},
    )
    with session_scope(engine, write=False) as s:
        run = get_run(s, rid)
    p = run.provenance
    assert set(PROVENANCE_KEYS) <= set(p)
    assert p["facts_hash"] == "f" * 64 and p["device_class"] == "npu_phone"
    assert p["virtual"] is True and run.virtual is True  # from the probe: a virtual device says so
    assert p["command"] == "edgelab bench qwen3-tts --device virt-s25 --band short"
    assert p["runtime_sha256"] == "unknown" and p["power"] == "unknown"  # applies, not known: said so
    assert p["endpoint"] is None and p["imported"] is None  # does not apply to this run: null
    assert p["edgelab_version"] == "0.1.0"
    assert p["git"] is None or len(p["git"]["commit"]) == 40
    with pytest.raises(ConfigError):
        start_run(engine, pipeline="x", device=None, cache="lukewarm")


def test_states_prefixes_and_stale_runs(engine):
    with session_scope(engine) as s:
        a = create_run(s, id="rabc111", pipeline="p")
        create_run(s, id="rabc222", pipeline="p")
        with pytest.raises(ConfigError):
            create_run(s, state="exploded")
    with session_scope(engine) as s:
        with pytest.raises(NotFound, match="ambiguous"):
            get_run(s, "rabc")
        assert get_run(s, "rabc1").id == a.id
        run = set_state(s, get_run(s, "rabc1"), "running")
        assert run.started_at is not None and run.finished_at is None
        run.heartbeat_at = utcnow() - timedelta(minutes=10)
        s.add(run)
    with session_scope(engine) as s:
        assert mark_stale(s, max_silence_s=60) == ["rabc111"]  # rabc222 is pending but was just created
    with session_scope(engine, write=False) as s:
        r = get_run(s, "rabc111")
        assert r.state == "failed" and "heartbeat" in r.error and r.finished_at is not None


def test_tts_bench_1_warmup_20_measured_recomputes_identically(engine):
    _device(engine)
    rid = start_run(engine, pipeline="qwen3-tts", device="virt-s25", runtime="reference", kind="bench")
    t = 1_750_000_000.0
    with Ingestor(engine, rid, batch=64) as ing:
        ing.feed(ev.RunStart(t=t, run=rid))
        for i in range(21):
            name, phase = (f"warmup-{i}", "warmup") if i == 0 else (f"short-{i - 1}", "measured")
            fps = 40 if i % 5 else 30  # every fifth request a slower producer
            sub = t + 10 * i
            ing.feed(ev.RequestStart(t=sub, run=rid, request=name, phase=phase, band="short"))
            for k, c in enumerate(
                schedule_arrivals([1, 25], total_frames=40 + i, frames_per_s=fps, latency_ms=120)
            ):
                ing.feed(
                    ev.AudioChunk(
                        t=sub + c.t_ms / 1000,
                        run=rid,
                        request=name,
                        idx=k,
                        samples=c.samples,
                        sha256=f"{k:064x}",
                    )
                )
            ing.feed(ev.RequestEnd(t=sub + 2.5, run=rid, request=name))
    with session_scope(engine, write=False) as s:
        reqs = requests_of(s, rid)
        final = get_summary(s, rid, "final")
        assert len(samples_of(s, rid, kind="audio")) > 21
    assert [r.phase for r in reqs].count("warmup") == 1 and [r.phase for r in reqs].count("measured") == 20
    assert final.metrics["live_equals_final"] is True
    assert final.provenance["facts_hash"] == "f" * 64  # the summary carries the provenance block
    a = final.metrics["audio"]
    # each 1 -> 25 request stalls once after its first chunk at these producer rates
    assert a["requests"] == 20 and a["underruns_at_ttfa"] == 20 and a["ttfa_ms"]["count"] == 20
    assert verify_recompute(engine, rid) is True
    # tamper with one raw chunk: the stored summary no longer recomputes from the evidence
    with engine.begin() as conn:
        conn.execute(
            update(RunSample.__table__)
            .where(
                RunSample.__table__.c.run_id == rid,
                RunSample.__table__.c.request == "short-3",
                RunSample.__table__.c.idx == 0,
            )
            .values(t_ms=5.0)
        )
    assert verify_recompute(engine, rid) is False
