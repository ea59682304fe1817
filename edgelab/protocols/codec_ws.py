"""Codec-token streaming (strategy S4): the talker streams codec frames, the device runs the vocoder.

Wire (DESIGN §5a): ``session.config{output_mode: "codec_tokens"}``; server ``codec.start{codebooks,
codebook_size, frame_rate_hz, sample_rate, ...}``; binary frames = 7-byte little-endian header
(uint32 seq, uint16 n_frames, uint8 flags: EOS 0x1, SEGMENT_END 0x2, RESET 0x4) + int16 codes
frame-major; ``codec.done{total_frames, seq_last, error, cancelled}``. The client cancels with
``input.cancel``. Each ``input.text`` is one segment: its last message carries SEGMENT_END, the
next segment's first carries RESET (the vocoder drops its left context).
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from edgelab.credentials import mask_text
from edgelab.errors import FrameError
from edgelab.metrics.events import (
    AudioChunk,
    CodecFrames,
    ErrorEvent,
    Event,
    RequestEnd,
    RequestStart,
    StageTiming,
)
from edgelab.protocols.ws import (
    EventSink,
    Recorder,
    json_message,
    loaded_models,
    open_ws,
    stream_url,
    watch_for_stop,
)
from edgelab.reference import PROVENANCE
from edgelab.reference.tts import (
    CODEBOOK_SIZE,
    CODEBOOKS,
    FRAME_RATE_HZ,
    LEFT_CONTEXT,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    CodecDecoder,
    chunk_sizes,
    chunked,
    frames_for_text,
    schedule_of,
)

EOS, SEGMENT_END, RESET = 0x1, 0x2, 0x4
HEADER = struct.Struct("<IHB")  # 7 bytes: seq, n_frames, flags


def pack_frames(seq: int, codes: np.ndarray, flags: int = 0) -> bytes:
    """Header + int16 little-endian codes, frame-major ([n_frames, codebooks])."""
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise ValueError(f"codes must be [n_frames, codebooks], got {codes.shape}")
    return HEADER.pack(seq, codes.shape[0], flags) + codes.astype("<i2").tobytes()


def unpack_frames(data: bytes, codebooks: int = CODEBOOKS) -> tuple[int, int, np.ndarray]:
    """(seq, flags, codes [n_frames, codebooks]) of one binary message; raises FrameError if malformed."""
    if len(data) < HEADER.size:
        raise FrameError(f"codec message of {len(data)} bytes is shorter than the 7-byte header")
    seq, n, flags = HEADER.unpack_from(data)
    body = data[HEADER.size :]
    if len(body) != n * codebooks * 2:
        raise FrameError(
            f"seq {seq}: header says {n} frames x {codebooks} codebooks, body has {len(body)} bytes"
        )
    return seq, flags, np.frombuffer(body, dtype="<i2").reshape(n, codebooks).copy()


# ---------------------------------------------------------------- client (the device-side vocoder)


@dataclass
class CodecResult:
    """What arrived for one request: frames by seq, decoded PCM, the server's closing counts."""

    request: str
    submit_t: float
    end_t: float | None = None
    events: list[Event] = field(default_factory=list)
    start_info: dict[str, Any] = field(default_factory=dict)
    done_info: dict[str, Any] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    codes: list[np.ndarray] = field(default_factory=list)
    pcm: bytes = b""
    cancel_t: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def total_frames(self) -> int:
        return sum(c.shape[0] for c in self.codes)

    @property
    def cancelled(self) -> bool:
        return bool(self.done_info.get("cancelled"))

    def all_codes(self) -> np.ndarray:
        return np.concatenate(self.codes) if self.codes else np.zeros((0, CODEBOOKS), dtype=np.int16)


