"""vLLM-Omni's speech stream, version by version: the lab-side server and client follow the current
server (0131cb5) or the pinned one (6a96e66), each as its own source has it
(``vllm_omni/entrypoints/openai/serving_speech_stream.py``, its text splitter and
``protocol/audio.py`` at that commit; :mod:`edgelab.protocols.omni_versions`). The expected
message sequences below are read off those sources; the server is a real WebSocket server and the
client a plain WebSocket client sending what a vLLM-Omni client of that version sends.
"""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from edgelab.errors import ConfigError
from edgelab.protocols.__main__ import main as protocols_main
from edgelab.protocols.omni_versions import CURRENT, PINNED, behaviour
from edgelab.protocols.speech_text import BoundarySplitter
from edgelab.protocols.speech_ws import PATH, ServerOptions, SpeechServer, SpeechStreamClient

TEXT = "Hello there. How are you? Fine."
WAV_STREAM_REFUSAL = (
    "Invalid session config: 1 validation error for StreamingSpeechSessionConfig\n"
    "  Value error, WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
    "Got response_format='wav'."
)


@pytest.fixture(scope="module")
def servers():
    current = SpeechServer(ServerOptions(frames_per_s=None)).start()
    pinned = SpeechServer(ServerOptions(frames_per_s=None, compat="6a96e66")).start()
    try:
        yield {"0131cb5": current, "6a96e66": pinned}
    finally:
        current.stop()
        pinned.stop()


def shape(msgs: list) -> list:
    """Each message as the test compares it: JSON as (type, its fields without the audio-dependent
    and edgelab-only ones), a run of binary frames as 'audio'."""
    out: list = []
    for m in msgs:
        if isinstance(m, bytes):
            if out[-1] != "audio":
                out.append("audio")
            continue
        fields = {
            k: v for k, v in m.items() if k not in ("type", "total_bytes", "cancelled", "runtime", "weights")
        }
        out.append((m["type"], fields))
    return out


def until(ws, kinds: tuple[str, ...] = ("session.done",)) -> list:
    out = []
    while True:
        msg = ws.recv(timeout=30)
        out.append(msg if isinstance(msg, bytes) else json.loads(msg))
        if isinstance(out[-1], dict) and out[-1]["type"] in (*kinds, "error"):
            return out


def closed(ws) -> bool:
    try:
        ws.recv(timeout=10)
    except ConnectionClosed:
        return True
    return False


def send(ws, **msg) -> None:
    ws.send(json.dumps(msg))


# ---------------------------------------------------------------- the message sequences


def test_pinned_6a96e66_sequence_splits_sentences_by_default_and_ends_the_connection(servers):
    """6a96e66: split_granularity defaults to sentence, audio.start of streamed pcm comes first with
    sample_rate (no channels, no utterance_index), session.done{total_sentences}, then the close."""
    with connect(servers["6a96e66"].url + PATH) as ws:
        send(ws, type="session.config", response_format="pcm", stream_audio=True)
        send(ws, type="input.text", text=TEXT)
        send(ws, type="input.done")
        msgs = until(ws)
        want = []
        for i, sentence in enumerate(["Hello there.", "How are you?", "Fine."]):
            want += [
                (
                    "audio.start",
                    {"sentence_index": i, "sentence_text": sentence, "format": "pcm", "sample_rate": 24000},
                ),
                "audio",
                ("audio.done", {"sentence_index": i, "error": False}),
            ]
        want.append(("session.done", {"total_sentences": 3}))
        assert shape(msgs) == want
        assert closed(ws)  # one utterance per connection


def test_current_0131cb5_sequence_keeps_the_text_whole_and_the_connection_open(servers):
    """0131cb5: no split by default (one unit at input.done), the streamed pcm audio.start rides
    with the first audio stating rate and channels, utterance_index everywhere, and the connection
    serves a second utterance."""
    with connect(servers["0131cb5"].url + PATH) as ws:
        send(ws, type="session.config", response_format="pcm", stream_audio=True)
        for utterance in (0, 1):
            send(ws, type="input.text", text=TEXT)
            send(ws, type="input.done")
            assert shape(until(ws)) == [
                (
                    "audio.start",
                    {
                        "utterance_index": utterance,
                        "sentence_index": 0,
                        "sentence_text": TEXT,
                        "format": "pcm",
                        "sample_rate": 24000,
                        "channels": 1,
                    },
                ),
                "audio",
                ("audio.done", {"utterance_index": utterance, "sentence_index": 0, "error": False}),
                ("session.done", {"utterance_index": utterance, "total_sentences": 1}),
            ]
        send(ws, type="session.close")
        assert json.loads(ws.recv(timeout=30))["type"] == "session.done"  # edgelab's, for older clients
        assert closed(ws)


