"""Live aggregates equal the batch recompute from the stored raw samples; events round-trip."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor, finalize
from edgelab.metrics.live import RunAggregator
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import create_run, get_run, get_summary, requests_of, samples_of


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "lab.db"))
    dbmod.dispose_engines()


def test_events_round_trip_and_reject_garbage():
    evs = [
        ev.RunStart(t=1.0, run="r1", pipeline="qwen3-tts", meta={"control_hz": 10}),
        ev.AudioChunk(t=2.0, request="q", idx=3, samples=1920, sha256="ab" * 32),
        ev.ActionChunk(t=3.0, obs_t=2.5, infer_start=2.6, infer_end=2.9, horizon=50, dims=32),
        ev.ResourceSample(t=4.0, temps_c={"cpu": 41.5}, power_w={"VDD_IN": 7.2}),
        ev.ErrorEvent(t=5.0, cls="device", message="thermal shutdown"),
    ]
    for e in evs:
        assert ev.decode(ev.encode(e)) == e
    assert ev.ResourceSample(t=0).cpu_pct is None  # unknown counters are null, never zero
    with pytest.raises(ev.EventError):
        ev.decode('{"kind": "nope", "t": 1}')
    with pytest.raises(ev.EventError):
        ev.ErrorEvent(t=0, cls="cosmic")
    mixed = list(ev.decode_lines([ev.encode(evs[1]), "plain runtime output", ""]))
    assert isinstance(mixed[0], ev.AudioChunk) and isinstance(mixed[1], ev.LogLine)


def test_clock_offset_from_round_trip_corrects_device_times():
    # lab sends at 100.0, device stamps 150.3, lab receives at 100.2: offset = 150.3 - 100.1 = 50.2
    off = ev.ClockOffset.from_round_trip(100.0, 150.3, 100.2)
    assert off.offset_s == pytest.approx(50.2) and off.rtt_s == pytest.approx(0.2)
    best = ev.ClockOffset.best_of([(0.0, 60.0, 1.0), (10.0, 60.25, 10.1)])  # smaller RTT wins
    assert best.offset_s == pytest.approx(50.2)
    a = off.correct(ev.ActionChunk(t=151.0, obs_t=150.5, infer_start=150.6, infer_end=150.9))
    assert (a.t, a.obs_t, a.infer_end) == (pytest.approx(100.8), pytest.approx(100.3), pytest.approx(100.7))


def _run(engine, **meta):
    with session_scope(engine) as s:
        return create_run(s, pipeline="qwen3-tts", device_name="virt", meta=meta).id


def _tts_events(rid, requests):
    out = [ev.RunStart(t=0.0, run=rid)]
    for name, phase, submitted, chunks, end in requests:
        out.append(ev.RequestStart(t=submitted, run=rid, request=name, phase=phase, band="short"))
        for i, (dt, n) in enumerate(chunks):
            out.append(ev.AudioChunk(t=submitted + dt, run=rid, request=name, idx=i, samples=n))
        if end is not None:
            out.append(ev.RequestEnd(t=submitted + end, run=rid, request=name))
    return out


def test_ingest_stores_raw_samples_and_final_equals_live(engine):
    rid = _run(engine)
    evs = _tts_events(
        rid,
        [
            ("w0", "warmup", 10.0, [(0.5, 1920)], 0.6),
            # measured: TTFA 100 ms, C = 0, 80 -> t-C = 100, 170 -> playback start 170; stall 70 at TTFA
            ("m0", "measured", 20.0, [(0.1, 1920), (0.25, 1920)], 0.3),
            ("m1", "measured", 30.0, [(0.2, 3840), (0.25, 1920), (0.26, 0)], 0.4),
        ],
    )
    with Ingestor(engine, rid, batch=3) as ing:
        ing.feed_all(evs)
    with session_scope(engine, write=False) as s:
        run = get_run(s, rid)
        final = get_summary(s, rid, "final").metrics
        live = get_summary(s, rid, "live").metrics
        assert run.state == "finished" and run.finished_at is not None
        assert len(samples_of(s, rid, kind="audio")) == 6  # raw chunks kept, zero-sample marker too
        reqs = {r.request: r for r in requests_of(s, rid)}
    assert reqs["w0"].phase == "warmup" and reqs["m0"].metrics["audio"]["ttfa_ms"] == pytest.approx(100)
    assert final["live_equals_final"] is True
    assert {k: v for k, v in final.items() if k != "live_equals_final"} == live
    a = final["audio"]
    assert a["requests"] == 2  # the warm-up is not in the headline figures
    assert a["ttfa_ms"]["count"] == 2 and a["ttfa_ms"]["p95"] == pytest.approx(200)
    assert a["underruns_at_ttfa"] == 1 and a["stall_ms_at_ttfa"]["max"] == pytest.approx(70)
    assert final["requests"]["by_phase"] == {"warmup": 1, "measured": 2}
    assert final["action"] is None and final["text"] is None  # nothing measured: null, not zero
    assert finalize(engine, rid) == {k: v for k, v in final.items() if k != "live_equals_final"}


def test_run_summary_keeps_stages_resources_and_errors(engine):
    rid = _run(engine)
    with Ingestor(engine, rid) as ing:
        ing.feed_all(
            [
                ev.RunStart(t=0.0),
                ev.StageTiming(t=1.0, stage="spawn", start=0.0, end=0.25),
                ev.StageTiming(t=9.0, stage="load", start=1.0, end=9.0),
                ev.ResourceSample(
                    t=2.0,
                    device="orin",
                    temps_c={"CPU": 45.0, "GPU": 40.0},
                    rss_bytes=100,
                    mem_available_bytes=5000,
                    clocks_mhz={"cpu": 2200.0},
                ),
                ev.ResourceSample(
                    t=3.0,
                    device="orin",
                    temps_c={"CPU": 61.5},
                    rss_bytes=300,
                    mem_available_bytes=4000,
                    clocks_mhz={"cpu": 1400.0},
                    throttled=True,
                ),
                ev.ErrorEvent(t=4.0, cls="device", message="thermal throttling"),
            ]
        )
    with session_scope(engine, write=False) as s:
        m = get_summary(s, rid, "final").metrics
    assert m["stages_ms"]["spawn"]["p50"] == 250.0 and m["stages_ms"]["load"]["p50"] == 8000.0
    r = m["resources"]
    assert (r["samples"], r["peak_rss_bytes"], r["min_mem_available_bytes"]) == (2, 300, 4000)
    assert r["max_temp_c"] == {"CPU": 61.5, "GPU": 40.0} and r["min_clock_mhz"] == {"cpu": 1400.0}
    assert r["throttled"] is True and r["max_cpu_pct"] is None  # never sampled: null, not 0
    assert m["errors"] == {"device": 1} and m["live_equals_final"] is True


def test_codec_token_stream_first_frame_and_rate(engine):
    rid = _run(engine)
    with Ingestor(engine, rid) as ing:
        ing.feed_all(
            [
                ev.RequestStart(t=10.0, request="s4"),
                # 2, 4, 8 frames at 10.20, 10.36, 10.68 s: first frame 200 ms; 12 frames over 0.48 s = 25 frames/s
                ev.CodecFrames(t=10.20, request="s4", seq=0, n_frames=2, codebooks=16),
                ev.CodecFrames(t=10.36, request="s4", seq=1, n_frames=4, codebooks=16),
                ev.CodecFrames(t=10.68, request="s4", seq=2, n_frames=8, flags=0x1, codebooks=16),
                ev.RequestEnd(t=10.7, request="s4"),
            ]
        )
    with session_scope(engine, write=False) as s:
        m = get_summary(s, rid, "final").metrics
        per = requests_of(s, rid)[0].metrics["codec"]
    assert per["frames"] == 14 and per["first_frame_ms"] == pytest.approx(200)
    assert per["frames_per_s"] == pytest.approx(25.0)  # RTF 12.5 / 25 = 0.5
    assert m["codec"]["frames_per_s"]["p50"] == pytest.approx(25.0) and m["live_equals_final"] is True
    assert m["audio"] is None  # no PCM in an S4 codec stream: unknown, not zero


def test_vla_slow_step_shows_as_deadline_miss(engine):
    rid = _run(engine, control_period_s=0.1)
    evs = [ev.RunStart(t=0.0, run=rid, meta={"control_hz": 10})]
    for i in range(10):
        obs = 1.0 + i * 0.1
        infer = 0.04 if i != 6 else 0.25  # step 6 is slow: 250 ms inference
        evs.append(
            ev.ActionChunk(
                t=obs + infer + 0.005,
                run=rid,
                idx=i,
                obs_t=obs,
                infer_start=obs,
                infer_end=obs + infer,
                horizon=50,
                dims=32,
            )
        )
    with Ingestor(engine, rid) as ing:
        ing.feed_all(evs)
    with session_scope(engine, write=False) as s:
        a = get_summary(s, rid, "final").metrics["action"]
    assert a["chunks"] == 10 and a["deadline_misses"] == 1 and a["stale_aligned"] == 1
    # latencies nine x 40 ms and one 250 ms: p50 rank 5 -> 40, p95 rank 10 -> 250
    assert a["latency_ms"]["p50"] == pytest.approx(40) and a["latency_ms"]["p95"] == pytest.approx(250)


request_st = st.lists(
    st.tuples(
        st.sampled_from(["warmup", "measured", "sustained"]),
        st.lists(st.tuples(st.floats(0, 0.4, allow_nan=False), st.integers(0, 9600)), max_size=12),
        st.one_of(st.none(), st.floats(0, 2, allow_nan=False)),
    ),
    min_size=1,
    max_size=5,
)


extras_st = st.lists(
    st.one_of(
        st.builds(
            lambda d, temp, rss: ev.ResourceSample(
                t=50.0 + d, device="virt", temps_c={"CPU": temp}, rss_bytes=rss, power_w={"VDD_IN": temp / 10}
            ),
            st.floats(0, 10),
            st.floats(20, 95),
            st.one_of(st.none(), st.integers(0, 1 << 34)),
        ),
        st.builds(
            lambda d, dur, name: ev.StageTiming(t=60.0 + d, stage=name, start=60.0 + d, end=60.0 + d + dur),
            st.floats(0, 10),
            st.floats(0, 3),
            st.sampled_from(["spawn", "load", "first_output"]),
        ),
        st.builds(
            lambda d, cls: ev.ErrorEvent(t=70.0 + d, cls=cls, message="x"),
            st.floats(0, 1),
            st.sampled_from(["infra", "device", "workload"]),
        ),
    ),
    max_size=8,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request_st, extras_st)
def test_live_aggregates_equal_batch_recompute(engine, reqs, extras):
    rid = _run(engine)
    spec = []
    for i, (phase, gaps, end) in enumerate(reqs):
        t, chunks = 0.0, []
        for gap, n in gaps:
            t += gap
            chunks.append((t, n))
        spec.append((f"q{i}", phase, 100.0 * (i + 1), chunks, None if end is None else t + end))
    evs = _tts_events(rid, spec) + extras
    live = RunAggregator().feed_all(evs).summary()
    with Ingestor(engine, rid, batch=7) as ing:
        ing.feed_all(evs)
    assert finalize(engine, rid) == live
