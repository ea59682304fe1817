"""Figures a runtime reported about itself, stored as requests with counts.

A one-shot program measures itself and prints the result: llama-completion's perf lines (prompt
eval and eval: ms, tokens, tokens/s), llama-bench's JSON (tokens/s of each repetition of each
test), llama-tts's timings line (prompt eval, generation, vocoder, total; frames, audio seconds).
Nothing streams on edgelab's clock, so there are no samples; the runtime's own figures are
stored as ``run_request`` rows (``metrics.reported``: the figures and the source they were read
from), one per request the program ran (a completion; one repetition of one llama-bench test,
banded by the test's name), so the run counts its requests like any other and its summary holds
them under ``reported`` (p50/p95 with counts), apart from what edgelab measured itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edgelab.metrics.stats import summarize

PERF_SOURCE = "llama-completion perf lines"
BENCH_SOURCE = "llama-bench JSON"
TTS_SOURCE = "llama-tts timings"


def from_perf(perf: dict[str, Any]) -> list[dict[str, Any]]:
    """One completion's figures from a parsed perf report (``PerfReport.to_dict()``)."""
    prompt, gen = perf.get("prompt") or {}, perf.get("eval") or {}
    figures = {
        "load_ms": perf.get("load_ms"),
        "prompt_ms": prompt.get("ms"),
        "prompt_tokens": prompt.get("tokens"),
        "prompt_tok_s": prompt.get("tokens_per_s"),
        "eval_ms": gen.get("ms"),
        "eval_tokens": gen.get("tokens"),
        "decode_tok_s": gen.get("tokens_per_s"),
        "total_ms": perf.get("total_ms"),
    }
    return [{"request": "completion", "band": None, "source": PERF_SOURCE, "figures": figures}]


def from_tts(log: dict[str, Any]) -> list[dict[str, Any]]:
    """One utterance's figures from a parsed llama-tts log (``TTSLog.to_dict()``): its whole audio
    exists when the total has passed, so that total is its time to first audio."""

    def ms(key: str) -> float | None:
        v = log.get(key)
        return None if v is None else round(v * 1000, 1)

    figures = {
        "load_ms": ms("load_s"),
        "prompt_ms": ms("prompt_s"),
        "generation_ms": ms("generation_s"),
        "vocoder_ms": ms("vocoder_s"),
        "total_ms": ms("total_s"),
        "frames": log.get("frames"),
        "frames_per_s": log.get("frames_per_s"),
        "audio_s": log.get("audio_s"),
        "rtf_total": log.get("rtf"),
    }
    return [{"request": "utterance", "band": None, "source": TTS_SOURCE, "figures": figures}]


def from_llama_bench(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per repetition of each test (``BenchRecord.to_dict()``), banded by the test."""
    out = []
    for r in records:
        tps = list(r.get("samples_ts") or [])
        ns = list(r.get("samples_ns") or [])
        for i in range(max(len(tps), len(ns))):
            figures = {
                "tok_s": tps[i] if i < len(tps) else None,
                "ms": ns[i] / 1e6 if i < len(ns) else None,
                "tokens": (r.get("n_prompt") or 0) + (r.get("n_gen") or 0),
                "threads": r.get("n_threads"),
            }
            out.append(
                {
                    "request": f"{r['test']}-{i + 1}",
                    "band": r["test"],
                    "source": BENCH_SOURCE,
                    "figures": figures,
                }
            )
    return out


def rows(run_id: str, entries: list[dict[str, Any]], t: float) -> list[dict[str, Any]]:
    """``run_request`` rows for the entries (finished when the program's output was read)."""
    return [
        {
            "run_id": run_id,
            "request": e["request"],
            "phase": "measured",
            "band": e["band"],
            "submitted": t,
            "finished": t,
            "ok": True,
            "error": None,
            "metrics": {"reported": {"source": e["source"], **e["figures"]}},
        }
        for e in entries
    ]


def summary(requests: Iterable[Any]) -> dict[str, Any] | None:
    """The reported figures of a run's requests, per band (or ``all``): each figure's p50/p95 with its
    count; None when no request carries reported figures."""
    by: dict[str, list[dict[str, Any]]] = {}
    sources: set[str] = set()
    for r in requests:
        rep = ((getattr(r, "metrics", None) or {}) or {}).get("reported")
        if not rep or getattr(r, "phase", "measured") == "warmup":
            continue
        sources.add(str(rep.get("source")))
        by.setdefault(getattr(r, "band", None) or "all", []).append(rep)
    if not by:
        return None
    out: dict[str, Any] = {"source": ", ".join(sorted(sources)), "bands": {}}
    for band, reps in sorted(by.items()):
        keys = sorted(
            {k for rep in reps for k, v in rep.items() if k != "source" and isinstance(v, int | float)}
        )
        out["bands"][band] = {
            "requests": len(reps),
            **{k: summarize(rep.get(k) for rep in reps) for k in keys},
        }
    return out
