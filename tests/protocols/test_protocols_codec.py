"""Codec-token (S4) stream: frame header round trip, frames and PCM end to end, segments, cancel."""

from __future__ import annotations

import numpy as np
import pytest

from edgelab.errors import FrameError
from edgelab.metrics.events import AudioChunk, CodecFrames
from edgelab.protocols.codec_ws import EOS, RESET, SEGMENT_END, CodecStreamClient, pack_frames, unpack_frames
from edgelab.protocols.speech_ws import ServerOptions, SpeechServer, SpeechStreamClient
from edgelab.reference.tts import CodecDecoder, Talker, frames_for_text

TEXT = "Hello there, this is a test of the lab codec stream."


def same_audio(a: bytes, b: bytes) -> bool:
    """Equal up to one LSB: decoding in other chunk shapes changes float rounding, not the sound."""
    x, y = np.frombuffer(a, "<i2").astype(np.int32), np.frombuffer(b, "<i2").astype(np.int32)
    return x.shape == y.shape and int(np.abs(x - y).max(initial=0)) <= 1


def test_header_is_7_bytes_little_endian_then_int16_frame_major():
    codes = np.array([[i * 16 + j for j in range(16)] for i in range(2)], dtype=np.int16)
    data = pack_frames(258, codes, EOS | SEGMENT_END)
    assert data[:7] == b"\x02\x01\x00\x00" + b"\x02\x00" + b"\x03"
    assert data[7:9] == b"\x00\x00" and data[9:11] == b"\x01\x00"  # frame 0, codebooks 0 and 1
    assert len(data) == 7 + 2 * 16 * 2
    seq, flags, back = unpack_frames(data)
    assert (seq, flags) == (258, 3) and np.array_equal(back, codes)
    with pytest.raises(FrameError):
        unpack_frames(data[:-1])
    with pytest.raises(FrameError):
        unpack_frames(b"\x00\x00")


@pytest.fixture(scope="module")
def server():
    srv = SpeechServer(ServerOptions(frames_per_s=None, schedule="ramp")).start()
    try:
        yield srv
    finally:
        srv.stop()


def test_frames_round_trip_and_the_device_vocoder_matches_the_server_audio(server):
    res = CodecStreamClient(server.url, run="c1").stream(TEXT)
    assert res.ok, res.error
    n = frames_for_text(TEXT)
    assert np.array_equal(res.all_codes(), np.stack(list(Talker(0).frames(TEXT, n))))
    assert [c.shape[0] for c in res.codes] == [2, 4, 8, 16, 16]
    assert res.seqs == list(range(5)) and res.flags == [0, 0, 0, 0, EOS | SEGMENT_END]
    assert res.start_info["codebooks"] == 16 and res.start_info["codebook_size"] == 2048
    assert res.start_info["frame_rate_hz"] == 12.5 and res.start_info["sample_rate"] == 24000
    assert res.done_info == {
        "type": "codec.done",
        "total_frames": n,
        "seq_last": 4,
        "error": None,
        "cancelled": False,
    }
    frames_ev = [e for e in res.events if isinstance(e, CodecFrames)]
    audio_ev = [e for e in res.events if isinstance(e, AudioChunk)]
    assert [e.n_frames for e in frames_ev] == [2, 4, 8, 16, 16]
    assert [e.samples for e in audio_ev] == [k * 1920 for k in (2, 4, 8, 16, 16)] and audio_ev[-1].terminal
    # the same text through the speech stream: identical PCM (S4 moves the vocoder, not the sound)
    assert res.pcm == SpeechStreamClient(server.url).synthesize(TEXT).pcm


def test_segments_end_and_reset_the_vocoder_context(server):
    segs = [TEXT, "A second sentence."]
    res = CodecStreamClient(server.url).stream(segs)
    assert res.ok, res.error
    n1, n2 = frames_for_text(segs[0]), frames_for_text(segs[1])
    assert res.total_frames == n1 + n2
    flags = res.flags
    assert (
        flags[4] == SEGMENT_END and flags[5] & RESET and flags[-1] & (EOS | SEGMENT_END) == EOS | SEGMENT_END
    )
    dec = CodecDecoder(0)
    expect = b"".join(
        dec.decode(np.stack(list(Talker(0).frames(s, frames_for_text(s))))).astype("<i2").tobytes()
        for s in segs
    )
    assert same_audio(res.pcm, expect)  # no left context leaked across the RESET


def test_cancel_stops_the_stream_and_counts_match():
    long_text = "x" * 300  # 268 frames, 2.7 s at 100 frames/s
    with SpeechServer(ServerOptions(frames_per_s=100, schedule="server")) as srv:
        res = CodecStreamClient(srv.url, decode=False).stream(long_text, cancel_after_frames=26)
        assert res.ok, res.error
        assert res.cancelled and res.cancel_t is not None
        assert 26 <= res.total_frames < frames_for_text(long_text)
        assert res.done_info["total_frames"] == res.total_frames and res.done_info["seq_last"] == res.seqs[-1]
        assert not any(f & EOS for f in res.flags)
        assert res.pcm == b""  # decode=False: frames only
        # the server is still serving after a cancelled session
        assert CodecStreamClient(srv.url, decode=False).stream("Short one.").ok
