"""The codec-decoder stage on a device runtime: S4's device side (and S3 TTS's vocoder).

The talker runs elsewhere (a vLLM-Omni server, or edgelab's lab-side codec-token server) and
streams codec frames over WebSocket; this stage decodes each message on MNN or ONNX Runtime with
up to 72 frames of left context (RESET drops it), keeping only the new frames' samples, 1920 per
frame at 24 kHz. It plugs into edgelab's codec-token client as its decoder, so the wire, the
events and the audio metrics are the ones every other S4 run has.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgelab.artifacts.hashing import sha256_path
from edgelab.controller.engine import Engine
from edgelab.credentials import from_device_env, mask_text
from edgelab.metrics.events import RunEnd, RunEndState, RunStart
from edgelab.reference.emit import Emitter
from edgelab.reference.tts import CODEBOOK_SIZE, LEFT_CONTEXT, SAMPLES_PER_FRAME, with_left_context


class RuntimeCodecDecoder:
    """``decode(codes [T, 16], context [C, 16] | None) -> int16 PCM`` on the exported graph."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.decode_ms: list[float] = []

    def decode(self, codes: np.ndarray, context: np.ndarray | None = None) -> np.ndarray:
        codes, t_new = with_left_context(codes, context)
        feed = np.ascontiguousarray(np.clip(codes, 0, CODEBOOK_SIZE - 1).astype(np.int32).T)  # [16, frames]
        t0 = time.perf_counter()
        pcm = self.engine.run({"codes": feed})
        self.decode_ms.append((time.perf_counter() - t0) * 1000.0)
        y = np.asarray(pcm, dtype=np.float32)[-t_new:].reshape(t_new * SAMPLES_PER_FRAME)
        return (np.clip(y, -1.0, 1.0) * 32767).astype(np.int16)


def run_codec(
    em: Emitter,
    engine: Engine,
    *,
    model: Path,
    url: str,
    texts: Sequence[str],
    requests: int = 1,
    warmup: int = 0,
    device: str | None = None,
    strategy: str = "S4",
) -> bool:
    """run.start (model SHA-256, observed placement), the requests against ``url``, run.end."""
    from edgelab.protocols.codec_ws import CodecStreamClient

    decoder = RuntimeCodecDecoder(engine)
    meta: dict[str, Any] = {
        "weights": "random",
        "server": mask_text(url),
        "left_context_frames": LEFT_CONTEXT,
        "model": {"path": str(model), "sha256": sha256_path(model), "stage": "code2wav"},
        "placement": {"code2wav": engine.placement.as_dict()},
        "runtime_library": engine.library,
    }
    em.emit(
        RunStart(
            t=time.time(),
            pipeline="qwen3-tts",
            device=device,
            runtime=engine.runtime,
            strategy=strategy,
            meta=meta,
        )
    )
    # the password (if any) comes from the environment edgelab launched this process with
    client = CodecStreamClient(from_device_env(url), run=em.run, on_event=em.emit, decoder=decoder)  # type: ignore[arg-type]
    ok = True
    err = None
    for i in range(warmup + requests):
        phase = "warmup" if i < warmup else "measured"
        res = client.stream(list(texts), phase=phase)
        if not res.ok:
            ok, err = False, res.error
    em.emit(RunEnd(t=time.time(), state=RunEndState.FINISHED if ok else RunEndState.FAILED, error=err))
    return ok
