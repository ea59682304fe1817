"""vLLM-Omni speech streaming over WebSocket (``/v1/audio/speech/stream``): lab-side client and server.

The protocol is vLLM-Omni's own (``vllm_omni/entrypoints/openai/serving_speech_stream.py``):

- client: ``session.config`` first (repeatable between utterances), ``input.text`` chunks,
  ``input.done`` (flushes one utterance, the connection stays open), ``session.close``;
- server, per sentence: ``audio.start{utterance_index, sentence_index, sentence_text, format}``
  (for streamed ``pcm`` sent with the first audio and carrying ``sample_rate``, ``channels``),
  binary audio, ``audio.done{utterance_index, sentence_index, total_bytes, error}``; per
  utterance ``session.done{utterance_index, total_sentences}``; ``error{message}``.
- ``response_format`` ``wav`` (the default) or ``pcm``; ``stream_audio`` (default false) sends
  raw s16le PCM chunks as they are decoded, otherwise one binary message per sentence (a whole
  WAV file for ``wav``); ``split_granularity`` none (default) / sentence / clause
  (:mod:`edgelab.protocols.speech_text`).

The client stamps every arrival on the lab clock, keeps per-sentence records and turns them
into edgelab events (audio chunks tagged with their sentence). The server is the same
protocol backed by the reference TTS (and the codec-token mode of
:mod:`edgelab.protocols.codec_ws` when ``output_mode`` is ``codec_tokens``), for tests and demos.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from edgelab.credentials import mask_text
from edgelab.errors import ConfigError
from edgelab.metrics.audio import AudioMetrics, SentenceTiming, audio_metrics, sentence_timings
from edgelab.metrics.audio import Chunk as AudioSample
from edgelab.metrics.events import AudioChunk, ErrorEvent, Event, RequestEnd, RequestStart, StageTiming
from edgelab.protocols.omni_versions import (
    COMPAT_KEY,
    CURRENT,
    INVALID_JSON,
    NOT_OBJECT,
    OmniBehaviour,
)
from edgelab.protocols.omni_versions import behaviour as omni_behaviour
from edgelab.protocols.serving import INVALID, BackgroundServer, Inbox, iterate_in_thread
from edgelab.protocols.speech_text import BoundarySplitter, TextSplitter
from edgelab.protocols.wav import parse_wav_header, wav_file
from edgelab.protocols.ws import (
    PATH,
    EventSink,
    Recorder,
    json_message,
    loaded_models,
    open_ws,
    stream_url,
    watch_for_stop,
)
from edgelab.reference import PROVENANCE
from edgelab.reference.tts import SAMPLE_RATE, ReferenceTTS, schedule_of


@dataclass
class SentenceResult:
    """One sentence of an utterance as the lab saw it (times on the lab clock, s)."""

    index: int
    text: str | None = None
    format: str | None = None
    start_t: float | None = None  # audio.start arrived
    first_audio_t: float | None = None
    last_audio_t: float | None = None
    done_t: float | None = None  # audio.done arrived
    bytes: int = 0  # binary bytes received (a WAV header included), the server's unit in total_bytes
    server_bytes: int | None = None
    failed: bool = False
    start_info: dict[str, Any] = field(default_factory=dict)


@dataclass
class SpeechResult:
    """One utterance (one ``input.done`` flush) as the lab saw it: events, PCM, its sentences."""

    request: str
    submit_t: float
    end_t: float | None = None
    events: list[Event] = field(default_factory=list)
    pcm: bytes = b""
    sample_rate: int = SAMPLE_RATE
    start_info: dict[str, Any] = field(default_factory=dict)  # the first sentence's audio.start
    total_bytes: int | None = None  # the server's byte counts (audio.done), summed
    error: str | None = None
    utterance: int | None = None  # the server's utterance_index
    total_sentences: int | None = None  # session.done's count
    sentences: list[SentenceResult] = field(default_factory=list)
    protocol: str = CURRENT.label  # the vLLM-Omni behaviour the client followed

    @property
    def ok(self) -> bool:
        return self.error is None

    def chunks(self) -> list[AudioSample]:
        return [
            AudioSample(
                t_ms=(e.t - self.submit_t) * 1000.0, samples=e.samples, sr=e.sample_rate, sentence=e.sentence
            )
            for e in self.events
            if isinstance(e, AudioChunk)
        ]

    def metrics(self) -> AudioMetrics:
        """The utterance's audio figures: TTFA is its first sentence's, chunk gaps span sentences."""
        wall = None if self.end_t is None else (self.end_t - self.submit_t) * 1000.0
        return audio_metrics(self.chunks(), wall_ms=wall)

    def sentence_timings(self) -> list[SentenceTiming]:
        """Per sentence: TTFA since the utterance was sent, audio, gap after the previous sentence."""
        return sentence_timings(self.chunks())


def pcm_chunk(
    res: SpeechResult, rid: str, idx: int, data: bytes, now: float, sentence: int | None = None
) -> AudioChunk:
    """Keep a piece of s16le PCM on the result and describe it as an audio-chunk event."""
    res.pcm += data
    return AudioChunk(
        t=now,
        request=rid,
        idx=idx,
        samples=len(data) // 2,
        sample_rate=res.sample_rate,
        sha256=hashlib.sha256(data).hexdigest(),
        sentence=sentence,
    )


DEFAULT_CLIENT_CONFIG = {"model": "qwen3-tts", "response_format": "pcm", "stream_audio": True}


class SpeechSession:
    """One connection to a vLLM-Omni-compatible speech stream: several utterances, one handshake.

    ``utterance()`` sends text (one string or several ``input.text`` chunks) and ``input.done``
    and reads the per-sentence answer up to ``session.done``; ``configure()`` replaces the
    session config between utterances; ``close()`` sends ``session.close``. With ``compat`` set
    to a pinned vLLM-Omni version (``6a96e66``), whose server takes one utterance per connection,
    each utterance opens its own connection with the session config and no ``session.close`` is
    sent; the config then carries ``vllm_omni_compat`` so a lab server follows the same version.
    """

    def __init__(
        self,
        url: str,
        *,
        config: dict[str, Any] | None = None,
        run: str | None = None,
        on_event: EventSink | None = None,
        timeout: float = 120.0,
        name: str | None = None,
        compat: str | None = None,
    ):
        self.url = stream_url(url)
        self.version = omni_behaviour(compat or (config or {}).get(COMPAT_KEY))
        self.config = {**DEFAULT_CLIENT_CONFIG, **(config or {})}
        if self.version is not CURRENT:
            self.config[COMPAT_KEY] = self.version.name
        self.run, self.on_event, self.timeout = run, on_event, timeout
        self.name = name or run or "speech"
        self._n = 0
        self._ws: Any = None
        self._connect: tuple[float, float] | None = None  # (start, end), reported with the first utterance
        self.broken: str | None = None  # why the connection cannot serve another utterance

    def open(self) -> SpeechSession:
        t0 = time.time()
        self._ws = open_ws(self.url, self.timeout).__enter__()  # entered: it is closed in close()
        self._connect = (t0, time.time())
        self._send({"type": "session.config", **self.config})
        return self

    def configure(self, config: dict[str, Any]) -> None:
        """A new session.config between utterances (vLLM-Omni keeps it for the next ones; a pinned
        server takes it with the next utterance's connection)."""
        self.config = {**self.config, **config}
        if self._ws is not None and self.version.multi_utterance:
            self._send({"type": "session.config", **self.config})

    def _send(self, msg: dict[str, Any]) -> None:
        try:
            self._ws.send(json.dumps(msg))
        except ConnectionClosed:
            pass  # a server that refused the config closes at once: its error message is still queued

    def close(self) -> None:
        if self._ws is None:
            return
        try:
            if not self.version.multi_utterance:
                return  # the pinned server has no session.close (it would answer "Unknown message type")
            self._send({"type": "session.close"})
            try:  # drain until the server closes (an older server answers session.done first)
                while True:
                    self._ws.recv(timeout=min(self.timeout, 5.0))
            except (ConnectionClosed, TimeoutError):
                pass
        finally:
            self._ws.close()
            self._ws = None

    def __enter__(self) -> SpeechSession:
        return self.open() if self._ws is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def utterance(
        self,
        text: str | Sequence[str],
        *,
        request: str | None = None,
        phase: str = "measured",
        band: str | None = None,
    ) -> SpeechResult:
        if self._ws is None:
            self.open()
        pieces = [text] if isinstance(text, str) else list(text)
        self._n += 1
        rid = request or f"{self.name}-r{self._n:03d}"
        res = SpeechResult(request=rid, submit_t=time.time(), protocol=self.version.label)
        rec = Recorder(res, self.run, self.on_event)
        if self._connect is not None:
            # the session's, not a request's (a request row made by it would clash with RequestStart's)
            rec(
                StageTiming(
                    t=self._connect[1],
                    request=None,
                    stage="connect",
                    start=self._connect[0],
                    end=self._connect[1],
                )
            )
            self._connect = None
            res.submit_t = time.time()
        rec(RequestStart(t=res.submit_t, request=rid, phase=phase, band=band, input="".join(pieces)))
        if self.broken:
            res.error = self.broken
        else:
            for piece in pieces:
                self._send({"type": "input.text", "text": piece})
            self._send({"type": "input.done"})
            self._read(res, rec)
            self._gaps(res, rec)
            if not self.version.multi_utterance and self._ws is not None:
                self._ws.close()  # the pinned server ends the connection after session.done
                self._ws = None
        self._check_counts(res, rec)
        res.end_t = time.time()
        rec(RequestEnd(t=res.end_t, request=rid, ok=res.ok, error=res.error))
        return res

    def _read(self, res: SpeechResult, rec: Recorder) -> None:
        rid, idx = res.request, 0
        cur: SentenceResult | None = None
        try:
            while True:
                msg = self._ws.recv(timeout=self.timeout)
                now = time.time()
                if isinstance(msg, bytes):
                    if cur is None:  # audio before audio.start: keep it, on a sentence of its own
                        cur = SentenceResult(index=len(res.sentences), start_t=now)
                        res.sentences.append(cur)
                    cur.bytes += len(msg)
                    data = msg
                    if cur.first_audio_t is None and msg[:4] == b"RIFF":
                        info = parse_wav_header(msg)
                        if info is not None:
                            res.sample_rate = info.sample_rate
                            data = msg[info.data_offset :]
                    cur.first_audio_t = cur.first_audio_t or now
                    cur.last_audio_t = now
                    rec(pcm_chunk(res, rid, idx, data, now, sentence=cur.index))
                    idx += 1
                    continue
                d = json.loads(msg)
                kind = d.get("type")
                if kind == "audio.start":
                    cur = SentenceResult(
                        index=int(d.get("sentence_index", len(res.sentences))),
                        text=d.get("sentence_text"),
                        format=d.get("format"),
                        start_t=now,
                        start_info=d,
                    )
                    res.sentences.append(cur)
                    if not res.start_info:
                        res.start_info = d
                    if res.utterance is None and d.get("utterance_index") is not None:
                        res.utterance = int(d["utterance_index"])
                    if d.get("sample_rate"):
                        res.sample_rate = int(d["sample_rate"])
                elif kind == "audio.done":
                    if cur is not None:
                        cur.done_t = now
                        cur.server_bytes = d.get("total_bytes")
                        cur.failed = bool(d.get("error"))
                        if cur.start_t is not None:
                            rec(
                                StageTiming(
                                    t=now,
                                    request=rid,
                                    stage=f"sentence{cur.index}",
                                    start=cur.start_t,
                                    end=now,
                                )
                            )
                    if d.get("total_bytes") is not None:
                        res.total_bytes = (res.total_bytes or 0) + int(d["total_bytes"])
                    if d.get("error") and res.error is None:
                        res.error = (
                            d["error"]
                            if isinstance(d["error"], str)
                            else (f"sentence {d.get('sentence_index')} failed on the server")
                        )
                    cur = None
                elif kind == "error":
                    message = str(d.get("message") or d)
                    rec(ErrorEvent(t=now, request=rid, cls="workload", message=message))
                    res.error = res.error or message
                    if cur is None:  # not inside a sentence: nothing else answers this utterance
                        self.broken = message
                        return
                elif kind == "session.done":
                    res.total_sentences = d.get("total_sentences")
                    if res.utterance is None and d.get("utterance_index") is not None:
                        res.utterance = int(d["utterance_index"])
                    rec(
                        AudioChunk(
                            t=now, request=rid, idx=idx, samples=0, sample_rate=res.sample_rate, terminal=True
                        )
                    )
                    return
        except TimeoutError:
            res.error = f"no message from the server within {self.timeout:g} s"
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
            self.broken = res.error
        except ConnectionClosed as err:
            if res.error is None:
                res.error = mask_text(f"connection closed: {err}")
                rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
            self.broken = res.error

    @staticmethod
    def _gaps(res: SpeechResult, rec: Recorder) -> None:
        """The silence between sentences (previous sentence's last audio -> this one's first) as a
        ``sentence_gap`` stage, so a stored run summarises it beside TTFA."""
        prev = None
        for sen in res.sentences:
            if prev is not None and prev.last_audio_t is not None and sen.first_audio_t is not None:
                rec(
                    StageTiming(
                        t=sen.first_audio_t,
                        request=res.request,
                        stage="sentence_gap",
                        start=prev.last_audio_t,
                        end=sen.first_audio_t,
                    )
                )
            prev = sen if sen.last_audio_t is not None else prev

    @staticmethod
    def _check_counts(res: SpeechResult, rec: Recorder) -> None:
        if res.error is not None:
            return
        for s in res.sentences:
            if s.server_bytes is not None and s.server_bytes != s.bytes:
                res.error = (
                    f"sentence {s.index}: server sent {s.server_bytes} bytes by its count, {s.bytes} arrived"
                )
        if (
            res.error is None
            and res.total_sentences is not None
            and res.total_sentences != len(res.sentences)
        ):
            res.error = f"server counted {res.total_sentences} sentences, {len(res.sentences)} arrived"
        if res.error is not None:
            rec(ErrorEvent(t=time.time(), request=res.request, cls="infra", message=res.error))


class SpeechStreamClient:
    """Measures speech streaming requests against a vLLM-Omni-compatible endpoint.

    ``synthesize()`` is one request on its own connection (connect, config, one utterance,
    close); ``session()`` gives a connection for several utterances, as a real voice client
    keeps one open.
    """

    def __init__(
        self,
        url: str,
        *,
        config: dict[str, Any] | None = None,
        run: str | None = None,
        on_event: EventSink | None = None,
        timeout: float = 120.0,
        compat: str | None = None,
    ):
        self.url = stream_url(url)
        self.config = {**DEFAULT_CLIENT_CONFIG, **(config or {})}
        self.run, self.on_event, self.timeout = run, on_event, timeout
        self.compat = compat
        self._n = 0

    def session(self, config: dict[str, Any] | None = None) -> SpeechSession:
        return SpeechSession(
            self.url,
            config={**self.config, **(config or {})},
            run=self.run,
            on_event=self.on_event,
            timeout=self.timeout,
            compat=self.compat,
        )

    def synthesize(
        self,
        text: str | Sequence[str],
        *,
        request: str | None = None,
        phase: str = "measured",
        band: str | None = None,
    ) -> SpeechResult:
        self._n += 1
        rid = request or f"{self.run or 'speech'}-r{self._n:03d}"
        with self.session() as s:
            return s.utterance(text, request=rid, phase=phase, band=band)


# ---------------------------------------------------------------- lab-side server


@dataclass
class ServerOptions:
    """How the server behaves: talker speed (reference), chunk schedule, seed, the vLLM-Omni version
    whose protocol it follows (:mod:`edgelab.protocols.omni_versions`), and the engine: the reference
    TTS, or a real one (``engine``: a :class:`~edgelab.protocols.controller_feed.ControllerTTS`,
    llama.cpp under edgelab's S3 controller), whose utterances ``frames`` bounds (default: from the text)."""

    frames_per_s: float | None = 25.0
    schedule: str = "server"
    seed: int = 0
    compat: str = CURRENT.name
    engine: Any = None
    frames: int | None = None
    basic_auth: str | None = field(default=None, repr=False)  # "user:password" a client must send


RESPONSE_FORMATS = ("wav", "pcm")


def session_config(
    msg: dict[str, Any], version: OmniBehaviour = CURRENT
) -> tuple[dict[str, Any] | None, str | None]:
    """(config, None) for a valid ``session.config`` message, (None, why) otherwise.

    The defaults and refusals are the vLLM-Omni version's (current: ``response_format`` wav,
    ``stream_audio`` false, ``split_granularity`` none; stream_audio only with pcm); edgelab's
    extensions pass through, and a format vLLM-Omni knows but this server cannot encode is refused.
    """
    if msg.get("output_mode") == "codec_tokens":
        codec = {k: v for k, v in msg.items() if k != "type"}
        codec.setdefault("response_format", "wav")
        return codec, None
    cfg, why = version.session_config(msg)
    if cfg is None:
        return None, why
    if msg.get(COMPAT_KEY):
        cfg[COMPAT_KEY] = msg[COMPAT_KEY]
    if cfg["response_format"] not in RESPONSE_FORMATS:
        return None, (
            f"Invalid session config: response_format {cfg['response_format']!r} is not served "
            f"here (use {' or '.join(RESPONSE_FORMATS)})"
        )
    return cfg, None


_NO_ALIGNER = (
    "word_timestamps=true but the server was launched without --forced-aligner; either restart the "
    "server with that flag or set word_timestamps=false in session.config."
)


async def _sentence_response(
    ws: ServerConnection,
    inbox: Inbox,
    cfg: dict,
    text: str,
    opts: ServerOptions,
    *,
    utterance: int,
    sentence: int,
    version: OmniBehaviour = CURRENT,
) -> list:
    """Synthesize one sentence: audio.start, binary audio, audio.done, shaped as ``version``'s
    server shapes them. Returns the messages that arrived meanwhile (the session loop handles them
    next, in order)."""
    if cfg.get("word_timestamps"):  # this server has no forced aligner: vLLM-Omni's refusal
        await ws.send(json_message("error", message=_NO_ALIGNER))
        return []
    sched = list(schedule_of(opts.schedule))
    if cfg.get("initial_codec_chunk_frames"):
        sched[0] = int(cfg["initial_codec_chunk_frames"])
    seed = int(cfg["seed"]) if cfg.get("seed") is not None else opts.seed
    fmt, streamed = cfg["response_format"], bool(cfg.get("stream_audio", False))
    describe_pcm = streamed and fmt == "pcm" and version.pcm_start_with_audio
    start = {
        **version.start_message(
            utterance=utterance, sentence=sentence, text=text, fmt=fmt, streamed_pcm=streamed and fmt == "pcm"
        ),
        **(opts.engine.provenance if opts.engine is not None else PROVENANCE),
    }
    if not describe_pcm:
        await ws.send(json_message("audio.start", **start))
    started = not describe_pcm
    stop = threading.Event()
    deferred: list = []
    watcher = asyncio.create_task(watch_for_stop(inbox, stop, deferred, stop_on=("input.cancel",)))
    total, held, failed = 0, b"", False
    try:
        async for data in iterate_in_thread(_pcm_chunks(opts, text, sched, seed, stop)):
            if not streamed:
                held += data
                continue
            if not started:
                await ws.send(json_message("audio.start", **start, sample_rate=SAMPLE_RATE, channels=1))
                started = True
            total += len(data)
            await ws.send(data)
        if not streamed:
            body = wav_file(held, SAMPLE_RATE) if fmt == "wav" else held
            total = len(body)
            await ws.send(body)
    except ConnectionClosed:
        raise
    except Exception as err:  # the workload failed: error, then the sentence's audio.done
        failed = True
        if not started:
            await ws.send(json_message("audio.start", **start))
            started = True
        fields = version.generation_failed(err, utterance=utterance, sentence=sentence, partial=total > 0)
        await ws.send(json_message("error", **fields))
    finally:
        watcher.cancel()
    if not started:
        await ws.send(json_message("audio.start", **start))  # keep start/done paired when no audio came
    done = version.done_message(utterance=utterance, sentence=sentence, total_bytes=total, error=failed)
    await ws.send(json_message("audio.done", **done, cancelled=stop.is_set()))
    return deferred


def _pcm_chunks(
    opts: ServerOptions, text: str, sched: list[int], seed: int, stop: threading.Event
) -> Callable[[], Iterator[bytes]]:
    """The sentence's s16le PCM chunk by chunk, from the server's engine: the reference TTS, or
    the real engine (its utterance bounded by ``opts.frames``, else the text's length)."""
    if opts.engine is not None:
        from edgelab.reference.tts import frames_for_text

        frames = opts.frames or frames_for_text(text)
        schedule = ",".join(str(n) for n in sched)
        return lambda: opts.engine.stream(text, frames=frames, seed=seed, schedule=schedule, stop=stop)
    talker, decoder = loaded_models(seed)
    tts = ReferenceTTS(
        frames_per_s=opts.frames_per_s, schedule=sched, seed=seed, talker=talker, decoder=decoder
    )
    return lambda: (ch.pcm.astype("<i2").tobytes() for ch in tts.stream(text, stop=stop))


async def speech_session(ws: ServerConnection, opts: ServerOptions) -> None:
    """One connection of the speech stream protocol, as the vLLM-Omni version of ``opts.compat``
    (or the ``vllm_omni_compat`` key of the connection's session.config) serves it."""
    version = omni_behaviour(opts.compat)
    inbox = Inbox(ws)
    cfg: dict[str, Any] | None = None
    splitter: TextSplitter | BoundarySplitter = version.splitter(
        "none" if version.multi_utterance else "sentence"
    )
    utterance = sentence = 0
    open_utterance = False
    pending: list = []

    async def error(message: str) -> None:
        await ws.send(json_message("error", message=message))

    async def speak(units: list[str]) -> None:
        nonlocal sentence
        for unit in units:
            pending.extend(
                await _sentence_response(
                    ws, inbox, cfg or {}, unit, opts, utterance=utterance, sentence=sentence, version=version
                )
            )
            sentence += 1

    try:
        while True:
            msg = pending.pop(0) if pending else await inbox.get()
            if msg is None:
                return
            if isinstance(msg, dict) and msg.get("type") == INVALID:
                json_broken = msg.get("reason") == "json"
                if cfg is None:  # a malformed handshake: the error, then the server closes
                    await error(
                        version.handshake_invalid_json if json_broken else version.handshake_not_object
                    )
                    return
                await error(INVALID_JSON if json_broken else NOT_OBJECT)
                continue
            d: dict[str, Any] = msg if isinstance(msg, dict) else {}
            kind = d.get("type")
            if cfg is None and kind != "session.config":
                await error(f"Expected session.config, got: {kind}")
                return
            if kind == "session.config" and (cfg is None or version.multi_utterance):
                if open_utterance:
                    await error(
                        "session.config cannot be applied while an utterance is in progress; send input.done first"
                    )
                    continue
                if cfg is None and d.get(COMPAT_KEY):
                    try:
                        version = omni_behaviour(str(d[COMPAT_KEY]))
                    except ConfigError as err:
                        await error(f"Invalid session config: {err}")
                        return
                new, why = session_config(d, version)
                if new is None:
                    await error(why or "Invalid session config")
                    if cfg is None:
                        return  # a refused handshake closes the connection
                    continue  # keep serving with the previous config
                cfg = new
                if cfg.get("output_mode") == "codec_tokens":
                    from edgelab.protocols.codec_ws import codec_session

                    await codec_session(ws, inbox, cfg, opts, pending=pending)
                    return
                splitter = version.splitter(cfg["split_granularity"])
            elif kind == "input.text":
                text = d.get("text", "")
                if not isinstance(text, str):
                    await error("input.text requires a string value")
                    continue
                open_utterance = open_utterance or bool(text)
                try:
                    units = splitter.feed(text)
                except ValueError as err:  # the older splitter's buffer limit ends the session there
                    await error(f"Internal error: {err}")
                    return
                await speak(units)
            elif kind == "input.done":
                await speak(splitter.flush())
                await ws.send(
                    json_message("session.done", **version.session_done(utterance=utterance, total=sentence))
                )
                if not version.multi_utterance:
                    await ws.close()  # the pinned server's handler returns: one utterance per connection
                    return
                utterance, sentence, open_utterance = utterance + 1, 0, False
            elif kind == "session.close" and version.multi_utterance:
                # vLLM-Omni just closes; a session.done first keeps older edgelab clients working
                await ws.send(
                    json_message(
                        "session.done", utterance_index=utterance, total_sentences=sentence, closed=True
                    )
                )
                await ws.close()
                return
            elif kind == "input.cancel":
                continue  # nothing is streaming (an edgelab extension; vLLM-Omni has no cancel here)
            else:
                await error(f"Unknown message type: {kind}")
    except ConnectionClosed:
        return
    finally:
        inbox.close()


def _authorized(header: str | None, opts: ServerOptions) -> bool:
    """Whether an ``Authorization: Basic`` header carries the server's user and password."""
    import base64
    import hmac

    if not header or not header.lower().startswith("basic "):
        return False
    try:
        given = base64.b64decode(header.split(None, 1)[1], validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return False
    return hmac.compare_digest(given.encode(), (opts.basic_auth or "").encode())


class SpeechServer(BackgroundServer):
    """The lab-side speech stream server (speech and codec-token modes) on a loopback port."""

    def __init__(self, opts: ServerOptions | None = None, *, host: str = "127.0.0.1", port: int = 0):
        self.opts = opts or ServerOptions()
        self.behaviour = omni_behaviour(self.opts.compat)  # an unknown version fails here, not per connection
        if self.opts.engine is None:
            loaded_models(self.opts.seed)  # load before the first request, as a real server does

        async def handler(ws: ServerConnection) -> None:
            await speech_session(ws, self.opts)

        def only_stream_path(conn: ServerConnection, request: Any) -> Any:
            import http

            if request.path.split("?")[0] != PATH:
                return conn.respond(http.HTTPStatus.NOT_FOUND, f"only {PATH} is served here\n")
            if self.opts.basic_auth and not _authorized(request.headers.get("Authorization"), self.opts):
                return conn.respond(http.HTTPStatus.UNAUTHORIZED, "user and password required\n")
            return None

        super().__init__(handler, host=host, port=port, process_request=only_stream_path)

    @property
    def stream_url(self) -> str:
        return self.url + PATH