@pytest.mark.parametrize("version", ["0131cb5", "6a96e66"])
def test_wav_with_stream_audio_is_refused_with_the_config_models_text(servers, version):
    with connect(servers[version].url + PATH) as ws:
        send(ws, type="session.config", response_format="wav", stream_audio=True)
        msg = json.loads(ws.recv(timeout=30))
        assert msg["type"] == "error" and msg["message"].startswith(WAV_STREAM_REFUSAL)
        assert closed(ws)  # a refused handshake closes


@pytest.mark.parametrize(
    ("version", "raw", "text"),
    [
        ("0131cb5", "{not json", "Invalid JSON message"),
        ("6a96e66", "{not json", "Invalid JSON in session.config"),
        ("0131cb5", "[1, 2]", "WebSocket messages must be JSON objects"),
        ("6a96e66", "[1, 2]", "session.config must be a JSON object"),
    ],
)
def test_a_malformed_handshake_gets_the_versions_text_and_the_close(servers, version, raw, text):
    with connect(servers[version].url + PATH) as ws:
        ws.send(raw)
        assert json.loads(ws.recv(timeout=30)) == {"type": "error", "message": text}
        assert closed(ws)


@pytest.mark.parametrize("version", ["0131cb5", "6a96e66"])
def test_after_the_handshake_bad_json_is_an_error_and_the_session_goes_on(servers, version):
    with connect(servers[version].url + PATH) as ws:
        send(
            ws, type="session.config", response_format="pcm", stream_audio=True, split_granularity="sentence"
        )
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=30)) == {"type": "error", "message": "Invalid JSON message"}
        ws.send('"just a string"')
        assert json.loads(ws.recv(timeout=30))["message"] == "WebSocket messages must be JSON objects"
        send(ws)  # no type at all
        assert json.loads(ws.recv(timeout=30))["message"] == "Unknown message type: None"
        send(ws, type="input.text", text="Still here.")
        send(ws, type="input.done")
        assert until(ws)[-1]["total_sentences"] == 1


def test_the_pinned_server_knows_no_second_config_no_close_and_no_none_split(servers):
    url = servers["6a96e66"].url + PATH
    with connect(url) as ws:
        send(ws, type="session.config", response_format="pcm")
        send(ws, type="session.config", response_format="wav")
        assert json.loads(ws.recv(timeout=30))["message"] == "Unknown message type: session.config"
        send(ws, type="session.close")
        assert json.loads(ws.recv(timeout=30))["message"] == "Unknown message type: session.close"
        send(ws, type="input.text", text="Short one.")
        send(ws, type="input.done")
        msgs = until(ws)
        assert msgs[0]["format"] == "pcm" and "sample_rate" not in msgs[0]  # not streamed: no rate
        assert msgs[-1] == {"type": "session.done", "total_sentences": 1}
    with connect(url) as ws:
        send(ws, type="session.config", split_granularity="none")
        msg = json.loads(ws.recv(timeout=30))["message"]
        assert msg.startswith("Invalid session config: 1 validation error for StreamingSpeechSessionConfig\n")
        assert "Input should be 'sentence' or 'clause'" in msg
    with connect(url) as ws:  # the pinned config has no seed: ignored, as pydantic ignores it there
        send(ws, type="session.config", response_format="pcm", seed=7)
        send(ws, type="input.text", text="Seeded.")
        send(ws, type="input.done")
        assert until(ws)[-1] == {"type": "session.done", "total_sentences": 1}


def test_the_current_server_refuses_word_timestamps_without_an_aligner(servers):
    with connect(servers["0131cb5"].url + PATH) as ws:
        send(ws, type="session.config", response_format="pcm", stream_audio=True, word_timestamps=True)
        send(ws, type="input.text", text="Timed.")
        send(ws, type="input.done")
        msg = json.loads(ws.recv(timeout=30))
        assert msg["type"] == "error" and msg["message"].startswith("word_timestamps=true but the server")
        assert json.loads(ws.recv(timeout=30)) == {
            "type": "session.done",
            "utterance_index": 0,
            "total_sentences": 1,
        }


