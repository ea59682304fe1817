"""Bench a server edgelab did not launch: ``edgelab bench PIPELINE --endpoint URL``.

The protocol is the same as a launched workload's (``single_request_batch1_v1``: warm-up, then
measured requests, batch 1), measured from the lab side with the protocol clients:

- ``ws://`` + a TTS pipeline: vLLM-Omni's speech stream (``/v1/audio/speech/stream``), one
  connection, one utterance per request, per-sentence records;
- ``http://`` + a TTS pipeline: vLLM-Omni's ``/v1/audio/speech`` stream;
- ``ws://`` + a VLA pipeline: an OpenPI policy server (``openpi-client``), a control loop;
- ``http://`` + a text-LM pipeline: a llama-server (``/completion`` stream, the llama-server
  adapter's records: TTFT, inter-token interval, decode tokens/s), ``/props`` and ``/v1/models``
  for what it says it is. Other text kinds may register in :data:`TEXT_BENCHES`.
 The run records the endpoint and what the server reported
about itself (its metadata, its model list, extra fields it sent); the runtime label is the
server's own word, else ``external``, never ``reference``; weights are ``unknown`` unless
the server says. Nothing here launches or stops anything.

The endpoint is a :class:`~edgelab.credentials.SecretURL`: what is stored and shown is its masked
form (``ws://user:***@host``); only the protocol clients get the whole URL, in memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine

from edgelab.bench.runner import PROTOCOL, BenchResult, check_protocol
from edgelab.bench.sink import RunSink
from edgelab.credentials import SecretURL, mask_text, split_url
from edgelab.errors import ConfigError, TransportError
from edgelab.metrics import events as ev
from edgelab.metrics.provenance import UNKNOWN, run_provenance
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.store.runs import create_run, get_run, new_run_id

EXTERNAL = "external"
# vLLM-Omni's speech fields: anything else a server puts in audio.start is something it reports
_SPEECH_FIELDS = {
    "type",
    "utterance_index",
    "sentence_index",
    "sentence_text",
    "format",
    "sample_rate",
    "channels",
    "word_timestamps",
}
# pipeline kind -> callable(engine, req, run_id, sink) for text LMs (llama-server adapter registers here)
TEXT_BENCHES: dict[str, Callable[..., dict[str, Any]]] = {}


@dataclass
class EndpointBenchRequest:
    pipeline: str
    endpoint: SecretURL  # a str is split on arrival (__post_init__): str() of it is always masked
    device: str | None = None  # the inventory device the server runs on (its matrix row), if known
    warmup: int = 1
    requests: int = 20
    band: str = "short"
    control_hz: float = 10.0
    config: dict[str, Any] = field(default_factory=dict)  # extra session config (voice, format, split)
    timeout: float = 120.0

    def __post_init__(self) -> None:
        url = split_url(self.endpoint)
        if url is None:
            raise ConfigError("an endpoint bench needs a URL", remedy="pass e.g. --endpoint ws://HOST:PORT")
        self.endpoint = url


def _plain(x: Any) -> Any:
    """Server metadata (msgpack + numpy) as JSON-storable values."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, bytes):
        return x.hex()
    return x


def pipeline_kind(pipeline: str) -> tuple[str, str]:
    """(pipeline id, kind) of a pipeline name or alias."""
    from edgelab.catalog.pipelines import load_pipelines
    from edgelab.deploy.planning import resolve_pipeline

    pid = resolve_pipeline(pipeline)
    return pid, load_pipelines()[pid].kind


def _models(url: SecretURL, timeout: float) -> list[str] | None:
    """The model ids of an OpenAI-compatible server (``GET /v1/models``), None if it has no such list."""
    import httpx

    parts = urlsplit(url.reveal())
    scheme = "https" if parts.scheme in ("wss", "https") else "http"
    try:
        r = httpx.get(f"{scheme}://{parts.netloc}/v1/models", timeout=min(timeout, 5.0))
        if r.status_code != 200:
            return None
        data = r.json().get("data") or []
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


