"""Reference qwen3-tts: real numpy compute on random weights, the pipeline's shapes and chunk schedules.

The workload runs as a real process read through the local transport, as deploy launches it.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from edgelab.errors import ConfigError
from edgelab.metrics.audio import Chunk as MChunk
from edgelab.metrics.audio import audio_metrics
from edgelab.metrics.events import AudioChunk, RequestEnd, RequestStart, RunEnd, RunStart, decode_lines
from edgelab.reference.tts import (
    CODEBOOKS,
    SAMPLES_PER_FRAME,
    CodecDecoder,
    ReferenceTTS,
    Talker,
    chunk_sizes,
    frames_for_text,
    schedule_of,
)
from edgelab.transport.local import LocalTransport


def test_chunk_sizes_follow_the_schedules():
    assert chunk_sizes(schedule_of("server"), 60) == [1, 25, 25, 9]
    assert chunk_sizes(schedule_of("ramp"), 60) == [2, 4, 8, 16, 25, 5]
    assert chunk_sizes(schedule_of("ramp"), 3) == [2, 1]
    assert chunk_sizes(schedule_of("2,3"), 8) == [2, 3, 3]
    with pytest.raises(ConfigError):
        schedule_of("0,4")


def test_decoder_makes_1920_samples_per_frame_and_uses_left_context():
    dec = CodecDecoder(seed=1)
    codes = np.asarray(list(Talker(seed=1).frames("hello there", 40)), dtype=np.int16)
    assert codes.shape == (40, CODEBOOKS)
    full = dec.decode(codes)
    assert full.dtype == np.int16 and full.shape == (40 * SAMPLES_PER_FRAME,)
    assert np.abs(full.astype(np.int32)).max() > 1000  # real signal, not silence
    # the last 10 frames decoded with their left context equal the same frames of the whole decode
    tail = dec.decode(codes[30:], context=codes[:30])
    assert np.abs(tail.astype(np.int32) - full[30 * SAMPLES_PER_FRAME :]).max() <= 1  # float rounding only
    # without the context the convolutions see zeros: different audio
    assert not np.array_equal(dec.decode(codes[30:]), tail)


def test_same_seed_same_audio_other_seed_other_audio():
    a = [c.sha256 for c in ReferenceTTS(frames_per_s=None, seed=3).stream("abc", n_frames=12)]
    b = [c.sha256 for c in ReferenceTTS(frames_per_s=None, seed=3).stream("abc", n_frames=12)]
    c = [c.sha256 for c in ReferenceTTS(frames_per_s=None, seed=4).stream("abc", n_frames=12)]
    assert a == b and a != c
    assert frames_for_text("x" * 140) == 125  # 10 s of speech at 14 chars/s, 12.5 frames/s


def _run(transport: LocalTransport, *args: str) -> list:
    proc = transport.stream([sys.executable, "-m", "edgelab.reference", "tts", *args])
    try:
        lines = list(proc.lines())
        assert proc.wait(60) == 0, proc.stderr
    finally:
        proc.cancel()
    for line in lines:  # every line says what produced it
        assert '"runtime":"reference"' in line and '"weights":"random"' in line
    return list(decode_lines(lines, skip_other=False))


def _requests(events: list) -> dict[str, tuple[float, float, list[AudioChunk]]]:
    out: dict[str, list] = {}
    for ev in events:
        if isinstance(ev, RequestStart):
            out[ev.request] = [ev.t, None, []]
        elif isinstance(ev, AudioChunk):
            out[ev.request][2].append(ev)
        elif isinstance(ev, RequestEnd):
            out[ev.request][1] = ev.t
    return {k: tuple(v) for k, v in out.items()}


def _metrics(t0: float, t1: float, chunks: list[AudioChunk]):
    mc = [MChunk(t_ms=(c.t - t0) * 1000.0, samples=c.samples, sr=c.sample_rate) for c in chunks]
    return audio_metrics(mc, wall_ms=(t1 - t0) * 1000.0)


def test_process_streams_the_schedule_as_events(local_transport):
    events = _run(
        local_transport,
        "--schedule",
        "server",
        "--frames",
        "60",
        "--frames-per-s",
        "0",
        "--requests",
        "2",
        "--warmup",
        "1",
        "--run",
        "r1",
    )
    assert isinstance(events[0], RunStart) and isinstance(events[-1], RunEnd)
    assert events[0].runtime == "reference" and events[0].meta["weights"] == "random"
    assert all(ev.run == "r1" for ev in events)
    starts = [ev for ev in events if isinstance(ev, RequestStart)]
    assert [s.phase for s in starts] == ["warmup", "measured", "measured"]
    reqs = _requests(events)
    assert len(reqs) == 3
    for _t0, _t1, chunks in reqs.values():
        assert [c.samples for c in chunks] == [n * SAMPLES_PER_FRAME for n in (1, 25, 25, 9)]
        assert all(c.sample_rate == 24000 for c in chunks)
        assert [c.terminal for c in chunks] == [False, False, False, True]
    # same seed and text: every request produces the same audio
    hashes = {tuple(c.sha256 for c in chunks) for _a, _b, chunks in reqs.values()}
    assert len(hashes) == 1


def test_ramp_removes_the_first_chunk_stall_of_1_then_25(local_transport):
    """At 50 frames/s (RTF 0.25) the 1 -> 25 schedule hears 80 ms, then waits for 25 frames;
    the ramp's chunks each arrive before the audio before them has played."""
    res = {}
    for sched in ("server", "ramp"):
        events = _run(local_transport, "--schedule", sched, "--frames", "60", "--frames-per-s", "50")
        ((t0, t1, chunks),) = _requests(events).values()
        res[sched] = _metrics(t0, t1, chunks)
    server, ramp = res["server"], res["ramp"]
    for m in (server, ramp):
        assert m.audio_ms == pytest.approx(60 * 80.0)
        assert m.playback_start_ms >= m.ttfa_ms
    assert server.underruns_at_ttfa >= 1
    assert server.stall_ms_at_ttfa > ramp.stall_ms_at_ttfa
    assert server.playback_start_ms - server.ttfa_ms > ramp.playback_start_ms - ramp.ttfa_ms


def test_bad_schedule_is_a_usage_error(local_transport):
    r = local_transport.run([sys.executable, "-m", "edgelab.reference", "tts", "--schedule", "nope"])
    assert r.exit_code == 2
    assert "bad chunk schedule" in r.stderr and "->" in r.stderr
