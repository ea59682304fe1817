"""What ``llama-tts`` (llama.cpp's own Qwen3-TTS pipeline, the S5 baseline) reports: its log and its WAV.

The lines (vendored llama.cpp 0c1e570, tools/tts/tts.cpp), each after the log's timestamp
(``M.SS.mmm.uuu`` since the process started) and level::

    0.05.403.053 I generated 10 frames, 38444 bytes of WAV audio (24000 Hz)
    0.05.403.098 I timings: prompt eval 0.61s + generation 2.89s + vocoder 1.09s = total 4.59s
    0.05.403.099 I          output audio = 0.80s (audio time = 0.17x process time)
    0.05.403.265 I wrote out.wav

llama-tts makes every frame, then vocodes once: its audio exists only when the WAV is written, so
its time to first audio is its total. The load time is what passed from the process's start to the
prompt (the timings line's stamp minus its total: model, mmproj, warm-up). The WAV it writes is
read by :func:`edgelab.protocols.wav.wav_facts`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

_STAMP = r"(?:(?P<m>\d+)\.(?P<s>\d{2})\.(?P<ms>\d{3})\.(?P<us>\d{3})\s+\w\s+)?"
_TIMINGS = re.compile(
    _STAMP + r"timings: prompt eval (?P<prompt>[\d.]+)s \+ generation (?P<gen>[\d.]+)s \+ vocoder "
    r"(?P<voc>[\d.]+)s = total (?P<total>[\d.]+)s"
)
_GENERATED = re.compile(
    r"generated (?P<frames>\d+) frames, (?P<bytes>\d+) bytes of WAV audio \((?P<rate>\d+) Hz\)"
)
_AUDIO = re.compile(r"output audio = (?P<audio>[\d.]+)s \(audio time = (?P<ratio>[\d.]+)x process time\)")
_SPEED = re.compile(r"frames generated: (?P<n>\d+), speed: (?P<fps>[\d.]+) frames/s")
_FAILED = re.compile(r"(failed to [^\n]*|no mmproj provided[^\n]*|mmproj does not support audio generation)")


@dataclass
class TTSLog:
    """One llama-tts run as its log tells it (seconds; None when the log does not say)."""

    frames: int | None = None
    wav_bytes: int | None = None
    sample_rate: int | None = None
    prompt_s: float | None = None
    generation_s: float | None = None
    vocoder_s: float | None = None
    total_s: float | None = None
    audio_s: float | None = None
    ratio: float | None = None  # audio seconds per process second, as llama-tts prints it
    load_s: float | None = None  # process start to the prompt (from the log's stamps)
    timings_at_s: float | None = None  # the timings line's stamp: when the audio was complete
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.total_s is not None and self.frames is not None

    @property
    def rtf(self) -> float | None:
        """Real-time factor of the whole utterance (total / audio seconds; below 1 is faster)."""
        if self.total_s is None or not self.audio_s:
            return None
        return self.total_s / self.audio_s

    @property
    def frames_per_s(self) -> float | None:
        if not self.frames or not self.generation_s:
            return None
        return self.frames / self.generation_s

    def to_dict(self) -> dict:
        return {**asdict(self), "rtf": self.rtf, "frames_per_s": self.frames_per_s}


def parse_log(text: str) -> TTSLog:
    """The figures of a llama-tts stderr log; what is missing stays None, a failure's line is kept."""
    out = TTSLog()
    m = _GENERATED.search(text)
    if m:
        out.frames, out.wav_bytes, out.sample_rate = int(m["frames"]), int(m["bytes"]), int(m["rate"])
    m = _TIMINGS.search(text)
    if m:
        out.prompt_s, out.generation_s = float(m["prompt"]), float(m["gen"])
        out.vocoder_s, out.total_s = float(m["voc"]), float(m["total"])
        if m["m"] is not None:
            at = int(m["m"]) * 60 + int(m["s"]) + int(m["ms"]) / 1e3 + int(m["us"]) / 1e6
            out.timings_at_s = at
            out.load_s = max(0.0, round(at - out.total_s, 6))
    m = _AUDIO.search(text)
    if m:
        out.audio_s, out.ratio = float(m["audio"]), float(m["ratio"])
    if not out.complete:
        f = _FAILED.search(text)
        out.error = f.group(1).strip() if f else "no timings line in the log (the run did not finish)"
    return out


def frame_rates(text: str) -> list[float]:
    """The running frames/s llama-tts logs every 2 s while it generates."""
    return [float(m["fps"]) for m in _SPEED.finditer(text)]


__all__ = ["TTSLog", "frame_rates", "parse_log"]
