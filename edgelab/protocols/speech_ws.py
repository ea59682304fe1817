"""vLLM-Omni speech streaming over WebSocket (``/v1/audio/speech/stream``): lab-side client and server.

Client: ``session.config`` -> ``input.text`` -> ``input.done``; the server answers ``audio.start``,
binary s16le PCM (24 kHz), ``audio.done{total_bytes, error}``; ``session.close`` -> ``session.done``.
The client stamps every arrival on the lab clock and turns it into edgelab events.

Server: the same protocol backed by the reference TTS (and by the codec-token mode of
:mod:`edgelab.protocols.codec_ws` when ``output_mode`` is ``codec_tokens``), for tests and demos.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import connect

from edgelab.errors import TransportError
from edgelab.metrics.audio import AudioMetrics, audio_metrics
from edgelab.metrics.audio import Chunk as AudioSample
from edgelab.metrics.events import AudioChunk, ErrorEvent, Event, RequestEnd, RequestStart, StageTiming
from edgelab.protocols.serving import BackgroundServer, Inbox, iterate_in_thread
from edgelab.reference import PROVENANCE
from edgelab.reference.tts import SAMPLE_RATE, CodecDecoder, ReferenceTTS, Talker, schedule_of

PATH = "/v1/audio/speech/stream"
EventSink = Callable[[Event], None]


def stream_url(base: str) -> str:
    """``ws://host:port`` or a full URL -> the speech stream URL."""
    base = base.rstrip("/")
    if base.startswith("http"):
        base = "ws" + base[4:]
    return base if base.endswith(PATH) else base + PATH


@dataclass
class SpeechResult:
    """One request as the lab saw it: its events, the PCM, and what the server said."""

    request: str
    submit_t: float
    end_t: float | None = None
    events: list[Event] = field(default_factory=list)
    pcm: bytes = b""
    sample_rate: int = SAMPLE_RATE
    start_info: dict[str, Any] = field(default_factory=dict)
    total_bytes: int | None = None  # the server's count in audio.done
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def chunks(self) -> list[AudioSample]:
        return [
            AudioSample(t_ms=(e.t - self.submit_t) * 1000.0, samples=e.samples, sr=e.sample_rate)
            for e in self.events
            if isinstance(e, AudioChunk)
        ]

    def metrics(self) -> AudioMetrics:
        wall = None if self.end_t is None else (self.end_t - self.submit_t) * 1000.0
        return audio_metrics(self.chunks(), wall_ms=wall)


def open_ws(url: str, timeout: float):
    """A client WebSocket to a streaming endpoint; an unreachable server is a TransportError."""
    try:
        return connect(url, open_timeout=timeout, max_size=None, compression=None)
    except (OSError, WebSocketException) as err:
        raise TransportError(f"cannot open {url}: {err}", remedy="check the server is running and the URL/port") from err


def pcm_chunk(res: SpeechResult, rid: str, idx: int, data: bytes, now: float) -> AudioChunk:
    """Keep a piece of s16le PCM on the result and describe it as an audio-chunk event."""
    res.pcm += data
    return AudioChunk(
        t=now,
        request=rid,
        idx=idx,
        samples=len(data) // 2,
        sample_rate=res.sample_rate,
        sha256=hashlib.sha256(data).hexdigest(),
    )


class Recorder:
    """Tags each event with the run, keeps it on the result and hands it to the caller's sink."""

    def __init__(self, result: Any, run: str | None, sink: EventSink | None):  # any result with .events
        self.result, self.run, self.sink = result, run, sink

    def __call__(self, ev: Event) -> None:
        ev.run = self.run
        self.result.events.append(ev)
        if self.sink is not None:
            self.sink(ev)


