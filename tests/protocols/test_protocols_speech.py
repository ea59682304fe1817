"""Speech streaming clients (WebSocket and HTTP) against the lab-side servers on loopback ports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from websockets.sync.client import connect

from edgelab.errors import ConfigError, TransportError
from edgelab.metrics.events import (
    AudioChunk,
    ErrorEvent,
    RequestEnd,
    RequestStart,
    StageTiming,
    decode,
    encode,
)
from edgelab.protocols.speech_http import SpeechHTTPClient, SpeechHTTPServer
from edgelab.protocols.speech_ws import ServerOptions, SpeechServer, SpeechStreamClient
from edgelab.reference.tts import SAMPLES_PER_FRAME, CodecDecoder, Talker, chunk_sizes, frames_for_text

TEXT = "Hello there, this is a test of the lab speech stream."  # 47 frames


def _offline_pcm(text: str, seed: int = 0) -> bytes:
    codes = np.stack(list(Talker(seed).frames(text, frames_for_text(text))))
    return CodecDecoder(seed).decode(codes).astype("<i2").tobytes()


def same_audio(a: bytes, b: bytes) -> bool:
    """Equal up to one LSB: decoding in other chunk shapes changes float rounding, not the sound."""
    x, y = np.frombuffer(a, "<i2").astype(np.int32), np.frombuffer(b, "<i2").astype(np.int32)
    return x.shape == y.shape and int(np.abs(x - y).max(initial=0)) <= 1


@pytest.fixture(scope="module")
def fast_server():
    srv = SpeechServer(ServerOptions(frames_per_s=None, schedule="server")).start()
    try:
        yield srv
    finally:
        srv.stop()


def test_ws_client_gets_the_schedule_chunks_and_the_exact_audio(fast_server):
    seen = []
    client = SpeechStreamClient(fast_server.url, run="w1", on_event=seen.append)
    res = client.synthesize(TEXT, phase="warmup", band="short")
    assert res.ok, res.error
    n = frames_for_text(TEXT)
    assert [c.samples for c in res.chunks() if c.samples] == [
        k * SAMPLES_PER_FRAME for k in chunk_sizes((1, 25), n)
    ]
    assert same_audio(res.pcm, _offline_pcm(TEXT))  # chunked decoding with left context == one decode
    assert res.total_bytes == len(res.pcm) == n * SAMPLES_PER_FRAME * 2
    assert res.start_info["sample_rate"] == 24000 and res.start_info["weights"] == "random"
    assert seen == res.events and all(ev.run == "w1" for ev in seen)
    assert isinstance(seen[0], StageTiming) and isinstance(seen[1], RequestStart)
    assert seen[1].phase == "warmup" and seen[1].band == "short"
    assert isinstance(seen[-1], RequestEnd) and seen[-1].ok
    last_audio = [e for e in seen if isinstance(e, AudioChunk)][-1]
    assert last_audio.terminal and last_audio.samples == 0
    assert [decode(encode(e)) for e in seen] == seen  # events survive the wire format
    m = res.metrics()
    assert m.chunks == 3 and m.audio_ms == pytest.approx(n * 80.0)
    assert m.playback_start_ms >= m.ttfa_ms


def test_ws_session_config_is_honoured(fast_server):
    res = SpeechStreamClient(fast_server.url, config={"initial_codec_chunk_frames": 4}).synthesize(TEXT)
    assert [c.samples // SAMPLES_PER_FRAME for c in res.chunks() if c.samples] == [4, 25, 18]
    whole = SpeechStreamClient(fast_server.url, config={"stream_audio": False}).synthesize(TEXT)
    assert [c.samples for c in whole.chunks() if c.samples] == [len(whole.pcm) // 2]
    other_seed = SpeechStreamClient(fast_server.url, config={"seed": 7}).synthesize(TEXT)
    assert same_audio(other_seed.pcm, _offline_pcm(TEXT, seed=7))
    assert not same_audio(other_seed.pcm, whole.pcm)


def test_ws_errors_are_reported_not_raised(fast_server):
    res = SpeechStreamClient(fast_server.url, config={"response_format": "mp3"}).synthesize(TEXT)
    assert not res.ok and "mp3" in res.error
    assert any(isinstance(e, ErrorEvent) and e.cls == "workload" for e in res.events)
    assert isinstance(res.events[-1], RequestEnd) and not res.events[-1].ok
    with connect(fast_server.stream_url) as ws:  # protocol order enforced
        ws.send(json.dumps({"type": "input.text", "text": "hi"}))
        assert json.loads(ws.recv(timeout=10))["type"] == "error"
    with pytest.raises(TransportError):  # only the stream path is served
        SpeechStreamClient(fast_server.url + "/v1/other").synthesize(TEXT)


def test_ws_ramp_removes_the_first_chunk_stall_seen_from_the_lab():
    res = {}
    for sched in ("server", "ramp"):
        with SpeechServer(ServerOptions(frames_per_s=50, schedule=sched)) as srv:
            res[sched] = SpeechStreamClient(srv.url).synthesize("x" * 68).metrics()  # 61 frames
    assert res["server"].underruns_at_ttfa >= 1
    assert res["server"].stall_ms_at_ttfa > res["ramp"].stall_ms_at_ttfa


@pytest.mark.parametrize("fmt", ["audio", "sse"])
def test_http_streaming_client_raw_and_sse(fmt):
    with (
        SpeechHTTPServer(ServerOptions(frames_per_s=None)) as srv,
        SpeechHTTPClient(srv.url, stream_format=fmt) as c,
    ):
        res = c.synthesize(TEXT)
        assert res.ok, res.error
        assert same_audio(res.pcm, _offline_pcm(TEXT))
        assert res.total_bytes == len(res.pcm)
        assert sum(ch.samples for ch in res.chunks()) == frames_for_text(TEXT) * SAMPLES_PER_FRAME
        if fmt == "sse":  # SSE keeps the server's chunking
            assert [ch.samples // SAMPLES_PER_FRAME for ch in res.chunks() if ch.samples] == [1, 25, 21]
        assert res.events[-2].terminal and res.events[-1].ok
        bad = SpeechHTTPClient(srv.url, extra={"response_format": "mp3"}).synthesize(TEXT)
        assert not bad.ok and "HTTP 400" in bad.error
        for extra in ({"response_format": "wav"}, {"response_format": "wav", "stream": False}):
            wav = SpeechHTTPClient(srv.url, stream_format=fmt, extra=extra).synthesize(TEXT)
            assert wav.ok, wav.error
            assert same_audio(wav.pcm, res.pcm)  # the (streaming or whole-file) WAV header is not audio
        # the connection stays usable after a refused request
        assert c.synthesize("Again.").ok


def test_servers_listen_on_loopback_only():
    with pytest.raises(ConfigError):
        SpeechServer(host="0.0.0.0")
    with pytest.raises(ConfigError):
        SpeechHTTPServer(host="0.0.0.0")
