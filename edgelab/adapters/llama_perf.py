"""llama.cpp's own timing lines (llama-completion, llama-cli, older llama-*), read from stderr.

Formats (vendored llama.cpp 0c1e570; the older names are the same lines under another prefix)::

    common_perf_print:        load time =      18.49 ms
    common_perf_print: prompt eval time =       0.32 ms /     2 tokens (    0.16 ms per token,  6309.15 tokens per second)
    common_perf_print:        eval time =       1.13 ms /     7 runs   (    0.16 ms per token,  6189.21 tokens per second)
    common_perf_print:       total time =       6.61 ms /     9 tokens
    llama_perf_context_print: ...            (builds before common_perf_print)
    llama_print_timings: ...                 (older still)
    slot print_timing: id  3 | task 0 | prompt eval time = ...   (llama-server's per-request log)
    [ Prompt: 258.6 t/s | Generation: 197.4 t/s ]                 (the chat llama-cli)

and the build line every binary prints: ``version: 0.5.0-dev (build 1, commit 0c1e570)`` or
``... build 1 (0c1e570) with GNU 12.2.0 for Linux x86_64``. A log prefix (``0.00.036.286 I``)
is allowed. Pure functions of text; unknown figures stay None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

_PREFIXES = r"(?:common_perf_print|llama_perf_context_print|llama_perf_sampler_print|llama_print_timings|print_timing)"
_LINE = re.compile(
    rf"{_PREFIXES}:?(?:\s*id\s+\d+\s*\|\s*task\s+-?\d+\s*\|)?\s*(?P<what>load|prompt eval|eval|sampling|samplers|total)"
    r" time\s*=\s*(?P<ms>[\d.]+)\s*ms"
    r"(?:\s*/\s*(?P<n>\d+)\s*(?:tokens|runs))?"
    r"(?:\s*\(\s*(?P<per>[\d.]+)\s*ms per token,\s*(?P<tps>[\d.]+|inf|nan)\s*tokens per second\))?"
)
_CLI = re.compile(r"\[\s*Prompt:\s*(?P<p>[\d.]+)\s*t/s\s*\|\s*Generation:\s*(?P<g>[\d.]+)\s*t/s\s*\]")
_VERSION = re.compile(
    r"version:\s*(?P<version>\S+)\s*\(build\s+(?P<build>\d+),\s*commit\s+(?P<commit>[0-9a-f]+)\)"
)
_BUILD = re.compile(
    r"\bbuild\s+(?P<build>\d+)\s*\((?P<commit>[0-9a-f]{6,40})\)(?:\s*with\s+(?P<compiler>.+?)\s+for\s+(?P<target>\S+(?: \S+)?))?"
)


@dataclass
class PerfPhase:
    ms: float | None = None
    tokens: int | None = None
    per_token_ms: float | None = None
    tokens_per_s: float | None = None


@dataclass
class PerfReport:
    """The last complete set of timing lines in a log (one per request on llama-server)."""

    load_ms: float | None = None
    prompt: PerfPhase = field(default_factory=PerfPhase)
    eval: PerfPhase = field(default_factory=PerfPhase)
    sampling_ms: float | None = None
    total_ms: float | None = None
    total_tokens: int | None = None
    source: str | None = None  # the prefix the lines carried

    def to_dict(self) -> dict:
        return asdict(self)


def _f(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        x = float(v)
    except ValueError:
        return None
    return x if x == x and x != float("inf") else None


def _lines(text: str | Iterable[str]) -> Iterable[str]:
    return text.splitlines() if isinstance(text, str) else text


def _is_set(rep: PerfReport, what: str) -> bool:
    return {
        "load": rep.load_ms is not None,
        "prompt eval": rep.prompt.ms is not None,
        "eval": rep.eval.ms is not None,
        "sampling": rep.sampling_ms is not None,
        "total": rep.total_ms is not None,
    }.get(what, False)


def parse_perf_all(text: str | Iterable[str]) -> list[PerfReport]:
    """Every report in a log, in order; a line whose figure the current report already has
    starts the next one (llama-server logs one set per request)."""
    reports: list[PerfReport] = []
    cur: PerfReport | None = None
    for line in _lines(text):
        m = _LINE.search(line)
        if not m or m.group("what") == "samplers":
            continue
        what, ms = m.group("what"), _f(m.group("ms"))
        n = int(m.group("n")) if m.group("n") else None
        if cur is None or _is_set(cur, what):
            prefix = re.search(_PREFIXES, line)
            cur = PerfReport(source=prefix.group(0) if prefix else None)
            reports.append(cur)
        if what == "load":
            cur.load_ms = ms
        elif what == "prompt eval":
            cur.prompt = PerfPhase(ms, n, _f(m.group("per")), _f(m.group("tps")))
        elif what == "eval":
            cur.eval = PerfPhase(ms, n, _f(m.group("per")), _f(m.group("tps")))
        elif what == "sampling":
            cur.sampling_ms = ms
        elif what == "total":
            cur.total_ms, cur.total_tokens = ms, n
    return reports


def parse_perf(text: str | Iterable[str]) -> PerfReport | None:
    """The last timing report in a llama-completion / llama-cli log, or None when it has none."""
    reports = parse_perf_all(text)
    if reports:
        return reports[-1]
    for line in reversed(list(_lines(text))):
        m = _CLI.search(line)
        if m:
            return PerfReport(
                prompt=PerfPhase(tokens_per_s=float(m.group("p"))),
                eval=PerfPhase(tokens_per_s=float(m.group("g"))),
                source="llama-cli",
            )
    return None


def parse_build_info(text: str | Iterable[str]) -> dict[str, str | None] | None:
    """``{version, build, commit, compiler, target}`` from the first build line, or None."""
    for line in _lines(text):
        m = _VERSION.search(line)
        if m:
            return {
                "version": m.group("version"),
                "build": m.group("build"),
                "commit": m.group("commit"),
                "compiler": None,
                "target": None,
            }
        m = _BUILD.search(line)
        if m and ("build_info" in line or "print_info" in line or " with " in line):
            return {
                "version": None,
                "build": m.group("build"),
                "commit": m.group("commit"),
                "compiler": m.group("compiler"),
                "target": m.group("target"),
            }
    return None


__all__ = ["PerfPhase", "PerfReport", "parse_build_info", "parse_perf", "parse_perf_all"]