def test_the_session_config_key_switches_a_current_server_to_the_pinned_behaviour(servers):
    with connect(servers["0131cb5"].url + PATH) as ws:
        send(ws, type="session.config", response_format="pcm", stream_audio=True, vllm_omni_compat="6a96e66")
        send(ws, type="input.text", text=TEXT)
        send(ws, type="input.done")
        msgs = until(ws)
        assert msgs[-1] == {"type": "session.done", "total_sentences": 3}
        assert closed(ws)
    with connect(servers["0131cb5"].url + PATH) as ws:
        send(ws, type="session.config", vllm_omni_compat="abc1234")
        assert "unknown vLLM-Omni version 'abc1234'" in json.loads(ws.recv(timeout=30))["message"]


# ---------------------------------------------------------------- the lab client, both ways


def test_the_lab_client_follows_the_pinned_version_one_connection_per_utterance(servers):
    """Against a 6a96e66 server the client opens a connection per utterance, sends no session.close
    and says which behaviour it followed; the same text is 3 sentences there, 1 on the current."""
    client = SpeechStreamClient(servers["6a96e66"].url, compat="6a96e66")
    with client.session() as sess:
        first = sess.utterance(TEXT)
        second = sess.utterance("Another one.")
    assert first.ok and second.ok, (first.error, second.error)
    assert first.protocol == "vLLM-Omni 6a96e66" and first.total_sentences == 3
    assert [s.text for s in first.sentences] == ["Hello there.", "How are you?", "Fine."]
    assert first.utterance is None and second.total_sentences == 1  # no utterance_index there
    assert all(s.bytes == s.server_bytes for s in first.sentences)
    connects = [e for r in (first, second) for e in r.events if getattr(e, "stage", None) == "connect"]
    assert len(connects) == 2  # each utterance its own connection
    now = SpeechStreamClient(servers["0131cb5"].url).synthesize(TEXT)
    assert now.ok and now.protocol == "vLLM-Omni 0131cb5" and now.total_sentences == 1
    # the key alone (a playbook's endpoint config) makes both sides follow the pinned version
    keyed = SpeechStreamClient(servers["0131cb5"].url, config={"vllm_omni_compat": "6a96e66"}).synthesize(
        TEXT
    )
    assert keyed.ok and keyed.protocol == "vLLM-Omni 6a96e66" and keyed.total_sentences == 3


def test_the_pinned_client_against_a_current_server_hears_one_sentence():
    """The issue's mismatch, shown rather than hidden: a 6a96e66 client (no split_granularity) on a
    server following the current behaviour gets one unit where its own server would send three."""
    with SpeechServer(ServerOptions(frames_per_s=None)) as srv, connect(srv.url + PATH) as ws:
        send(ws, type="session.config", response_format="pcm", stream_audio=True)
        send(ws, type="input.text", text=TEXT)
        send(ws, type="input.done")
        assert until(ws)[-1]["total_sentences"] == 1


# ---------------------------------------------------------------- the pieces


def test_the_pinned_splitter_carries_short_pieces_and_caps_its_buffer():
    sp = BoundarySplitter("sentence")
    assert sp.feed("A. Next one. And") == ["A.", "Next one."] and sp.flush() == ["And"]
    sp = BoundarySplitter("sentence")
    assert sp.feed("I. x") == ["I."] and sp.flush() == ["x"]
    sp = BoundarySplitter("sentence")
    # "." alone is too short: carried into the next piece without the whitespace re.split dropped,
    # as the pinned SentenceSplitter does
    assert sp.feed(". Then more. ") == [".Then more."] and sp.flush() == []
    sp = BoundarySplitter("clause")
    assert sp.feed("你好，世界。再见") == ["你好，", "世界。"] and sp.flush() == ["再见"]
    with pytest.raises(ValueError, match="Text buffer exceeded maximum size"):
        BoundarySplitter().feed("x" * 100_001)


def test_behaviour_names():
    assert behaviour(None) is CURRENT and behaviour("current") is CURRENT
    assert behaviour("6a96e66") is PINNED and behaviour(PINNED.commit) is PINNED
    assert behaviour("0131cb5560450800") is CURRENT
    with pytest.raises(ConfigError, match="known 0131cb5 \\(current\\), 6a96e66 \\(pinned\\)"):
        behaviour("deadbee")


def test_the_server_command_refuses_an_unknown_version(capsys):
    assert protocols_main(["serve", "speech", "--vllm-omni-compat", "deadbee"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown vLLM-Omni version 'deadbee'") and "--vllm-omni-compat" in err
