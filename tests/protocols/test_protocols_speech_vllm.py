"""vLLM-Omni's speech-stream protocol, both sides.

A client written to vLLM-Omni's ``serving_speech_stream.py`` (sentence-split input, pcm and
wav, several utterances on one connection, no session.close) against edgelab's lab-side
server; and edgelab's client against edgelab's server and against a server that replays a
vLLM-Omni stream, measured the same way, per sentence.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection
from websockets.sync.client import connect

from edgelab.metrics.events import AudioChunk, StageTiming
from edgelab.protocols.serving import BackgroundServer
from edgelab.protocols.speech_text import TextSplitter
from edgelab.protocols.speech_ws import PATH, ServerOptions, SpeechServer, SpeechStreamClient
from edgelab.protocols.wav import parse_wav_header, wav_header
from edgelab.reference.tts import SAMPLES_PER_FRAME, CodecDecoder, Talker, frames_for_text

TWO = "Hello there, this is the first one. And here is the second sentence!"


def offline_pcm(text: str, seed: int = 0) -> bytes:
    codes = np.stack(list(Talker(seed).frames(text, frames_for_text(text))))
    return CodecDecoder(seed).decode(codes).astype("<i2").tobytes()


def close_pcm(a: bytes, b: bytes) -> bool:
    x, y = np.frombuffer(a, "<i2").astype(np.int32), np.frombuffer(b, "<i2").astype(np.int32)
    return x.shape == y.shape and int(np.abs(x - y).max(initial=0)) <= 1


@pytest.fixture(scope="module")
def server():
    srv = SpeechServer(ServerOptions(frames_per_s=None, schedule="server")).start()
    try:
        yield srv
    finally:
        srv.stop()


def read_utterance(ws) -> list:
    """Messages up to session.done, as a vLLM-Omni client reads them (JSON as dicts, audio as bytes)."""
    out = []
    while True:
        msg = ws.recv(timeout=30)
        out.append(msg if isinstance(msg, bytes) else json.loads(msg))
        if isinstance(out[-1], dict) and out[-1]["type"] in ("session.done", "error"):
            return out


@pytest.mark.parametrize(
    ("text", "granularity", "expected"),
    [
        ("Hello world. How are you?", "sentence", ["Hello world.", "How are you?"]),
        ("It costs 3.5 euros. Fine", "sentence", ["It costs 3.5 euros.", "Fine"]),
        ("Version 2.0 is out! Yes", "sentence", ["Version 2.0 is out!", "Yes"]),
        ("One, two; three.", "clause", ["One,", "two;", "three."]),
        ("你好。世界！", "sentence", ["你好。", "世界！"]),
        ("Hello world. How are you?", "none", ["Hello world. How are you?"]),
    ],
)
def test_splitter_cuts_like_vllm_omni(text, granularity, expected):
    sp = TextSplitter(granularity)
    units = []
    for ch in text:  # fed one character at a time, as an incremental client may
        units += sp.feed(ch)
    assert units + sp.flush() == expected


def test_a_vllm_omni_client_gets_per_sentence_audio_pcm_then_wav_on_one_connection(server):
    with connect(server.url + PATH) as ws:
        ws.send(
            json.dumps(
                {
                    "type": "session.config",
                    "response_format": "pcm",
                    "stream_audio": True,
                    "split_granularity": "sentence",
                }
            )
        )
        for piece in ("Hello there, this is the first ", "one. And here is ", "the second sentence!"):
            ws.send(json.dumps({"type": "input.text", "text": piece}))
        ws.send(json.dumps({"type": "input.done"}))
        msgs = read_utterance(ws)
        # sentence 0 was synthesized before input.done (its boundary arrived with the 2nd chunk)
        starts = [m for m in msgs if isinstance(m, dict) and m["type"] == "audio.start"]
        dones = [m for m in msgs if isinstance(m, dict) and m["type"] == "audio.done"]
        assert [(s["utterance_index"], s["sentence_index"]) for s in starts] == [(0, 0), (0, 1)]
        assert [s["sentence_text"] for s in starts] == [
            "Hello there, this is the first one.",
            "And here is the second sentence!",
        ]
        assert all(s["format"] == "pcm" and s["sample_rate"] == 24000 and s["channels"] == 1 for s in starts)
        assert [(d["utterance_index"], d["sentence_index"]) for d in dones] == [(0, 0), (0, 1)]
        assert msgs[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 2}
        # audio of each sentence sits between its start and done, and is that sentence's speech
        for k, s in enumerate(starts):
            a, b = msgs.index(s), msgs.index(dones[k])
            pcm = b"".join(m for m in msgs[a:b] if isinstance(m, bytes))
            assert close_pcm(pcm, offline_pcm(s["sentence_text"]))
            assert dones[k]["total_bytes"] == len(pcm) and dones[k]["error"] is False

        # the connection stays open: a new config (wav, not streamed, no split) for utterance 1
        ws.send(json.dumps({"type": "session.config", "response_format": "wav"}))
        ws.send(json.dumps({"type": "input.text", "text": TWO}))
        ws.send(json.dumps({"type": "input.done"}))
        msgs = read_utterance(ws)
        assert msgs[0]["type"] == "audio.start" and msgs[0]["format"] == "wav"
        assert msgs[0]["utterance_index"] == 1 and msgs[0]["sentence_index"] == 0
        assert "sample_rate" not in msgs[0]  # only streamed pcm states the rate in audio.start
        body = [m for m in msgs if isinstance(m, bytes)]
        assert len(body) == 1  # one whole WAV file per sentence when not streamed
        info = parse_wav_header(body[0])
        assert info is not None and info.sample_rate == 24000 and info.channels == 1
        assert close_pcm(body[0][info.data_offset :], offline_pcm(TWO))
        assert msgs[-1] == {"type": "session.done", "utterance_index": 1, "total_sentences": 1}
        # no session.close: the client just hangs up, as vLLM-Omni allows


def test_the_server_defaults_and_refusals_follow_vllm_omni(server):
    with connect(server.url + PATH) as ws:  # defaults: wav, not streamed, no split
        ws.send(json.dumps({"type": "session.config"}))
        ws.send(json.dumps({"type": "input.text", "text": "One. Two."}))
        ws.send(json.dumps({"type": "session.config", "response_format": "pcm"}))  # mid-utterance: refused
        refused = json.loads(ws.recv(timeout=30))
        assert refused["type"] == "error" and "input.done" in refused["message"]
        ws.send(json.dumps({"type": "input.done"}))
        msgs = read_utterance(ws)
        assert msgs[0]["format"] == "wav" and msgs[0]["sentence_text"] == "One. Two."
        assert msgs[-1]["total_sentences"] == 1
        ws.send(json.dumps({"type": "input.done"}))  # an empty flush: no sentence, still a session.done
        assert json.loads(ws.recv(timeout=30)) == {
            "type": "session.done",
            "utterance_index": 1,
            "total_sentences": 0,
        }
        ws.send(json.dumps({"type": "bogus"}))
        assert "Unknown message type" in json.loads(ws.recv(timeout=30))["message"]
        ws.send(json.dumps({"type": "session.close"}))
        assert json.loads(ws.recv(timeout=30))["type"] == "session.done"  # kept for older clients
    with connect(server.url + PATH) as ws:
        ws.send(json.dumps({"type": "input.text", "text": "hi"}))
        assert json.loads(ws.recv(timeout=30))["message"] == "Expected session.config, got: input.text"
    with connect(server.url + PATH) as ws:
        ws.send(json.dumps({"type": "session.config", "split_granularity": "word"}))
        assert "split_granularity" in json.loads(ws.recv(timeout=30))["message"]


def test_edgelab_client_measures_each_sentence_of_its_own_server(server):
    seen = []
    client = SpeechStreamClient(
        server.url, config={"split_granularity": "sentence"}, run="s1", on_event=seen.append
    )
    with client.session() as sess:
        first = sess.utterance(TWO, phase="warmup")
        second = sess.utterance(["Third one", " here."])  # same connection, chunked input
    assert first.ok and second.ok, (first.error, second.error)
    assert (first.utterance, second.utterance) == (0, 1)
    assert first.total_sentences == 2 and [s.text for s in first.sentences] == [
        "Hello there, this is the first one.",
        "And here is the second sentence!",
    ]
    for s in first.sentences:
        assert s.bytes == s.server_bytes
    tim = first.sentence_timings()
    assert [t.index for t in tim] == [0, 1]
    assert tim[0].ttfa_ms == first.metrics().ttfa_ms  # the utterance's TTFA is its first sentence's
    assert tim[0].gap_ms is None and tim[1].gap_ms is not None and tim[1].gap_ms >= 0
    frames = [frames_for_text(s.text) for s in first.sentences]
    assert [round(t.audio_ms) for t in tim] == [n * 80 for n in frames]
    assert (
        sum(e.samples for e in first.events if isinstance(e, AudioChunk)) == sum(frames) * SAMPLES_PER_FRAME
    )
    assert {e.stage for e in first.events if isinstance(e, StageTiming)} == {
        "connect",
        "sentence0",
        "sentence1",
        "sentence_gap",
    }
    (gap,) = [e for e in first.events if isinstance(e, StageTiming) and e.stage == "sentence_gap"]
    assert (gap.end - gap.start) * 1000.0 == pytest.approx(tim[1].gap_ms)
    assert second.sentences[0].text == "Third one here." and second.total_sentences == 1


# ------------------------------------------------------------ a vLLM-Omni-shaped stream, replayed

SCRIPT = [  # (sentence_text, [(delay_s before the chunk, samples)]) as a real server paces it
    ("First sentence.", [(0.05, 1920), (0.02, 48000)]),
    ("Second sentence.", [(0.15, 1920), (0.02, 48000)]),
]


def _replay_handler():
    async def handler(ws: ServerConnection) -> None:
        cfg = json.loads(await ws.recv())
        assert cfg["type"] == "session.config"
        utterance = 0
        async for raw in ws:
            msg = json.loads(raw)
            if msg["type"] == "session.close":
                await ws.close()
                return
            if msg["type"] != "input.done":
                continue
            for i, (text, chunks) in enumerate(SCRIPT):
                start = {
                    "type": "audio.start",
                    "utterance_index": utterance,
                    "sentence_index": i,
                    "sentence_text": text,
                    "format": cfg.get("response_format", "wav"),
                }
                total = 0
                for k, (delay, n) in enumerate(chunks):
                    await asyncio.sleep(delay)
                    if k == 0:
                        if start["format"] == "pcm":
                            start.update(sample_rate=24000, channels=1)
                        await ws.send(json.dumps(start))
                    data = b"\x01\x00" * n
                    if k == 0 and start["format"] == "wav":
                        data = wav_header(24000) + data  # streamed wav: the placeholder header first
                    total += len(data)
                    await ws.send(data)
                await ws.send(
                    json.dumps(
                        {
                            "type": "audio.done",
                            "utterance_index": utterance,
                            "sentence_index": i,
                            "total_bytes": total,
                            "error": False,
                        }
                    )
                )
            await ws.send(
                json.dumps(
                    {"type": "session.done", "utterance_index": utterance, "total_sentences": len(SCRIPT)}
                )
            )
            utterance += 1

    return handler


@pytest.mark.parametrize("fmt", ["pcm", "wav"])
def test_edgelab_client_measures_a_vllm_omni_stream_per_sentence(fmt):
    with BackgroundServer(_replay_handler()) as srv:
        t0 = time.time()
        res = SpeechStreamClient(srv.url, config={"response_format": fmt}).synthesize(
            "First sentence. Second sentence."
        )
        wall = time.time() - t0
    assert res.ok, res.error
    assert [s.text for s in res.sentences] == ["First sentence.", "Second sentence."]
    assert res.total_sentences == 2 and res.sample_rate == 24000
    tim = res.sentence_timings()
    assert [t.chunks for t in tim] == [2, 2]
    assert [round(t.audio_ms) for t in tim] == [2080, 2080]  # the WAV header is not audio
    assert tim[0].ttfa_ms >= 50.0 and res.metrics().ttfa_ms == tim[0].ttfa_ms
    # the gap heard before sentence 1 is its first audio minus sentence 0's last, on the client's
    # clock (the server paused 150 ms there; how much of it arrives depends on the host's load, so
    # the figure is checked by its definition, not against a wall-clock threshold)
    assert tim[1].gap_ms == pytest.approx(tim[1].ttfa_ms - tim[0].last_chunk_ms)
    assert tim[1].gap_ms > 0 and tim[0].gap_ms is None
    assert tim[1].ttfa_ms <= wall * 1000.0
    assert len(res.pcm) == 2 * (1920 + 48000) * 2