def _validate(req: EndpointBenchRequest, kind: str) -> str:
    scheme = urlsplit(req.endpoint.shown).scheme
    if scheme not in ("ws", "wss", "http", "https"):
        raise ConfigError(
            f"endpoint {req.endpoint.shown!r} is not a ws:// or http:// URL",
            remedy="pass e.g. --endpoint ws://HOST:PORT",
        )
    check_protocol(req.band, req.warmup, req.requests, req.control_hz)
    if kind in ("tts", "omni"):
        return "speech-ws" if scheme.startswith("ws") else "speech-http"
    if kind == "vla":
        if not scheme.startswith("ws"):
            raise ConfigError(
                "an OpenPI policy endpoint is a WebSocket", remedy="pass --endpoint ws://HOST:PORT"
            )
        return "openpi"
    if kind == "text_lm" and scheme.startswith("http"):
        return "llama-server"
    if kind in TEXT_BENCHES:
        return kind
    raise ConfigError(
        f"no endpoint bench for {kind} pipelines yet",
        remedy="text-LM endpoints (llama-server) are measured once the llama-server adapter is merged",
    )


def run_endpoint_bench(
    engine: Engine,
    req: EndpointBenchRequest,
    *,
    on_event: Callable[[ev.Event], None] | None = None,
    cancel: threading.Event | None = None,
    play: dict[str, Any] | None = None,
) -> BenchResult:
    """Measure the endpoint with the protocol; the run and its records are stored as any bench
    (``play``: the playbook, job and step that asked, for its provenance)."""
    pid, kind = pipeline_kind(req.pipeline)
    proto = _validate(req, kind)
    run_id = new_run_id()
    reported: dict[str, Any] = {}
    opened = _open(proto, req, reported)  # connect first: an unreachable endpoint stores no run
    runtime = str(reported.get("runtime") or EXTERNAL)
    weights = str(reported.get("weights") or "unknown")
    endpoint = {"url": req.endpoint.shown, "protocol": proto, "reported": reported}
    meta: dict[str, Any] = {
        "protocol": PROTOCOL,
        "band": req.band if kind != "vla" else None,
        "warmup": req.warmup,
        "requests": req.requests,
        "batch": 1,
        "concurrency": 1,
        "weights": weights,
        "endpoint": endpoint,
    }
    if kind == "vla":
        meta.update(control_hz=req.control_hz, control_period_s=1.0 / req.control_hz)
    virtual = False
    with session_scope(engine) as s:
        if req.device:
            virtual = bool(get_device(s, req.device).virtual)
        # an external server's cache is not observable from here, nor its binary's SHA-256: unknown,
        # said so; its build is its own word (llama-server's build_info) where it gives one
        prov = run_provenance(
            s,
            source=f"bench:{PROTOCOL}:endpoint",
            device=req.device,
            virtual=virtual if req.device else None,
            runtime=runtime,
            command=f"endpoint {req.endpoint}",
            runtime_build=reported.get("build") or None,
            weights=weights,
            cache=UNKNOWN,
            endpoint=endpoint,
            play=play,
        )
        create_run(
            s,
            id=run_id,
            pipeline=pid,
            device_name=req.device,
            runtime=runtime,
            strategy=None,
            kind="bench",
            virtual=virtual,
            command=f"endpoint {req.endpoint.shown}",
            provenance=prov,
            meta=meta,
        )
    sink = RunSink(engine, run_id, on_event, stamp=True)
    ing = sink.ing
    state, error = RunState.FINISHED, None
    try:
        sink.start(pid, req.device, runtime, {"endpoint": endpoint, "weights": weights}, virtual=virtual)
        failed = _drive(proto, opened, req, run_id, sink, cancel, reported)
        if cancel is not None and cancel.is_set():
            state, error = RunState.STOPPED, "cancelled by the caller (timeout or stop)"
        elif failed:
            error = f"{failed} request(s) failed"
        sink(ev.RunEnd(t=time.time(), state=state, error=error))
        _relabel(engine, run_id, reported)
    except KeyboardInterrupt:
        ing.close(state=RunState.STOPPED, error="interrupted (SIGINT) during bench")
        raise
    except BaseException as exc:
        ing.close(state=RunState.FAILED, error=mask_text(f"{type(exc).__name__}: {exc}")[:2000])
        raise
    finally:
        _close(opened)
    final = ing.close(state=state, error=error)
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        return BenchResult(
            run_id,
            run.state,
            "vla" if kind == "vla" else kind,
            final,
            bool(final.get("live_equals_final")),
            dict(run.provenance),
            dict(run.meta),
        )