class SpeechStreamClient:
    """Measures speech streaming requests against a vLLM-Omni-compatible endpoint, one session each."""

    def __init__(
        self,
        url: str,
        *,
        config: dict[str, Any] | None = None,
        run: str | None = None,
        on_event: EventSink | None = None,
        timeout: float = 120.0,
    ):
        self.url = stream_url(url)
        self.config = {"model": "qwen3-tts", "response_format": "pcm", "stream_audio": True, **(config or {})}
        self.run, self.on_event, self.timeout = run, on_event, timeout
        self._n = 0

    def synthesize(
        self, text: str, *, request: str | None = None, phase: str = "measured", band: str | None = None
    ) -> SpeechResult:
        self._n += 1
        rid = request or f"{self.run or 'speech'}-r{self._n:03d}"
        t_conn = time.time()
        ws = open_ws(self.url, self.timeout)
        res = SpeechResult(request=rid, submit_t=time.time())
        rec = Recorder(res, self.run, self.on_event)
        rec(StageTiming(t=res.submit_t, request=rid, stage="connect", start=t_conn, end=res.submit_t))
        rec(RequestStart(t=res.submit_t, request=rid, phase=phase, band=band, input=text))
        idx = 0
        try:
            with ws:
                try:
                    ws.send(json.dumps({"type": "session.config", **self.config}))
                    ws.send(json.dumps({"type": "input.text", "text": text}))
                    ws.send(json.dumps({"type": "input.done"}))
                except ConnectionClosed:
                    pass  # a server that refuses the config closes at once: its error message is still queued
                while True:
                    msg = ws.recv(timeout=self.timeout)
                    now = time.time()
                    if isinstance(msg, bytes):
                        rec(pcm_chunk(res, rid, idx, msg, now))
                        idx += 1
                        continue
                    d = json.loads(msg)
                    kind = d.get("type")
                    if kind == "audio.start":
                        res.start_info = d
                        res.sample_rate = int(d.get("sample_rate") or SAMPLE_RATE)
                    elif kind == "audio.done":
                        res.total_bytes = d.get("total_bytes")
                        if d.get("error"):
                            res.error = str(d["error"])
                        rec(
                            AudioChunk(
                                t=now,
                                request=rid,
                                idx=idx,
                                samples=0,
                                sample_rate=res.sample_rate,
                                terminal=True,
                            )
                        )
                        ws.send(json.dumps({"type": "session.close"}))
                    elif kind == "error":
                        res.error = str(d.get("message") or d)
                        rec(ErrorEvent(t=now, request=rid, cls="workload", message=res.error))
                        break
                    elif kind == "session.done":
                        break
        except TimeoutError as err:
            res.error = f"no message from the server within {self.timeout:g} s"
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
            del err
        except ConnectionClosed as err:
            res.error = f"connection closed: {err}"
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
        if res.error is None and res.total_bytes is not None and res.total_bytes != len(res.pcm):
            res.error = f"server sent {res.total_bytes} bytes by its count, {len(res.pcm)} arrived"
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
        res.end_t = time.time()
        rec(RequestEnd(t=res.end_t, request=rid, ok=res.ok, error=res.error))
        return res


# ---------------------------------------------------------------- lab-side server


@dataclass
class ServerOptions:
    """How the reference server behaves: talker speed, chunk schedule, seed."""

    frames_per_s: float | None = 25.0
    schedule: str = "server"
    seed: int = 0


@functools.lru_cache(maxsize=4)
def loaded_models(seed: int) -> tuple[Talker, CodecDecoder]:
    """The reference weights for a seed, made once per server like a model load."""
    return Talker(seed), CodecDecoder(seed)


def _json(kind: str, **kw: Any) -> str:
    return json.dumps({"type": kind, **kw})


async def watch_for_stop(inbox: Inbox, stop: threading.Event, deferred: list) -> None:
    """While a response streams: ``input.cancel``, ``session.close`` or a hang-up stops it."""
    while True:
        msg = await inbox.get()
        if msg is None or (isinstance(msg, dict) and msg.get("type") in ("input.cancel", "session.close")):
            stop.set()
            deferred.append(msg)
            return
        deferred.append(msg)


