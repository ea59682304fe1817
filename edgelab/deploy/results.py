"""What a one-shot runtime reported, read from the logs its run left (the template's output adapter)."""

from __future__ import annotations

from typing import Any

from edgelab.runtimes.spec import Adapter

PERF_LOST = (
    "no perf lines in its stderr: an upstream llama.cpp logger writes from a thread it never joins "
    "at exit, so a busy host can lose the last lines (ggml-org/llama.cpp#22142); edgelab's own "
    "build flushes them (runtimes/patches/llama.cpp/common-log-flush-at-exit.patch)"
)


def wav_outputs(t: Any, plan: dict[str, Any], workdirs: dict[str, str]) -> dict[str, Any]:
    """The WAV each llama-tts process wrote (its ``-o`` file in its folder), read back: sample rate,
    samples, SHA-256 of the PCM; a process that wrote none is left out."""
    import tempfile
    from pathlib import Path

    from edgelab.errors import EdgelabError
    from edgelab.protocols.wav import wav_facts

    out: dict[str, Any] = {}
    for pr in plan.get("processes", []):
        name, argv = pr.get("name"), pr.get("argv") or []
        if pr.get("adapter") != Adapter.LLAMA_TTS or name not in workdirs:
            continue
        rel = argv[argv.index("-o") + 1] if "-o" in argv[:-1] else "out.wav"
        path = rel if rel.startswith("/") else f"{workdirs[name]}/{rel}"
        with tempfile.TemporaryDirectory(prefix="edgelab-wav-") as d:
            try:
                t.get(path, Path(d) / "out.wav")
                facts = wav_facts((Path(d) / "out.wav").read_bytes())
            except (EdgelabError, OSError):
                continue
        if facts is not None:
            out[name] = {**facts.__dict__, "seconds": facts.seconds, "path": path}
    return out


def adapter_results(
    plan: dict[str, Any], logs: dict[str, str], outputs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a one-shot runtime reported, read by its template's adapter from the logs it left.

    llama-completion: the ``common_perf_print`` / ``llama_perf_context_print`` lines (load, prompt
    eval, eval: ms, tokens, tokens/s) and the placement its load log shows. llama-tts: its timings
    (load, prompt eval, generation, vocoder, total), frames and audio seconds, with the WAV it wrote
    (``outputs``: :func:`wav_outputs`); TTFA is the total (all audio comes at once), RTF total / audio.
    """
    out: dict[str, Any] = {}
    for pr in plan.get("processes", []):
        err = logs.get(f"{pr.get('name')}/stderr.log") or ""
        if pr.get("adapter") == Adapter.LLAMA_TTS and err:
            from edgelab.adapters.llama_placement import parse_placement
            from edgelab.adapters.llama_tts import parse_log

            log = parse_log(err)
            wav = (outputs or {}).get(pr["name"])
            out[pr["name"]] = {
                "adapter": Adapter.LLAMA_TTS,
                "tts": log.to_dict(),
                "ttfa_ms": None if log.total_s is None else round(log.total_s * 1000, 1),
                "rtf_total": log.rtf,
                "wav": wav,
                "placement": parse_placement(err).observed or "unobserved",
            }
            if log.error:
                out[pr["name"]]["error"] = log.error
            continue
        if pr.get("adapter") == Adapter.LLAMA_COMPLETION and err:
            from edgelab.adapters.llama_perf import parse_perf
            from edgelab.adapters.llama_placement import parse_placement

            perf = parse_perf(err)
            out[pr["name"]] = {
                "adapter": Adapter.LLAMA_COMPLETION,
                "perf": perf.to_dict() if perf else None,
                "placement": parse_placement(err).observed or "unobserved",
            }
            if perf is None:  # said, never guessed: the run finished but its figures are not in the log
                out[pr["name"]]["perf_missing"] = PERF_LOST
    return out


def reported_entries(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The runtime's own figures from :func:`adapter_results`, as requests to store
    (:mod:`edgelab.metrics.reported`)."""
    from edgelab.metrics.reported import from_perf, from_tts

    out: list[dict[str, Any]] = []
    for res in results.values():
        if res.get("perf"):
            out += from_perf(res["perf"])
        if res.get("adapter") == Adapter.LLAMA_TTS and (res.get("tts") or {}).get("total_s") is not None:
            out += from_tts(res["tts"])
    return out
