"""llama-server measured from the lab side: readiness, streamed completions, ``/metrics``.

Wire facts (vendored llama.cpp 0c1e570, ``tools/server``; captures in tests/captures/llama.cpp):

- ``GET /health``: connection refused until the port is bound, then 503
  ``{"error":{"message":"Loading model",...}}`` while the model loads, then 200 ``{"status":"ok"}``.
- ``POST /completion`` with ``stream``: ``data: {...}`` lines, each with ``content``, ``tokens``
  and ``tokens_predicted`` (tokens so far: a chunk may carry several when the server held back
  an incomplete UTF-8 character); the last has ``"stop": true`` and ``timings``; no ``[DONE]``.
- ``POST /v1/chat/completions`` with ``stream``: OpenAI chunks (``choices[0].delta.content``),
  ``timings`` on the finish chunk, then ``data: [DONE]``. With ``timings_per_token`` every chunk
  carries ``timings.predicted_n``, which gives exact token counts per chunk.
- ``timings``: ``prompt_n``, ``prompt_ms``, ``cache_n``, ``predicted_n``, ``predicted_ms``,
  ``predicted_per_second``. The prompt cache is on by default: ``"cache_prompt": false`` makes
  every request process its whole prompt (what a measurement wants).
- ``GET /metrics``: Prometheus text with ``--metrics``; 501 otherwise.

Times are taken on the lab clock (``time.time()`` at the send, then a monotonic clock for every
arrival, so intervals are exact and instants comparable with other events). The caller creates
the httpx client before the clock starts (making one costs 40-80 ms).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from edgelab.credentials import mask_text
from edgelab.errors import ReadyCancelled, ServerNotReady
from edgelab.metrics import events as ev
from edgelab.metrics.text import text_metrics

COMPLETION = "/completion"
CHAT = "/v1/chat/completions"


# ---------------------------------------------------------------- readiness


@dataclass
class HealthState:
    t: float  # lab clock
    state: str  # refused | loading | ok | error
    status: int | None = None
    detail: str | None = None


def classify_health(status: int | None, body: str | None) -> str:
    """One /health answer as a state: refused (no answer), loading (503 "Loading model"), ok
    (200), error (anything else)."""
    if status is None:
        return "refused"
    if status == 200:
        return "ok"
    if status == 503:
        return "loading"
    return "error"


@dataclass
class Readiness:
    ready_at: float  # lab clock, first 200
    waited_s: float
    states: list[HealthState]  # each change of state, in order

    def phases(self) -> dict[str, float]:
        """Seconds spent refused and loading before ready (the start-up phases a run records)."""
        out: dict[str, float] = {}
        for a, b in zip(self.states, self.states[1:], strict=False):
            out[a.state] = out.get(a.state, 0.0) + (b.t - a.t)
        return out


def get_idempotent(client: httpx.Client, url: str) -> httpx.Response:
    """``GET url``, sent once more when the server closed a kept-alive connection before any
    response (cpp-httplib drops idle ones after 5 s; a GET is safe to repeat, RFC 9110 9.2.2)."""
    try:
        return client.get(url)
    except httpx.RemoteProtocolError:
        return client.get(url)


def wait_ready(
    base_url: str,
    timeout: float,
    cancel: threading.Event | None = None,
    *,
    client: httpx.Client | None = None,
    interval: float = 0.05,
    alive: Callable[[], bool] | None = None,
) -> Readiness:
    """Poll ``GET /health`` until 200; raise :class:`ServerNotReady` after ``timeout`` seconds
    (or as soon as ``alive()`` says the server process has ended) and :class:`ReadyCancelled`
    when ``cancel`` is set. The states seen (refused -> loading -> ok) come back with their times."""
    own = client is None
    c = client or httpx.Client(timeout=httpx.Timeout(5.0, connect=2.0))
    t0 = time.time()
    states: list[HealthState] = []
    try:
        while True:
            try:
                r = get_idempotent(c, base_url.rstrip("/") + "/health")
                status, body = r.status_code, r.text
            except httpx.TransportError as err:
                status, body = None, type(err).__name__
            now = time.time()
            state = classify_health(status, body)
            if not states or states[-1].state != state:
                states.append(HealthState(now, state, status, (body or "")[:200] if state != "ok" else None))
            if state == "ok":
                return Readiness(now, now - t0, states)
            if cancel is not None and cancel.is_set():
                raise ReadyCancelled(f"stopped while waiting for {base_url} ({state})")
            if alive is not None and not alive():
                raise ServerNotReady(f"llama-server at {base_url} exited before it was ready (last: {state})")
            if now - t0 >= timeout:
                raise ServerNotReady(
                    f"llama-server at {base_url} not ready after {timeout:.0f} s (last: {state}"
                    + (f" {states[-1].detail}" if states[-1].detail else "")
                    + ")"
                )
            if cancel is not None:
                if cancel.wait(interval):
                    raise ReadyCancelled(f"stopped while waiting for {base_url} ({state})")
            else:
                time.sleep(interval)
    finally:
        if own:
            c.close()


# ---------------------------------------------------------------- streaming


@dataclass
class TokenChunk:
    t: float  # lab clock, arrival of the SSE line
    n: int  # tokens this chunk carried
    text: str


@dataclass
class CompletionRecord:
    """One streamed request, as the lab saw it, with the server's own ``timings`` beside it."""

    endpoint: str
    prompt: str
    n_predict: int
    submitted: float  # lab clock, just before the request was sent
    chunks: list[TokenChunk] = field(default_factory=list)
    finished: float | None = None  # lab clock, end of stream
    status: int | None = None
    timings: dict[str, Any] | None = None  # the server's, verbatim
    stop_type: str | None = None  # limit | eos | word (completion) / finish_reason (chat)
    tokens_predicted: int | None = None  # the server's count
    prompt_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200

    @property
    def tokens(self) -> int:
        return sum(c.n for c in self.chunks)

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    def metrics(self) -> dict[str, Any]:
        """TTFT, inter-token intervals and decode tokens/s on the lab clock (edgelab.metrics.text),
        with the server's figures beside them."""
        m = text_metrics([(c.t, c.n) for c in self.chunks if c.n > 0], self.submitted)
        t = self.timings or {}
        m["itl_all_ms"] = [
            (b.t - a.t) * 1000.0 for a, b in zip(self.token_chunks, self.token_chunks[1:], strict=False)
        ]
        m["server"] = {
            "prompt_ms": t.get("prompt_ms"),
            "prompt_n": t.get("prompt_n"),
            "cache_n": t.get("cache_n"),
            "predicted_ms": t.get("predicted_ms"),
            "predicted_n": t.get("predicted_n"),
            "predicted_per_second": t.get("predicted_per_second"),
        }
        m["request_ms"] = (self.finished - self.submitted) * 1000.0 if self.finished else None
        return m

    @property
    def token_chunks(self) -> list[TokenChunk]:
        return [c for c in self.chunks if c.n > 0]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["chunks"] = [[c.t, c.n, c.text] for c in self.chunks]
        return d


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The payloads of an SSE stream's ``data:`` lines (comments and other fields skipped)."""
    for line in lines:
        if line.startswith("data:"):
            yield line[5:].strip()


