"""Measure llama-server from the lab side: forward its port, wait for /health, stream requests.

Used by ``edgelab bench`` (a finite warm-up + measured protocol) and by a deployment's follower
(requests paced until the run is stopped, so ``edgelab watch`` shows live TTFT and tokens/s).
Every request becomes edgelab events (request.start, text.token per SSE chunk, request.end) on
the lab clock; the server's own ``timings`` are kept beside them, and the group's peak RSS is
sampled on the device after each request.

In ``deploy`` (not ``bench``) because the follower, a part of a deployment, drives it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgelab.adapters import llama_server
from edgelab.deploy import procstat, remote
from edgelab.metrics import events as ev
from edgelab.metrics.stats import summarize
from edgelab.transport.base import Transport

PROMPTS = {  # length bands: a prompt of roughly that many tokens for a llama-vocabulary model
    "short": "The quick brown fox jumps over the lazy dog.",
    "medium": " ".join(["Edge devices run small language models close to where the data is made."] * 8),
    "long": " ".join(["Edge devices run small language models close to where the data is made."] * 32),
}
N_PREDICT = {"short": 64, "medium": 128, "long": 256}


@dataclass
class DriveResult:
    records: list[dict[str, Any]] = field(default_factory=list)  # per request: id, phase, metrics, timings
    readiness: dict[str, Any] | None = None
    peak_rss_bytes: int | None = None
    metrics_scrape: dict[str, float] | None = None


def drive(
    t: Transport,
    port: int,
    pid: int,
    *,
    run: str,
    device: str,
    feed: Callable[[ev.Event], None],
    warmup: int,
    requests: int | None,
    band: str = "short",
    n_predict: int | None = None,
    ready_timeout: float = 120.0,
    cancel: threading.Event | None = None,
    pause_s: float = 0.0,
    keep_going: Callable[[], bool] | None = None,
    seed: int = 0,
) -> DriveResult:
    """Run ``warmup`` then ``requests`` requests (None: until ``keep_going()`` is false or ``cancel``)."""
    import httpx

    out = DriveResult()
    prompt = PROMPTS.get(band, PROMPTS["short"])
    n = n_predict or N_PREDICT.get(band, 64)
    with t.forward(port) as fw:
        base = f"http://127.0.0.1:{fw.local_port}"
        with httpx.Client(timeout=httpx.Timeout(300.0, connect=5.0)) as client:
            rd = llama_server.wait_ready(
                base, ready_timeout, cancel, client=client, alive=lambda: remote.alive(t, pid)
            )
            out.readiness = {"waited_s": round(rd.waited_s, 3), "phases_s": rd.phases()}
            i = 0
            while True:
                if cancel is not None and cancel.is_set():
                    break
                if requests is not None and i >= warmup + requests:
                    break
                if requests is None and keep_going is not None and i >= warmup and not keep_going():
                    break
                phase = "warmup" if i < warmup else "measured"
                rid = f"{phase[0]}{i:05d}"
                rec = llama_server.stream_completion(
                    client, base, prompt, n, seed=seed, extra={"cache_prompt": False}, cancel=cancel
                )
                for e in llama_server.record_to_events(rec, run, rid, phase, band=band):
                    feed(e)
                m = rec.metrics()
                out.records.append(
                    {
                        "request": rid,
                        "phase": phase,
                        "ok": rec.ok,
                        "error": rec.error,
                        "tokens": rec.tokens,
                        "ttft_ms": m.get("ttft_ms"),
                        "decode_tok_s": m.get("decode_tok_s"),
                        "itl_all_ms": m.get("itl_all_ms"),
                        "request_ms": m.get("request_ms"),
                        "server": m.get("server"),
                    }
                )
                s = procstat.sample(t, pid, run, device)
                if s is not None:
                    feed(s)
                    out.peak_rss_bytes = max(out.peak_rss_bytes or 0, s.rss_bytes or 0) or None
                i += 1
                if pause_s and cancel is not None:
                    if cancel.wait(pause_s):
                        break
            try:
                out.metrics_scrape = llama_server.scrape_metrics(client, base)
            except httpx.HTTPError:
                out.metrics_scrape = None  # the server is gone (a deployment was stopped): nothing to scrape
    return out


def report(result: DriveResult) -> dict[str, Any]:
    """The protocol's text figures over the measured requests: TTFT, inter-token p50/p95 (pooled),
    decode tokens/s p50/p95, with the server's own figures beside them."""
    measured = [r for r in result.records if r["phase"] == "measured" and r["ok"]]
    itl = [x for r in measured for x in (r.get("itl_all_ms") or [])]
    srv = [r.get("server") or {} for r in measured]
    return {
        "requests": len(measured),
        "failed": sum(1 for r in result.records if r["phase"] == "measured" and not r["ok"]),
        "ttft_ms": summarize(r["ttft_ms"] for r in measured if r["ttft_ms"] is not None),
        "itl_ms": summarize(itl),
        "decode_tok_s": summarize(r["decode_tok_s"] for r in measured if r["decode_tok_s"] is not None),
        "server_prompt_ms": summarize(s["prompt_ms"] for s in srv if s.get("prompt_ms") is not None),
        "server_predicted_per_second": summarize(
            s["predicted_per_second"] for s in srv if s.get("predicted_per_second") is not None
        ),
        "peak_rss_bytes": result.peak_rss_bytes,
        "readiness": result.readiness,
    }
