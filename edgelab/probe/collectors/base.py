"""What every OS family's collector shares: sources, the batched exec, and parsing of its sections.

A collector is a tuple of :class:`Source`, each one whole: its section name, the command an
operator would type, how the collection script runs it, and the parser that reads what it printed
(as pyinfra keeps a fact's command and its parser together). Its whole script runs in ONE remote
exec; the transport's timeout bounds the probe and kills the remote side when it runs over.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgelab.probe.collectors.sections import Section, new_nonce, split_sections
from edgelab.probe.facts import Facts
from edgelab.transport.base import Capability, Transport
from edgelab.transport.host import host_for_family


@dataclass(frozen=True)
class Source:
    """One thing the collector reads. ``parser`` is a key of ``edgelab.probe.detect.BY_NAME``, or for
    collector-only sources (library listings) a callable ``(facts, text, label)`` that adds to the
    merged facts and records its provenance, or None for a section another step reads (Windows'
    CIM classes, joined by ``Collector.extra_outputs``).

    ``body`` is what the family's script runs for it: an sh command list (POSIX; it may use
    ``t SECONDS CMD...`` and ``$TO``, the per-source timeout) or one PowerShell statement; ``guard``
    an sh condition that must hold first ("" = always), so an absent tool prints no section at all.
    ``reads=True``: the body is ONE simple command reading files (cat, tr, grep) with no ``t``/
    ``have``/``$TO``; it runs in the shared read group under one timeout (see ``posix``).
    """

    name: str
    command: str  # what an operator would run by hand; also the provenance label
    parser: str | Callable[[Facts, str, str], None] | None
    body: str
    guard: str = ""
    reads: bool = False


@dataclass
class Collection:
    """The raw result of one probe: enough to re-parse it later with a newer edgelab."""

    family: str
    script_version: int
    sections: dict[str, Section]
    exit_code: int | None
    stderr: str
    duration_s: float
    warnings: list[str] = field(default_factory=list)

    def raw(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "script_version": self.script_version,
            "exit_code": self.exit_code,
            "stderr": self.stderr[-8000:],
            "sections": {n: s.to_dict() for n, s in self.sections.items()},
        }


@dataclass(frozen=True)
class Collector:
    """An OS family's batched collection: its sources, how to build and run its script. The family
    (linux, android, windows) is also the host layer's: it says which shell the script is written
    for (``host_for_family``), so no collector names one."""

    family: str
    script_version: int
    sources: tuple[Source, ...]
    build_script: Callable[[tuple[Source, ...], str, float], str]  # (sources, nonce, per-source timeout)
    post: Callable[[Facts, dict[str, Section]], None] | None = None  # family-specific fix-ups
    # parser inputs built from several sections (Windows: CIM classes joined), parsed first
    extra_outputs: Callable[[dict[str, Section]], dict[str, str]] | None = None

    def argv(self, nonce: str, per_source_timeout: float = 3.0) -> list[str]:
        """The argv a transport runs: ``sh -c SCRIPT`` or PowerShell ``-EncodedCommand``."""
        script = self.build_script(self.sources, nonce, per_source_timeout)
        return host_for_family(self.family).script_argv(script)

    def source(self, name: str) -> Source | None:
        return next((s for s in self.sources if s.name == name), None)


def run_collector(
    collector: Collector, transport: Transport, *, timeout: float, per_source_timeout: float = 3.0
) -> Collection:
    """Run the family's script in one exec; RemoteTimeout (remote side killed) past ``timeout``."""
    nonce = new_nonce()
    argv = collector.argv(nonce, per_source_timeout)
    start = time.monotonic()
    if not host_for_family(collector.family).sh and transport.supports(Capability.WINDOWS_SHELL):
        # Windows OpenSSH hands the line to PowerShell: send the encoded script as is,
        # not wrapped once more by the transport's own PowerShell quoting.
        res = transport.run_line(" ".join(argv), timeout=timeout, label="probe")
    else:
        res = transport.run(argv, timeout=timeout)
    sections, warnings = split_sections(res.stdout, nonce)
    if not sections:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        warnings.append(
            f"the {collector.family} collector printed no section (exit {res.exit_code})"
            + (f": {' | '.join(tail)}" if tail else "")
        )
    return Collection(
        family=collector.family,
        script_version=collector.script_version,
        sections=sections,
        exit_code=res.exit_code,
        stderr=res.stderr,
        duration_s=time.monotonic() - start,
        warnings=warnings,
    )


def parse_sections(collector: Collector, sections: dict[str, Section]) -> Facts:
    """Feed each section to its parser and merge the fragments in the collector's source order.

    Pure: the same sections always give the same facts, which is what re-parsing a stored
    snapshot relies on. Parsing goes through ``detect.facts_from_outputs``, the same path as
    ``edgelab facts parse``; collector-only sources (library listings) are applied after it.
    Unknown sections are ignored; a failed source only adds a warning.
    """
    from edgelab.probe.detect import BY_NAME, facts_from_outputs

    outputs: dict[str, str] = dict(collector.extra_outputs(sections)) if collector.extra_outputs else {}
    helpers: list[tuple[Source, str]] = []
    notes: list[str] = []
    for src in collector.sources:
        sec = sections.get(src.name)
        if sec is None or src.parser is None:
            continue
        if sec.exit_code not in (0, None) and not sec.output.strip():
            continue  # an optional tool that failed silently (hostnamectl without systemd): raw keeps it
        if sec.exit_code is None:
            notes.append(f"{src.command}: cut off before it finished")
        if callable(src.parser):
            helpers.append((src, sec.output))
        elif src.parser in BY_NAME:
            outputs[src.parser] = sec.output
        else:
            notes.append(f"{src.command}: no parser {src.parser!r} in this edgelab")
    facts, _results = facts_from_outputs(outputs)
    for src, text in helpers:
        try:
            src.parser(facts, text, src.command)  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - a collector helper must not sink the probe
            notes.append(f"{src.command}: internal error {type(exc).__name__}: {exc}")
    if collector.post is not None:
        collector.post(facts, sections)
    facts.warnings.extend(notes)
    return facts