class ChunkReader:
    """Turns one stream's decoded JSON chunks into token counts, text and the final figures.

    Pure (no I/O): :func:`stream_completion` feeds it live, tests feed it captured streams."""

    def __init__(self, record: CompletionRecord):
        self.r = record
        self.chat = record.endpoint == CHAT
        self._predicted = 0
        self.done = False

    def feed(self, payload: str, t: float) -> TokenChunk | None:
        if payload == "[DONE]":
            self.done = True
            return None
        obj = json.loads(payload)
        if "error" in obj and not obj.get("choices") and "content" not in obj:
            err = obj["error"]
            self.r.error = err.get("message") if isinstance(err, dict) else str(err)
            self.done = True
            return None
        timings = obj.get("timings")
        if self.chat:
            choice = (obj.get("choices") or [{}])[0]
            text = (choice.get("delta") or {}).get("content") or ""
            so_far = (timings or {}).get("predicted_n")  # every chunk with timings_per_token; the last always
        else:
            text = obj.get("content") or ""
            so_far = obj.get("tokens_predicted")
        if so_far is not None:  # the server's running count: exact even when a chunk holds several
            n = max(0, int(so_far) - self._predicted)
            self._predicted = max(self._predicted, int(so_far))
        else:
            n = (len(obj.get("tokens") or []) if not self.chat else 0) or (1 if text else 0)
            self._predicted += n
        if self.chat:
            if choice.get("finish_reason"):
                self.r.stop_type = choice["finish_reason"]
                self.r.tokens_predicted = self._predicted
                self.r.timings = timings or self.r.timings
                usage = obj.get("usage") or {}
                self.r.prompt_tokens = usage.get("prompt_tokens", (timings or {}).get("prompt_n"))
        elif obj.get("stop"):
            self.r.stop_type = obj.get("stop_type")
            self.r.tokens_predicted = so_far
            self.r.prompt_tokens = obj.get("tokens_evaluated")
            self.r.timings = timings
            self.done = True
        if n == 0 and not text:
            return None
        chunk = TokenChunk(t, n, text)
        self.r.chunks.append(chunk)
        return chunk