def _relabel(engine: Engine, run_id: str, reported: dict[str, Any]) -> None:
    """What the server said during the run (e.g. in audio.start) becomes the run's labels."""
    with session_scope(engine) as s:
        run = get_run(s, run_id)
        prov, meta = dict(run.provenance), dict(run.meta)
        endpoint = dict(prov.get("endpoint") or {}, reported=_plain(reported))
        runtime = str(reported.get("runtime") or EXTERNAL)
        weights = str(reported.get("weights") or "unknown")
        prov.update(endpoint=endpoint, runtime=runtime, weights=weights)
        meta.update(endpoint=endpoint, weights=weights)
        run.provenance, run.meta, run.runtime = prov, meta, runtime
        s.add(run)


def _open(proto: str, req: EndpointBenchRequest, reported: dict[str, Any]) -> Any:
    """Connect and fill ``reported`` with what the server says about itself."""
    if proto == "openpi":
        from edgelab.protocols.openpi import OpenPIClient

        client = OpenPIClient(req.endpoint.reveal())
        meta = _plain(client.metadata or {})
        reported["metadata"] = meta
        for key in ("runtime", "weights", "model", "pipeline"):
            if isinstance(meta, dict) and meta.get(key) is not None:
                reported[key] = meta[key]
        return client
    models = _models(req.endpoint, req.timeout)
    if models is not None:
        reported["models"] = models
        if len(models) == 1:
            reported["model"] = models[0]
    if proto == "speech-ws":
        from edgelab.protocols.speech_ws import SpeechSession

        sess = SpeechSession(req.endpoint.reveal(), config=req.config, timeout=req.timeout)
        sess.open()
        return sess
    if proto == "speech-http":
        from edgelab.protocols.speech_http import SpeechHTTPClient

        extra = {k: v for k, v in req.config.items() if k not in ("model", "voice")}
        return SpeechHTTPClient(
            req.endpoint.reveal(),
            model=req.config.get("model", reported.get("model", "qwen3-tts")),
            voice=req.config.get("voice"),
            extra=extra,
            timeout=req.timeout,
        )
    if proto == "llama-server":
        import httpx

        client = httpx.Client(timeout=httpx.Timeout(req.timeout, connect=5.0))
        base = req.endpoint.reveal().rstrip("/")
        try:
            props = client.get(base + "/props")
        except httpx.HTTPError as err:
            client.close()
            raise TransportError(
                mask_text(f"cannot reach the llama-server at {req.endpoint.shown.rstrip('/')}: {err}"),
                remedy="check the server is running and the URL/port",
            ) from err
        if props.status_code == 200:
            try:
                pj = props.json()
            except ValueError:
                pj = {}
            reported["props"] = {
                k: pj.get(k)
                for k in ("model_path", "build_info", "total_slots", "chat_template")
                if pj.get(k) is not None
            }
            reported["props"]["chat_template"] = (reported["props"].get("chat_template") or "")[:200] or None
            if pj.get("build_info"):
                reported["build"] = pj["build_info"]
            if pj.get("model_path") and "model" not in reported:
                reported["model"] = pj["model_path"]
        reported.setdefault("runtime", "llama.cpp")  # llama-server's own API answered
        return client
    return None  # a registered text bench opens its own client


def _close(opened: Any) -> None:
    if opened is not None and hasattr(opened, "close"):
        try:
            opened.close()
        except (OSError, TransportError):
            pass


