"""Bench a one-shot runtime request by request: ``llama-tts`` (S5), one process per utterance.

llama-tts loads, makes every frame, vocodes once, writes a WAV and exits. Each request is one such
process in its own folder of the run; while it runs its process group's memory is sampled
(``VmHWM``, every ~0.25 s: a peak a shorter spike between two samples would not show). Its figures
are its own: the log's timings (prompt eval, generation, vocoder, total) and the WAV it wrote
(sample rate, samples, SHA-256 of the PCM). They become the same events a streaming run sends, on
the lab clock anchored at the launch and the log's own time stamps: the request starts when its
prompt does, and its single audio chunk arrives ``total`` later, so TTFA is the total and the
streamed and total RTF are one (what S5 honestly is). Load (process start to prompt) is a stage
of each request.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from edgelab.adapters.llama_placement import parse_placement
from edgelab.adapters.llama_tts import TTSLog, parse_log
from edgelab.bench.sink import RunSink
from edgelab.deploy import procstat, remote, start
from edgelab.deploy.plan import ProcessSpec, programs
from edgelab.errors import EdgelabError
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.protocols.wav import WavFacts, wav_facts
from edgelab.runtimes.spec import Adapter
from edgelab.states import RunState
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run
from edgelab.transport.base import Transport

POLL_S = 0.25


def _output(proc: ProcessSpec) -> str:
    """The WAV path the command writes (relative to its folder): the value after -o."""
    argv = proc.argv
    for flag in ("-o", "--output", "--output-file"):
        if flag in argv[:-1]:
            return argv[argv.index(flag) + 1]
    return "out.wav"


def _wait(t: Transport, pid: int, cancel: threading.Event | None) -> tuple[int | None, bool]:
    """Until the group is gone: (peak RSS seen, cancelled)."""
    peak = None
    while remote.alive(t, pid):
        if cancel is not None and cancel.is_set():
            remote.stop(t, pid, 2)
            return peak, True
        _rss, hwm = procstat.memory(t, pid)
        if hwm is not None:
            peak = max(peak or 0, hwm)
        time.sleep(POLL_S)
    return peak, False


def _fetch_wav(t: Transport, path: str) -> WavFacts | None:
    with tempfile.TemporaryDirectory(prefix="edgelab-wav-") as d:
        local = Path(d) / "out.wav"
        try:
            t.get(path, local)
        except EdgelabError:
            return None
        return wav_facts(local.read_bytes()) if local.is_file() else None


def request_events(
    rid: str,
    phase: str,
    band: str | None,
    text: str | None,
    t_launch: float,
    t_exit: float,
    log: TTSLog,
    wav: WavFacts | None,
    peak_rss: int | None,
    device: str | None,
    error: str | None,
) -> list[ev.Event]:
    """One llama-tts run as edgelab events (lab clock): request, stages, its one audio chunk, end."""
    total = log.total_s or 0.0
    # the audio was complete when the timings line was written (its stamp counts from the process start)
    t_audio = t_launch + log.timings_at_s if log.timings_at_s is not None else t_exit
    t_req = t_audio - total
    out: list[ev.Event] = [
        ev.RequestStart(t=t_req, request=rid, phase=phase, band=band, input=text),
        ev.StageTiming(t=t_req, request=rid, stage="load", start=t_launch, end=t_req),
    ]
    at = t_req
    for stage, secs in (("prompt", log.prompt_s), ("talker", log.generation_s), ("code2wav", log.vocoder_s)):
        if secs is not None:
            out.append(ev.StageTiming(t=at + secs, request=rid, stage=stage, start=at, end=at + secs))
            at += secs
    ok = error is None and log.complete and wav is not None
    if wav is not None:
        out.append(
            ev.AudioChunk(
                t=t_audio,
                request=rid,
                idx=0,
                samples=wav.samples,
                sample_rate=wav.sample_rate,
                sha256=wav.pcm_sha256,
                terminal=True,
            )
        )
    if peak_rss:
        out.append(ev.ResourceSample(t=t_audio, device=device, source="proc", rss_bytes=peak_rss))
    why = error or log.error or (None if wav is not None else "llama-tts wrote no WAV")
    out.append(ev.RequestEnd(t=t_audio, request=rid, ok=ok, error=None if ok else why))
    return out


def bench_llama_tts(
    engine: Engine,
    t: Transport,
    proc: ProcessSpec,
    workdir: str,
    blob_paths: dict[str, str],
    run_id: str,
    *,
    device: str,
    pipeline: str,
    warmup: int,
    requests: int,
    band: str | None,
    virtual: bool,
    on_event: Callable[[ev.Event], None] | None = None,
    cancel: threading.Event | None = None,
    beside: Callable[[Ingestor], Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """``warmup`` + ``requests`` runs of llama-tts, each measured and stored; (summary, state)."""
    feed = RunSink(engine, run_id, on_event, stamp=True)
    sampler = beside(feed.ing) if beside is not None else None
    text = proc.values.get("text")
    output = _output(proc)
    records: list[dict[str, Any]] = []
    placement = None

    meta = {
        "adapter": Adapter.LLAMA_TTS,
        "one_process_per_request": True,
        "frames": proc.values.get("frames"),
    }
    feed.start(pipeline, device, proc.runtime, meta, virtual=virtual, strategy="S5")
    argv, env, bin_dir = start.bound(proc, workdir, blob_paths)
    start.layout(t, bin_dir, proc.links, blob_paths, programs(proc))
    try:
        with feed.measuring(sampler):
            for i in range(warmup + requests):
                if cancel is not None and cancel.is_set():
                    feed.stopped()
                    break
                rid = f"{run_id}-r{i:03d}"
                wd = f"{workdir}/r{i:03d}"
                t_launch = time.time()
                pid = remote.launch(t, wd, argv, env)
                peak, cancelled = _wait(t, pid, cancel)
                t_exit = time.time()
                code = remote.poll(t, wd, pid, 1 << 40).exit_code
                log_text = remote.read_file(t, f"{wd}/stderr.log", 1 << 21)
                log = parse_log(log_text)
                wav = _fetch_wav(t, f"{wd}/{output}") if log.complete else None
                if placement is None:
                    placement = parse_placement(log_text)
                why = "cancelled" if cancelled else (None if code == 0 else f"llama-tts exited {code}")
                for e in request_events(
                    rid,
                    "warmup" if i < warmup else "measured",
                    band,
                    text,
                    t_launch,
                    t_exit,
                    log,
                    wav,
                    peak,
                    device,
                    why,
                ):
                    feed(e)
                records.append(
                    {
                        "request": rid,
                        "exit_code": code,
                        "log": log.to_dict(),
                        "wav": None if wav is None else {**wav.__dict__, "seconds": wav.seconds},
                        "peak_rss_bytes": peak,
                        "process_s": round(t_exit - t_launch, 3),
                    }
                )
                if cancelled:
                    feed.stopped()
                    break
    finally:
        failed = sum(1 for r in records if r["exit_code"] != 0 or not r["log"]["total_s"])
        if feed.state is None and failed:
            feed.state, feed.error = RunState.FAILED, f"{failed} of {len(records)} llama-tts runs failed"
        with session_scope(engine) as s:
            run = get_run(s, run_id)
            run.meta = {
                **run.meta,
                "llama_tts": records,
                "placement": {"observed": (placement.observed if placement else None) or "unobserved"},
            }
            s.add(run)
    return feed.end(
        feed.state,
        feed.error,
        remedy=f"see `edgelab runs show {run_id}` (each request's llama-tts log is in its folder)",
    )


__all__ = ["bench_llama_tts", "request_events"]