async def _speech_response(
    ws: ServerConnection, inbox: Inbox, cfg: dict, text: str, opts: ServerOptions
) -> list:
    sched = list(schedule_of(opts.schedule))
    if cfg.get("initial_codec_chunk_frames"):
        sched[0] = int(cfg["initial_codec_chunk_frames"])
    seed = int(cfg["seed"]) if cfg.get("seed") is not None else opts.seed
    talker, decoder = loaded_models(seed)
    tts = ReferenceTTS(
        frames_per_s=opts.frames_per_s, schedule=sched, seed=seed, talker=talker, decoder=decoder
    )
    stop = threading.Event()
    deferred: list = []
    watcher = asyncio.create_task(watch_for_stop(inbox, stop, deferred))
    await ws.send(_json("audio.start", sample_rate=SAMPLE_RATE, channels=1, format="pcm_s16le", **PROVENANCE))
    total, held = 0, b""
    error = None
    try:
        async for ch in iterate_in_thread(lambda: tts.stream(text, stop=stop)):
            data = ch.pcm.astype("<i2").tobytes()
            total += len(data)
            if cfg.get("stream_audio", True):
                await ws.send(data)
            else:
                held += data
        if held:
            await ws.send(held)
    except Exception as err:  # the workload failed: say so in audio.done
        error = f"{type(err).__name__}: {err}"
    finally:
        watcher.cancel()
    await ws.send(_json("audio.done", total_bytes=total, error=error, cancelled=stop.is_set()))
    return deferred


async def speech_session(ws: ServerConnection, opts: ServerOptions) -> None:
    """One client session of the speech stream protocol."""
    inbox = Inbox(ws)
    try:
        first = await inbox.get()
        if not (isinstance(first, dict) and first.get("type") == "session.config"):
            await ws.send(_json("error", message="the first message must be session.config"))
            return
        cfg = first
        if cfg.get("output_mode") == "codec_tokens":
            from edgelab.protocols.codec_ws import codec_session

            await codec_session(ws, inbox, cfg, opts)
            return
        fmt = cfg.get("response_format") or "pcm"
        if fmt != "pcm":
            await ws.send(_json("error", message=f"response_format {fmt!r} is not served here; use 'pcm'"))
            return
        texts: list[str] = []
        pending: list = []
        while True:
            msg = pending.pop(0) if pending else await inbox.get()
            if msg is None:
                return
            kind = msg.get("type") if isinstance(msg, dict) else None
            if kind == "input.text":
                texts.append(str(msg.get("text", "")))
            elif kind == "input.done":
                text = " ".join(t for t in texts if t)
                texts = []
                if not text:
                    await ws.send(_json("error", message="input.done before any input.text"))
                    continue
                pending.extend(await _speech_response(ws, inbox, cfg, text, opts))
            elif kind == "session.close":
                await ws.send(_json("session.done"))
                return
            elif kind == "input.cancel":
                continue  # nothing is streaming
            else:
                await ws.send(_json("error", message=f"unexpected message {kind or type(msg).__name__!r}"))
    except ConnectionClosed:
        return
    finally:
        inbox.close()


class SpeechServer(BackgroundServer):
    """The lab-side speech stream server (speech and codec-token modes) on a loopback port."""

    def __init__(self, opts: ServerOptions | None = None, *, host: str = "127.0.0.1", port: int = 0):
        self.opts = opts or ServerOptions()
        loaded_models(self.opts.seed)  # load before the first request, as a real server does

        async def handler(ws: ServerConnection) -> None:
            await speech_session(ws, self.opts)

        def only_stream_path(conn: ServerConnection, request: Any) -> Any:
            import http

            if request.path.split("?")[0] != PATH:
                return conn.respond(http.HTTPStatus.NOT_FOUND, f"only {PATH} is served here\n")
            return None

        super().__init__(handler, host=host, port=port, process_request=only_stream_path)

    @property
    def stream_url(self) -> str:
        return self.url + PATH
