"""HTTP ``/v1/audio/speech`` streaming: a lab-side client (httpx) and a reference-backed server.

With ``stream: true`` the body is either the audio itself (chunked transfer: raw s16le PCM for
``response_format: "pcm"``, a WAV whose header carries the 0xFFFFFFFF streaming sizes for
``wav``, vLLM-Omni's default) or, with ``stream_format: "sse"``, Server-Sent Events whose
``speech.audio.delta`` carry base64 audio and ``speech.audio.done`` ends the stream. Without
``stream`` the body is one whole file. The client stamps each arrival on the lab clock and
strips a WAV header from the audio it counts.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from edgelab.credentials import mask_text
from edgelab.errors import TransportError
from edgelab.metrics.events import AudioChunk, ErrorEvent, Event, RequestEnd, RequestStart
from edgelab.protocols.serving import check_loopback
from edgelab.protocols.speech_ws import ServerOptions, SpeechResult, pcm_chunk
from edgelab.protocols.wav import parse_wav_header, wav_file, wav_header
from edgelab.protocols.ws import EventSink, loaded_models
from edgelab.reference import PROVENANCE
from edgelab.reference.tts import SAMPLE_RATE, ReferenceTTS

PATH = "/v1/audio/speech"


class SpeechHTTPClient:
    """Measures streamed ``/v1/audio/speech`` requests (raw audio or SSE)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "qwen3-tts",
        voice: str | None = None,
        stream_format: str = "audio",  # "audio" (raw PCM) | "sse"
        extra: dict[str, Any] | None = None,
        run: str | None = None,
        on_event: EventSink | None = None,
        timeout: float = 120.0,
    ):
        if stream_format not in ("audio", "sse"):
            raise ValueError("stream_format is 'audio' or 'sse'")
        self.url = base_url.rstrip("/") + ("" if base_url.rstrip("/").endswith(PATH) else PATH)
        self.model, self.voice, self.stream_format = model, voice, stream_format
        self.extra = extra or {}
        self.run, self.on_event, self.timeout = run, on_event, timeout
        self._http = httpx.Client(timeout=timeout)  # made once: its set-up is not part of any request
        self._n = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SpeechHTTPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def synthesize(
        self, text: str, *, request: str | None = None, phase: str = "measured", band: str | None = None
    ) -> SpeechResult:
        self._n += 1
        rid = request or f"{self.run or 'http'}-r{self._n:03d}"
        body = {"model": self.model, "input": text, "response_format": "pcm", "stream": True, **self.extra}
        if self.voice:
            body["voice"] = self.voice
        if self.stream_format == "sse":
            body["stream_format"] = "sse"
        res = SpeechResult(request=rid, submit_t=time.time())

        def rec(ev: Event) -> None:
            ev.run = self.run
            res.events.append(ev)
            if self.on_event is not None:
                self.on_event(ev)

        rec(RequestStart(t=res.submit_t, request=rid, phase=phase, band=band, input=text))
        idx = 0

        head = b""  # the first bytes, held until a WAV header (if any) is complete

        def audio(data: bytes, now: float) -> None:
            nonlocal idx, head
            if idx == 0 and not res.pcm and (head or data[:4] == b"RIFF"):
                head += data
                info = parse_wav_header(head)
                if info is None and len(head) < 4096:
                    return  # wait for the rest of the header
                if info is not None:
                    res.sample_rate = info.sample_rate
                    data, head = head[info.data_offset :], b""
                else:
                    data, head = head, b""
                if not data:
                    return
            rec(pcm_chunk(res, rid, idx, data, now))
            idx += 1

        try:
            with self._http.stream("POST", self.url, json=body) as resp:
                if resp.status_code != 200:
                    resp.read()
                    res.error = f"HTTP {resp.status_code}: {resp.text[:200]}"
                else:
                    sr = resp.headers.get("x-sample-rate")
                    res.sample_rate = int(sr) if sr else SAMPLE_RATE
                    if self.stream_format == "sse":
                        self._read_sse(resp, res, audio)
                    else:
                        carry = b""
                        for piece in resp.iter_raw():
                            now = time.time()
                            data, carry = carry + piece, b""
                            if len(data) % 2:  # keep whole s16 samples together
                                data, carry = data[:-1], data[-1:]
                            if data:
                                audio(data, now)
                        res.total_bytes = len(res.pcm) + len(carry) + len(head)
        except httpx.HTTPError as err:
            if not res.pcm and isinstance(err, httpx.ConnectError):
                raise TransportError(
                    mask_text(f"cannot reach {self.url}: {err}"), remedy="check the server and URL"
                ) from err
            res.error = mask_text(f"{type(err).__name__}: {err}")
        if res.error:
            rec(
                ErrorEvent(
                    t=time.time(),
                    request=rid,
                    cls="workload" if "HTTP" in res.error else "infra",
                    message=res.error,
                )
            )
        else:
            rec(
                AudioChunk(
                    t=time.time(), request=rid, idx=idx, samples=0, sample_rate=res.sample_rate, terminal=True
                )
            )
        res.end_t = time.time()
        rec(RequestEnd(t=res.end_t, request=rid, ok=res.ok, error=res.error))
        return res

    @staticmethod
    def _read_sse(resp: httpx.Response, res: SpeechResult, audio: Callable[[bytes, float], None]) -> None:
        for line in resp.iter_lines():
            now = time.time()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            try:
                d = json.loads(payload)
            except ValueError:
                continue
            kind = d.get("type", "")
            b64 = d.get("audio") or d.get("delta")
            if b64 and kind != "speech.audio.done":
                audio(base64.b64decode(b64), now)
            if kind == "speech.audio.done":
                res.total_bytes = (d.get("usage") or {}).get("total_bytes", len(res.pcm))
                return
            if kind == "error" or d.get("error"):
                res.error = str(d.get("message") or d.get("error"))
                return


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _SpeechHTTPD

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read events, not access logs
        pass

    def _fail(self, code: int, message: str) -> None:
        body = json.dumps({"error": {"message": message}}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        raw = self.rfile.read(
            int(self.headers.get("Content-Length") or 0)
        )  # always: keeps the connection in step
        if self.path.split("?")[0] != PATH:
            return self._fail(404, f"only {PATH} is served here")
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            return self._fail(400, "body is not JSON")
        text = req.get("input")
        if not isinstance(text, str) or not text:
            return self._fail(400, "'input' (the text) is required")
        fmt = req.get("response_format") or "wav"  # vLLM-Omni's (and OpenAI's) default
        if fmt not in ("pcm", "wav"):
            return self._fail(400, f"response_format {fmt!r} is not served here; use 'wav' or 'pcm'")
        streamed = bool(req.get("stream", False))
        opts = self.server.opts
        talker, decoder = loaded_models(opts.seed)
        tts = ReferenceTTS(
            frames_per_s=opts.frames_per_s,
            schedule=opts.schedule,
            seed=opts.seed,
            talker=talker,
            decoder=decoder,
        )
        sse = req.get("stream_format") == "sse"
        self.send_response(200)
        self.send_header(
            "Content-Type", "text/event-stream" if sse else ("audio/wav" if fmt == "wav" else "audio/pcm")
        )
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Sample-Rate", str(SAMPLE_RATE))
        self.send_header("X-Edgelab-Runtime", f"{PROVENANCE['runtime']}; weights={PROVENANCE['weights']}")
        self.end_headers()
        stop = threading.Event()
        total, held = 0, b""

        def send(data: bytes) -> None:
            if sse:
                ev = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
                self._chunk(f"data: {json.dumps(ev)}\n\n".encode())
            else:
                self._chunk(data)

        try:
            for k, ch in enumerate(tts.stream(text, stop=stop)):
                data = ch.pcm.astype("<i2").tobytes()
                if not streamed:
                    held += data
                    continue
                if k == 0 and fmt == "wav":
                    data = wav_header(SAMPLE_RATE) + data
                total += len(data)
                send(data)
            if not streamed:
                body = wav_file(held, SAMPLE_RATE) if fmt == "wav" else held
                total = len(body)
                send(body)
            if sse:
                done = {"type": "speech.audio.done", "usage": {"total_bytes": total}, **PROVENANCE}
                self._chunk(f"data: {json.dumps(done)}\n\n".encode())
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            stop.set()  # the client went away: stop the talker


class _SpeechHTTPD(ThreadingHTTPServer):
    daemon_threads = True
    opts: ServerOptions


class SpeechHTTPServer:
    """The lab-side ``/v1/audio/speech`` server on a loopback port, served from a thread."""

    def __init__(self, opts: ServerOptions | None = None, *, host: str = "127.0.0.1", port: int = 0):
        check_loopback(host)
        self.opts = opts or ServerOptions()
        loaded_models(self.opts.seed)
        self._httpd = _SpeechHTTPD((host, port), _Handler)
        self._httpd.opts = self.opts
        self.host, self.port = host, self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="speech-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SpeechHTTPServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(30)
        self._httpd.server_close()

    def __enter__(self) -> SpeechHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