class CodecStreamClient:
    """Requests codec tokens and, by default, decodes them with the reference vocoder as they arrive."""

    def __init__(
        self,
        url: str,
        *,
        config: dict[str, Any] | None = None,
        run: str | None = None,
        on_event: EventSink | None = None,
        decoder: CodecDecoder | None = None,
        decode: bool = True,
        timeout: float = 120.0,
    ):
        self.url = stream_url(url)
        self.config = {"model": "qwen3-tts", **(config or {}), "output_mode": "codec_tokens"}
        self.run, self.on_event, self.timeout = run, on_event, timeout
        self.decoder = (decoder or CodecDecoder(0)) if decode else None
        self._n = 0

    def stream(
        self,
        text: str | Sequence[str],
        *,
        cancel_after_frames: int | None = None,
        request: str | None = None,
        phase: str = "measured",
        band: str | None = None,
    ) -> CodecResult:
        segments = [text] if isinstance(text, str) else list(text)
        self._n += 1
        rid = request or f"{self.run or 'codec'}-r{self._n:03d}"
        ws = open_ws(self.url, self.timeout)
        res = CodecResult(request=rid, submit_t=time.time())
        rec = Recorder(res, self.run, self.on_event)
        rec(RequestStart(t=res.submit_t, request=rid, phase=phase, band=band, input=" | ".join(segments)))
        context: np.ndarray | None = None
        codebooks = CODEBOOKS
        sr = SAMPLE_RATE
        idx = 0
        try:
            with ws:
                ws.send(json.dumps({"type": "session.config", **self.config}))
                for seg in segments:
                    ws.send(json.dumps({"type": "input.text", "text": seg}))
                ws.send(json.dumps({"type": "input.done"}))
                while True:
                    msg = ws.recv(timeout=self.timeout)
                    now = time.time()
                    if isinstance(msg, bytes):
                        seq, flags, codes = unpack_frames(msg, codebooks)
                        if res.seqs and seq != res.seqs[-1] + 1:
                            raise FrameError(f"seq {seq} follows {res.seqs[-1]}: frames lost or reordered")
                        res.seqs.append(seq)
                        res.flags.append(flags)
                        res.codes.append(codes)
                        rec(
                            CodecFrames(
                                t=now,
                                request=rid,
                                seq=seq,
                                n_frames=codes.shape[0],
                                flags=flags,
                                codebooks=codebooks,
                            )
                        )
                        if self.decoder is not None and codes.shape[0]:
                            if flags & RESET:
                                context = None
                            t0 = time.time()
                            pcm = self.decoder.decode(codes, context).astype("<i2").tobytes()
                            t1 = time.time()
                            res.pcm += pcm
                            context = (
                                codes if context is None else np.concatenate([context, codes])[-LEFT_CONTEXT:]
                            )
                            rec(StageTiming(t=t1, request=rid, stage="vocoder", start=t0, end=t1))
                            rec(
                                AudioChunk(
                                    t=t1,
                                    request=rid,
                                    idx=idx,
                                    samples=len(pcm) // 2,
                                    sample_rate=sr,
                                    terminal=bool(flags & EOS),
                                )
                            )
                            idx += 1
                        if (
                            cancel_after_frames is not None
                            and res.cancel_t is None
                            and res.total_frames >= cancel_after_frames
                        ):
                            res.cancel_t = time.time()
                            ws.send(json.dumps({"type": "input.cancel"}))
                        continue
                    d = json.loads(msg)
                    kind = d.get("type")
                    if kind == "codec.start":
                        res.start_info = d
                        codebooks = int(d.get("codebooks") or CODEBOOKS)
                        sr = int(d.get("sample_rate") or SAMPLE_RATE)
                    elif kind == "codec.done":
                        res.done_info = d
                        if d.get("error"):
                            res.error = str(d["error"])
                        ws.send(json.dumps({"type": "session.close"}))
                    elif kind == "error":
                        res.error = str(d.get("message") or d)
                        rec(ErrorEvent(t=now, request=rid, cls="workload", message=res.error))
                        break
                    elif kind == "session.done":
                        break
        except FrameError as err:
            res.error = mask_text(str(err))
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
        except TimeoutError:
            res.error = f"no message from the server within {self.timeout:g} s"
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
        except ConnectionClosed as err:
            res.error = mask_text(f"connection closed: {err}")
            rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
        if res.ok and res.done_info:
            if res.done_info.get("total_frames") != res.total_frames:
                res.error = (
                    f"server counted {res.done_info.get('total_frames')} frames, {res.total_frames} arrived"
                )
            elif res.seqs and res.done_info.get("seq_last") != res.seqs[-1]:
                res.error = f"server's last seq {res.done_info.get('seq_last')}, last arrived {res.seqs[-1]}"
            if res.error:
                rec(ErrorEvent(t=time.time(), request=rid, cls="infra", message=res.error))
        res.end_t = time.time()
        rec(RequestEnd(t=res.end_t, request=rid, ok=res.ok, error=res.error))
        return res