def request_body(
    prompt: str,
    n_predict: int,
    *,
    chat: bool,
    temperature: float = 0.0,
    seed: int | None = None,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body: streaming, no prompt cache (each request processes its whole prompt),
    ``ignore_eos`` so every request generates ``n_predict`` tokens (a random-weight model may
    sample EOS anywhere)."""
    body: dict[str, Any] = {
        "stream": True,
        "cache_prompt": False,
        "temperature": temperature,
        "ignore_eos": ignore_eos,
    }
    if seed is not None:
        body["seed"] = seed
    if chat:
        body.update(
            messages=[{"role": "user", "content": prompt}], max_tokens=n_predict, timings_per_token=True
        )
    else:
        body.update(prompt=prompt, n_predict=n_predict)
    body.update(extra or {})
    return body


def stream_completion(
    client: httpx.Client,
    base_url: str,
    prompt: str,
    n_predict: int,
    *,
    chat: bool = False,
    temperature: float = 0.0,
    seed: int | None = None,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
    timeout: float | None = 300.0,
    cancel: threading.Event | None = None,
) -> CompletionRecord:
    """Send one streamed request and record every chunk's arrival on the lab clock.

    Errors (HTTP status, a dropped connection, an in-band error object) are recorded on the
    record (``error``), never raised: a failed request is a result too."""
    endpoint = CHAT if chat else COMPLETION
    body = request_body(
        prompt, n_predict, chat=chat, temperature=temperature, seed=seed, ignore_eos=ignore_eos, extra=extra
    )
    url = base_url.rstrip("/") + endpoint
    wall0 = time.time()
    mono0 = time.perf_counter()
    rec = CompletionRecord(endpoint=endpoint, prompt=prompt, n_predict=n_predict, submitted=wall0)
    reader = ChunkReader(rec)
    try:
        # llama-server closes the connection after every streamed response, *after* sending the
        # chunked terminator (its content provider returns false once done, which cpp-httplib
        # treats as cancelled), so a client that reuses that connection races the close and may
        # lose its next request. Asking for the close makes that deterministic.
        with client.stream("POST", url, json=body, timeout=timeout, headers={"Connection": "close"}) as resp:
            rec.status = resp.status_code
            if resp.status_code != 200:
                resp.read()
                rec.error = f"HTTP {resp.status_code}: {resp.text[:200]}"
            else:
                for payload in sse_data(resp.iter_lines()):
                    t = wall0 + (time.perf_counter() - mono0)
                    try:
                        reader.feed(payload, t)
                    except ValueError:
                        rec.error = f"not JSON in the stream: {payload[:80]!r}"
                        break
                    if reader.done and not chat:
                        break
                    if cancel is not None and cancel.is_set():
                        rec.error = "cancelled"
                        break
    except httpx.HTTPError as err:
        rec.error = mask_text(f"{type(err).__name__}: {err}")
    rec.finished = wall0 + (time.perf_counter() - mono0)
    if rec.error is None and rec.timings is None:
        rec.error = "the stream ended without the final timings"
    return rec


def record_from_sse(
    raw: str | bytes,
    endpoint: str,
    *,
    prompt: str = "",
    n_predict: int = 0,
    times: Iterable[float] | None = None,
    submitted: float = 0.0,
) -> CompletionRecord:
    """A record from a captured stream (tests, re-analysis); ``times`` are the arrival times of
    the data lines (default: 1 ms apart after ``submitted``)."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    payloads = list(sse_data(text.splitlines()))
    ts = list(times) if times is not None else [submitted + 0.001 * (i + 1) for i in range(len(payloads))]
    rec = CompletionRecord(
        endpoint=endpoint, prompt=prompt, n_predict=n_predict, submitted=submitted, status=200
    )
    reader = ChunkReader(rec)
    for payload, t in zip(payloads, ts, strict=False):
        reader.feed(payload, t)
    rec.finished = ts[len(payloads) - 1] if payloads else submitted
    return rec


# ---------------------------------------------------------------- events


def record_to_events(
    record: CompletionRecord,
    run: str | None,
    request_id: str,
    phase: str = "measured",
    *,
    band: str | None = None,
) -> list[ev.Event]:
    """RequestStart at the send, one TextToken per chunk (``n`` tokens, its text), RequestEnd at
    the end of the stream (``ok`` false with the error when it failed): what edgelab.metrics.text
    turns into TTFT, inter-token intervals and decode tokens/s."""
    out: list[ev.Event] = [
        ev.RequestStart(
            t=record.submitted,
            run=run,
            request=request_id,
            phase=phase,
            band=band,
            input=record.prompt[:200] or None,
        )
    ]
    for c in record.chunks:
        if c.n > 0:
            out.append(ev.TextToken(t=c.t, run=run, request=request_id, n=c.n, text=c.text))
    out.append(
        ev.RequestEnd(
            t=record.finished if record.finished is not None else record.submitted,
            run=run,
            request=request_id,
            ok=record.ok,
            error=record.error,
        )
    )
    return out


# ---------------------------------------------------------------- /metrics


def parse_prometheus(text: str) -> dict[str, float]:
    """``name{labels} value`` lines -> {``name{labels}``: value}; comments skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            continue
    return out


def scrape_metrics(client: httpx.Client, base_url: str) -> dict[str, float] | None:
    """``GET /metrics`` as numbers (``llamacpp:prompt_tokens_total``...), or None when the server
    was started without ``--metrics`` (it answers 501)."""
    r = get_idempotent(client, base_url.rstrip("/") + "/metrics")
    if r.status_code == 501:
        return None
    r.raise_for_status()
    return parse_prometheus(r.text)


__all__ = [
    "CHAT",
    "COMPLETION",
    "ChunkReader",
    "CompletionRecord",
    "HealthState",
    "ReadyCancelled",
    "Readiness",
    "ServerNotReady",
    "TokenChunk",
    "classify_health",
    "get_idempotent",
    "parse_prometheus",
    "record_from_sse",
    "record_to_events",
    "request_body",
    "scrape_metrics",
    "sse_data",
    "stream_completion",
    "wait_ready",
]