def _drive(
    proto: str,
    opened: Any,
    req: EndpointBenchRequest,
    run_id: str,
    sink: Callable[[ev.Event], None],
    cancel: threading.Event | None,
    reported: dict[str, Any],
) -> int:
    """Run warm-up then measured requests; returns how many failed."""
    if proto == "openpi":
        return _drive_openpi(opened, req, run_id, sink, reported)
    if proto == "llama-server":
        return _drive_llama(opened, req, run_id, sink, cancel)
    if proto not in ("speech-ws", "speech-http"):
        return int(TEXT_BENCHES[proto](opened, req, run_id, sink).get("failed", 0))
    from edgelab.reference.tts import BAND_TEXTS

    text = BAND_TEXTS[req.band]
    failed = 0
    phases = ["warmup"] * req.warmup + ["measured"] * req.requests
    for i, phase in enumerate(phases):
        if cancel is not None and cancel.is_set():
            break
        rid = f"{run_id}-{'w' if phase == 'warmup' else 'm'}{i:03d}"
        if proto == "speech-ws":
            opened.on_event, opened.run = sink, run_id
            res = opened.utterance(text, request=rid, phase=phase, band=req.band)
            if opened.broken:  # the connection cannot serve the next utterance: a fresh one
                opened.close()
                opened.broken = None
                opened.open()
        else:
            opened.on_event, opened.run = sink, run_id
            res = opened.synthesize(text, request=rid, phase=phase, band=req.band)
        failed += 0 if res.ok else 1
        for k, v in (res.start_info or {}).items():  # what the server adds to audio.start, it reports
            if k not in _SPEECH_FIELDS:
                reported.setdefault(k, v)
    return failed


def _drive_llama(
    client: Any,
    req: EndpointBenchRequest,
    run_id: str,
    sink: Callable[[ev.Event], None],
    cancel: threading.Event | None,
) -> int:
    """Warm-up then measured streamed completions, as the launched llama.cpp bench sends them."""
    from edgelab.adapters import llama_server
    from edgelab.deploy.llama_drive import N_PREDICT, PROMPTS

    prompt, n = PROMPTS.get(req.band, PROMPTS["short"]), N_PREDICT.get(req.band, 64)
    failed = 0
    for i in range(req.warmup + req.requests):
        if cancel is not None and cancel.is_set():
            break
        phase = "warmup" if i < req.warmup else "measured"
        rec = llama_server.stream_completion(
            client, req.endpoint.reveal(), prompt, n, seed=0, extra={"cache_prompt": False}, cancel=cancel
        )
        for e in llama_server.record_to_events(
            rec, run_id, f"{run_id}-{phase[0]}{i:03d}", phase, band=req.band
        ):
            sink(e)
        failed += 0 if rec.ok else 1
    return failed


def _drive_openpi(
    client: Any,
    req: EndpointBenchRequest,
    run_id: str,
    sink: Callable[[ev.Event], None],
    reported: dict[str, Any],
) -> int:
    import numpy as np

    from edgelab.protocols.openpi import observation_for
    from edgelab.reference.vla_run import control_loop

    class _Sink:
        run = run_id

        @staticmethod
        def emit(e: ev.Event) -> ev.Event:
            sink(e)
            return e

    rng = np.random.default_rng(0)
    # edgelab's own lab-side policy takes its layout; a real OpenPI server DROID's unless told
    layout = req.config.get("observation") or (
        "reference" if reported.get("runtime") == "reference" else "droid"
    )
    period = 1.0 / req.control_hz
    try:  # every inference a request: the warm-up ones first, then the measured ones
        control_loop(
            _Sink,
            client.infer,
            period_s=period,
            steps=req.warmup + req.requests,
            request=f"{run_id}-tick",
            observe=lambda: observation_for(layout, rng, metadata=reported.get("metadata")),
            warmup=req.warmup,
        )
    except Exception as err:  # the server failed an inference (openpi-server sends its traceback)
        sink(ev.ErrorEvent(t=time.time(), request=None, cls="workload", message=str(err)[:2000]))
        return 1
    return 0
