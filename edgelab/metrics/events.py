"""The one event schema for everything a run sends back, as JSON lines.

Every source (a runtime adapter reading a process's output, a protocol client measuring
from the lab side, a telemetry sampler) emits these events, so ingest, the live view, the
store and the exporters know one shape. All times are seconds on the *lab* clock (Unix
epoch, float); a device timestamp is corrected with :class:`ClockOffset` before it
becomes an event. Unknown values are ``None`` (null), never zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from edgelab.errors import EventError

try:  # optional speed-up for ingest at 10^5 events/s; the stdlib gives the same results
    import orjson as _fastjson
except ImportError:  # pragma: no cover - depends on the environment
    _fastjson = None

SCHEMA_VERSION = 1

ERROR_CLASSES = ("infra", "device", "workload")
PHASES = ("warmup", "measured", "sustained", "after_cancel")


@dataclass(slots=True)
class Event:
    """Base: ``t`` is when it happened (lab clock, s); ``run`` the run id it belongs to."""

    kind: ClassVar[str] = "event"
    time_fields: ClassVar[tuple[str, ...]] = ("t",)

    t: float
    run: str | None = None


@dataclass(slots=True)
class RunStart(Event):
    kind: ClassVar[str] = "run.start"
    pipeline: str | None = None
    device: str | None = None
    runtime: str | None = None
    strategy: str | None = None
    virtual: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


class RunEndState:
    """``run.end``'s ``state``: the final ``edgelab.states.RunState`` values, as the programs that run
    on a device write them. Spelled here, not imported: their zipapps pack this module but not
    ``edgelab.states`` (a ``StrEnum``, Python 3.11, where a device's python3 may be 3.10).
    ``tests/metrics/test_run_end_states.py`` keeps the two equal."""

    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    DEVICE_LOST = "device-lost"


@dataclass(slots=True)
class RunEnd(Event):
    kind: ClassVar[str] = "run.end"
    state: str = RunEndState.FINISHED  # finished | failed | stopped | device-lost
    error: str | None = None


@dataclass(slots=True)
class RequestStart(Event):
    """A request was sent (``t`` = submit time); chunk times are measured from here."""

    kind: ClassVar[str] = "request.start"
    request: str = ""
    phase: str = "measured"
    band: str | None = None
    input: str | None = None


@dataclass(slots=True)
class RequestEnd(Event):
    kind: ClassVar[str] = "request.end"
    request: str = ""
    ok: bool = True
    error: str | None = None


@dataclass(slots=True)
class AudioChunk(Event):
    """PCM arrived: ``samples`` at ``sample_rate``; zero-sample chunks (e.g. a terminal marker) are kept."""

    kind: ClassVar[str] = "audio.chunk"
    request: str = ""
    idx: int = 0
    samples: int = 0
    sample_rate: int = 24000
    sha256: str | None = None
    terminal: bool = False
    sentence: int | None = None  # which sentence of a split utterance (vLLM-Omni sentence_index)


@dataclass(slots=True)
class CodecFrames(Event):
    """Codec frames arrived (S4 codec-token stream): seq, frame count, flags (EOS 1, SEGMENT_END 2, RESET 4)."""

    kind: ClassVar[str] = "codec.frames"
    request: str = ""
    seq: int = 0
    n_frames: int = 0
    flags: int = 0
    codebooks: int | None = None


@dataclass(slots=True)
class ActionChunk(Event):
    """One action chunk: observation capture, inference start/end (``t`` = chunk available)."""

    kind: ClassVar[str] = "action.chunk"
    time_fields: ClassVar[tuple[str, ...]] = ("t", "obs_t", "infer_start", "infer_end")
    request: str = ""
    idx: int = 0
    obs_t: float | None = None
    infer_start: float | None = None
    infer_end: float | None = None
    horizon: int | None = None
    dims: int | None = None


@dataclass(slots=True)
class TextToken(Event):
    kind: ClassVar[str] = "text.token"
    request: str = ""
    n: int = 1
    text: str | None = None


@dataclass(slots=True)
class StageTiming(Event):
    """A pipeline stage ran from ``start`` to ``end`` (e.g. spawn, load, talker, code2wav)."""

    kind: ClassVar[str] = "stage"
    time_fields: ClassVar[tuple[str, ...]] = ("t", "start", "end")
    request: str | None = None
    stage: str = ""
    start: float | None = None
    end: float | None = None


@dataclass(slots=True)
class ResourceSample(Event):
    """A telemetry sample; every field the sensor does not give stays None."""

    kind: ClassVar[str] = "resource"
    device: str | None = None
    source: str | None = None  # tegrastats | proc | nvidia-smi | android-thermal | dumpsys-battery
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    mem_available_bytes: int | None = None
    temps_c: dict[str, float] = field(default_factory=dict)
    clocks_mhz: dict[str, float] = field(default_factory=dict)
    power_w: dict[str, float] = field(default_factory=dict)
    gpu_util_pct: float | None = None
    throttled: bool | None = None
    virtual: bool | None = None  # a virtual device's shim made it: machinery, not a device figure
    raw: dict[str, Any] = field(default_factory=dict)  # every other field the source gave, unknown ones kept


@dataclass(slots=True)
class LogLine(Event):
    kind: ClassVar[str] = "log"
    stream: str = "stdout"
    line: str = ""
    level: str | None = None


@dataclass(slots=True)
class ErrorEvent(Event):
    """A failure with its class: infra (lab, transport), device (lost, OOM, thermal), workload (the model)."""

    kind: ClassVar[str] = "error"
    cls: str = "workload"
    message: str = ""
    request: str | None = None

    def __post_init__(self) -> None:
        if self.cls not in ERROR_CLASSES:
            raise EventError(f"error class {self.cls!r} is not one of {', '.join(ERROR_CLASSES)}")


EVENT_TYPES: dict[str, type[Event]] = {
    c.kind: c
    for c in (
        RunStart,
        RunEnd,
        RequestStart,
        RequestEnd,
        AudioChunk,
        CodecFrames,
        ActionChunk,
        TextToken,
        StageTiming,
        ResourceSample,
        LogLine,
        ErrorEvent,
    )
}
_NAMES: dict[str, tuple[str, ...]] = {k: tuple(f.name for f in fields(c)) for k, c in EVENT_TYPES.items()}
_FIELDS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in _NAMES.items()}


def to_dict(ev: Event) -> dict[str, Any]:
    """Shallow: nested dicts (temperatures, meta) are shared with the event, not copied."""
    d = {name: getattr(ev, name) for name in _NAMES[ev.kind]}
    d["kind"] = ev.kind
    return d


def from_dict(d: dict[str, Any]) -> Event:
    """Build the event a decoded dict describes; unknown keys are ignored (newer sources)."""
    try:
        kind = d["kind"]
        cls = EVENT_TYPES[kind]
    except (KeyError, TypeError):
        raise EventError(
            f"not an edgelab event (kind {d.get('kind') if isinstance(d, dict) else d!r})"
        ) from None
    names = _FIELDS[kind]
    try:
        return cls(**{k: v for k, v in d.items() if k in names})
    except TypeError as err:
        raise EventError(f"bad {kind} event: {err}") from None


def encode(ev: Event) -> str:
    """One JSON line (no newline)."""
    if _fastjson is not None:
        return _fastjson.dumps(to_dict(ev)).decode("utf-8")
    return json.dumps(to_dict(ev), separators=(",", ":"))


def decode(line: str | bytes) -> Event:
    try:
        d = _fastjson.loads(line) if _fastjson is not None else json.loads(line)
    except ValueError as err:
        raise EventError(f"not JSON: {str(line)[:80]!r}") from err
    if not isinstance(d, dict):
        raise EventError(f"not an edgelab event: {str(line)[:80]!r}")
    return from_dict(d)


def decode_lines(lines: Iterable[str | bytes], *, skip_other: bool = True) -> Iterator[Event]:
    """Events from JSON lines; lines that are not events become LogLine events when ``skip_other``."""
    import time

    for line in lines:
        s = line.strip()
        if not s:
            continue
        if isinstance(s, bytes):
            s = s.decode("utf-8", "replace")
        try:
            yield decode(s)
        except EventError:
            if not skip_other:
                raise
            yield LogLine(t=time.time(), line=s)


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """Device clock minus lab clock, measured by a round trip: lab sends at t0, the device
    stamps td, lab receives at t1; assuming a symmetric path, offset = td - (t0 + t1) / 2,
    uncertain by half the round trip."""

    offset_s: float = 0.0
    rtt_s: float | None = None

    @classmethod
    def from_round_trip(cls, t0: float, device_t: float, t1: float) -> ClockOffset:
        if t1 < t0:
            raise EventError("round trip ends before it starts", remedy="pass lab times t0 <= t1")
        return cls(offset_s=device_t - (t0 + t1) / 2.0, rtt_s=t1 - t0)

    @classmethod
    def best_of(cls, samples: Iterable[tuple[float, float, float]]) -> ClockOffset:
        """The round trip with the smallest RTT bounds the offset best (NTP's rule)."""
        best = min((cls.from_round_trip(*s) for s in samples), key=lambda c: c.rtt_s or 0.0, default=None)
        if best is None:
            raise EventError("no clock round trips measured", remedy="measure at least one round trip")
        return best

    def to_lab(self, device_t: float | None) -> float | None:
        return None if device_t is None else device_t - self.offset_s

    def correct(self, ev: Event) -> Event:
        """Shift every time field of an event stamped on the device clock onto the lab clock."""
        for name in ev.time_fields:
            v = getattr(ev, name)
            if v is not None:
                setattr(ev, name, v - self.offset_s)
        return ev
