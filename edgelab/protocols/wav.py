"""RIFF/WAVE for speech responses: ``wav`` is vLLM-Omni's default ``response_format``.

A whole response is one WAV file (sizes filled in). A streamed one starts with a header whose
RIFF and data sizes are 0xFFFFFFFF (the length is unknown when the first bytes leave, as in
OpenAI's and vLLM-Omni's streamed WAV), followed by raw s16le PCM.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

STREAMING_SIZE = 0xFFFFFFFF
_FMT = struct.Struct(
    "<4sI4s4sIHHIIHH4sI"
)  # RIFF, size, WAVE, "fmt ", 16, PCM, ch, sr, byte rate, align, bits, data, size
HEADER_BYTES = _FMT.size  # 44


def wav_header(sample_rate: int, *, channels: int = 1, data_bytes: int | None = None) -> bytes:
    """A 44-byte PCM16 header; ``data_bytes=None`` writes the streaming placeholder sizes."""
    data = STREAMING_SIZE if data_bytes is None else data_bytes
    riff = STREAMING_SIZE if data_bytes is None else 36 + data_bytes
    return _FMT.pack(
        b"RIFF",
        riff,
        b"WAVE",
        b"fmt ",
        16,
        1,
        channels,
        sample_rate,
        sample_rate * channels * 2,
        channels * 2,
        16,
        b"data",
        data,
    )


def wav_file(pcm: bytes, sample_rate: int, *, channels: int = 1) -> bytes:
    return wav_header(sample_rate, channels=channels, data_bytes=len(pcm)) + pcm


@dataclass(frozen=True)
class WavInfo:
    sample_rate: int
    channels: int
    bits: int
    data_offset: int
    data_bytes: int | None  # None: a streamed header (size unknown)


def parse_wav_header(data: bytes) -> WavInfo | None:
    """The format of a RIFF/WAVE prefix (chunks walked, so LIST/fact chunks are skipped); None if
    ``data`` does not start with a complete PCM WAV header."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        cid, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if cid == b"fmt ":
            if body + 16 > len(data):
                return None
            _tag, ch, sr, _rate, _align, bits = struct.unpack_from("<HHIIHH", data, body)
            fmt = (sr, ch, bits)
        elif cid == b"data":
            if fmt is None:
                return None
            return WavInfo(fmt[0], fmt[1], fmt[2], body, None if size == STREAMING_SIZE else size)
        pos = body + size + (size & 1)
    return None


@dataclass(frozen=True)
class WavFacts:
    """A whole WAV file's format, length and the SHA-256 of its PCM bytes (the data chunk): what a
    stream's chunks, put together, are compared with."""

    sample_rate: int
    channels: int
    bits: int
    samples: int  # per channel
    pcm_sha256: str

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate if self.sample_rate else 0.0


def wav_facts(data: bytes) -> WavFacts | None:
    """The facts of a complete WAV file (llama-tts's output); None when it is not one."""
    info = parse_wav_header(data)
    if info is None:
        return None
    size = len(data) - info.data_offset if info.data_bytes is None else info.data_bytes
    pcm = data[info.data_offset : info.data_offset + size]
    frame = max(1, info.channels * info.bits // 8)
    return WavFacts(
        info.sample_rate, info.channels, info.bits, len(pcm) // frame, hashlib.sha256(pcm).hexdigest()
    )
