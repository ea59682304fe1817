"""Run the reference TTS as a workload: requests in sequence, each chunk reported as an event.

This is what a device process does under ``edgelab deploy qwen3-tts --runtime reference``:
the same events a real runtime's adapter would produce (request start/end, audio chunks with
sample counts and sha256, talker and code2wav stage timings), stamped on this machine's clock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from edgelab.credentials import from_device_env, mask_text
from edgelab.metrics.events import (
    AudioChunk,
    RequestEnd,
    RequestStart,
    RunEnd,
    RunEndState,
    RunStart,
    StageTiming,
)
from edgelab.reference import PROVENANCE
from edgelab.reference.emit import Emitter
from edgelab.reference.tts import BAND_TEXTS, SAMPLE_RATE, ReferenceTTS, frames_for_text


def _wall(mono: float, mono0: float, wall0: float) -> float:
    return wall0 + (mono - mono0)


def run_tts(
    em: Emitter,
    *,
    texts: Sequence[str] | None = None,
    band: str = "short",
    requests: int = 1,
    warmup: int = 0,
    frames_per_s: float | None = 25.0,
    schedule: str = "ramp",
    seed: int = 0,
    n_frames: int | None = None,
    device: str | None = None,
) -> int:
    """Run ``warmup`` + ``requests`` requests; returns the number that failed (0 = all fine)."""
    tts = ReferenceTTS(frames_per_s=frames_per_s, schedule=schedule, seed=seed)
    texts = list(texts) if texts else [BAND_TEXTS[band]]
    em.emit(
        RunStart(
            t=time.time(),
            pipeline="qwen3-tts",
            device=device,
            runtime=PROVENANCE["runtime"],
            meta={
                **PROVENANCE,
                "schedule": list(tts.schedule),
                "frames_per_s": frames_per_s,
                "seed": seed,
                "band": band,
                "sample_rate": SAMPLE_RATE,
            },
        )
    )
    failed = 0
    for i in range(warmup + requests):
        text = texts[i % len(texts)]
        rid = f"{em.run or 'run'}-r{i:03d}"
        phase = "warmup" if i < warmup else "measured"
        wall0, mono0 = time.time(), time.monotonic()
        em.emit(RequestStart(t=wall0, request=rid, phase=phase, band=band, input=text))
        try:
            chunks = []
            total = n_frames if n_frames is not None else frames_for_text(text)
            for ch in tts.stream(text, n_frames=total):
                chunks.append(ch)
                em.emit(
                    StageTiming(
                        t=time.time(),
                        request=rid,
                        stage="code2wav",
                        start=_wall(ch.decode_start, mono0, wall0),
                        end=_wall(ch.decode_end, mono0, wall0),
                    )
                )
                em.emit(
                    AudioChunk(
                        t=time.time(),
                        request=rid,
                        idx=ch.idx,
                        samples=ch.samples,
                        sample_rate=SAMPLE_RATE,
                        sha256=ch.sha256,
                        terminal=sum(c.n_frames for c in chunks) >= total,
                    )
                )
            em.emit(RequestEnd(t=time.time(), request=rid, ok=True))
        except Exception as err:  # a workload failure is reported, the run goes on
            failed += 1
            em.emit(RequestEnd(t=time.time(), request=rid, ok=False, error=f"{type(err).__name__}: {err}"))
    em.emit(RunEnd(t=time.time(), state=RunEndState.FAILED if failed else RunEndState.FINISHED))
    return failed


def run_tts_device_stage(
    em: Emitter,
    *,
    server: str,
    texts: Sequence[str] | None = None,
    band: str = "short",
    requests: int = 1,
    warmup: int = 0,
    seed: int = 0,
    device: str | None = None,
    stages: Sequence[str] = ("code2wav",),
) -> int:
    """S4's device stage: the talker runs on ``server`` (codec tokens over WebSocket), code2wav here.

    Each request asks the server for codec frames (``output_mode: codec_tokens``) and decodes them
    with the reference vocoder as they arrive: the events say when frames came and when audio was
    ready on the device. Returns the number of requests that failed.
    """
    try:  # the lab's codec-token client: in the lab's edgelab, not in the device zipapp
        from edgelab.protocols.codec_ws import CodecStreamClient
    except ImportError as err:
        from edgelab.errors import ConfigError

        raise ConfigError(
            f"the S4 device stage needs edgelab's codec-token client and websockets here ({err})",
            remedy="install edgelab with its dependencies on the device (pip install edgelab), "
            "or run S4 on a virtual device",
        ) from err

    texts = list(texts) if texts else [BAND_TEXTS[band]]
    em.emit(
        RunStart(
            t=time.time(),
            pipeline="qwen3-tts",
            device=device,
            runtime=PROVENANCE["runtime"],
            strategy="S4",
            meta={
                **PROVENANCE,
                "server": mask_text(server),
                "device_stages": list(stages),
                "seed": seed,
                "band": band,
                "sample_rate": SAMPLE_RATE,
            },
        )
    )
    # the server as given (masked when it has credentials) is what the events say; the client
    # alone gets the password, from the environment edgelab launched this process with
    client = CodecStreamClient(from_device_env(server), run=em.run, on_event=em.emit, config={"seed": seed})
    failed = 0
    for i in range(warmup + requests):
        rid = f"{em.run or 'run'}-r{i:03d}"
        res = client.stream(
            texts[i % len(texts)], request=rid, phase="warmup" if i < warmup else "measured", band=band
        )
        failed += 0 if res.ok else 1
    em.emit(RunEnd(t=time.time(), state=RunEndState.FAILED if failed else RunEndState.FINISHED))
    return failed