# ---------------------------------------------------------------- server side (used by SpeechServer)


async def codec_session(
    ws: ServerConnection, inbox: Any, cfg: dict[str, Any], opts: Any, pending: list | None = None
) -> None:
    """Serve one codec-token session: segments in, frames out on the schedule, cancellable.
    ``pending`` holds messages the speech session already read after the config."""
    from edgelab.protocols.serving import iterate_in_thread

    sched = list(schedule_of(opts.schedule))
    if cfg.get("initial_codec_chunk_frames"):
        sched[0] = int(cfg["initial_codec_chunk_frames"])
    seed = int(cfg["seed"]) if cfg.get("seed") is not None else opts.seed
    talker, _ = loaded_models(seed)
    segments: list[str] = []
    pending = pending if pending is not None else []
    while True:
        msg = pending.pop(0) if pending else await inbox.get()
        if msg is None:
            return
        kind = msg.get("type") if isinstance(msg, dict) else None
        if kind == "input.text":
            if msg.get("text"):
                segments.append(str(msg["text"]))
            continue
        if kind == "session.close":
            await ws.send(json_message("session.done"))
            return
        if kind == "input.cancel":
            continue
        if kind != "input.done":
            await ws.send(json_message("error", message=f"unexpected message {kind or type(msg).__name__!r}"))
            continue
        if not segments:
            await ws.send(json_message("error", message="input.done before any input.text"))
            continue
        await ws.send(
            json_message(
                "codec.start",
                codebooks=CODEBOOKS,
                codebook_size=CODEBOOK_SIZE,
                frame_rate_hz=FRAME_RATE_HZ,
                sample_rate=SAMPLE_RATE,
                samples_per_frame=SAMPLES_PER_FRAME,
                left_context_frames=LEFT_CONTEXT,
                schedule=sched,
                **PROVENANCE,
            )
        )
        stop = threading.Event()
        deferred: list = []
        watcher = asyncio.create_task(watch_for_stop(inbox, stop, deferred))
        seq, total, error = -1, 0, None
        try:
            for s_i, seg in enumerate(segments):
                n = frames_for_text(seg)
                sizes = chunk_sizes(sched, n)

                def make(seg: str = seg, n: int = n, stop: threading.Event = stop):
                    frames = talker.frames(seg, n, frames_per_s=opts.frames_per_s, stop=stop)
                    return chunked(frames, sched, n)

                k = 0
                async for codes in iterate_in_thread(make):
                    flags = 0
                    if k == 0 and s_i > 0:
                        flags |= RESET
                    if k == len(sizes) - 1:
                        flags |= SEGMENT_END
                        if s_i == len(segments) - 1:
                            flags |= EOS
                    seq += 1
                    total += codes.shape[0]
                    await ws.send(pack_frames(seq, codes, flags))
                    k += 1
                    if stop.is_set():
                        break
                if stop.is_set():
                    break
        except ConnectionClosed:
            return
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
        finally:
            watcher.cancel()
        segments = []
        await ws.send(
            json_message(
                "codec.done",
                total_frames=total,
                seq_last=seq if seq >= 0 else None,
                error=error,
                cancelled=stop.is_set(),
            )
        )
        pending.extend(deferred)
