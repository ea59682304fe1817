"""Building blocks of the POSIX sh collection scripts (Linux, WSL, Jetson, Android's toybox sh).

Each source runs as its ``guard`` (is it there at all?) and ``body`` (the command, under its own
short ``timeout`` so a dead mount or a hung tool costs seconds, not the probe). A source whose guard
fails prints no section at all: absent and failed stay distinguishable.

Sources that only read files (``reads=True``: /proc, /sys, /etc) share ONE ``timeout`` and one
``sh`` instead of a ``timeout`` each: on a small board (or a lab host running many virtual
devices) every fork counts, and a hung read (a thermal sensor behind a stuck I2C bus) still
costs at most one timeout; the source it hung in is kept as cut off (no end marker). Each read
runs in the background and is waited for, so the group's TERM trap can kill the reader itself:
``timeout --foreground`` (and toybox's) signal the group's ``sh`` only.
"""

from __future__ import annotations

from collections.abc import Iterable

from edgelab.probe.collectors.base import Source
from edgelab.probe.collectors.sections import begin_marker, end_marker_prefix
from edgelab.transport.quoting import quote_posix

PRELUDE = r"""LC_ALL=C; export LC_ALL; LANG=C; export LANG
PATH="$PATH:/usr/sbin:/sbin:/usr/bin:/bin:/system/bin:/vendor/bin"
T=; command -v timeout >/dev/null 2>&1 && T=1
# GNU timeout moves its command into a new process group, out of reach of the probe's own
# kill; --foreground keeps it in ours (toybox and busybox never move it).
F=; [ -n "$T" ] && timeout --foreground 5 true >/dev/null 2>&1 && F=--foreground
t() { if [ -n "$T" ]; then timeout $F "$@"; else shift; "$@"; fi; }
have() { command -v "$1" >/dev/null 2>&1; }
"""


# The read group's sh: on the group timeout's TERM, kill the read in progress, then stop.
READ_GROUP_TRAP = "trap 'kill $! 2>/dev/null; exit 143' TERM"


def _block(nonce: str, s: Source) -> str:
    begin = begin_marker(nonce, s.name)
    end = end_marker_prefix(nonce, s.name)
    run = f"{{ {s.body}\n}} & wait $!" if s.reads else f"{{ {s.body}\n}}"
    block = f"printf '%s\\n' '{begin}'; {run}; rc=$?; printf '\\n%s%s@@\\n' '{end}' \"$rc\""
    return f"if {s.guard}; then {block}; fi" if s.guard else block


def script(snippets: Iterable[Source], nonce: str, per_source_timeout: float) -> str:
    """One sh script printing every source between nonce markers, stdin closed for all.

    The file reads run first, together in one ``sh`` under one timeout; then each tool under
    its own. Section order does not matter: sections are parsed by name.
    """
    to = max(1, int(round(per_source_timeout)))
    lines = [PRELUDE, f"TO={to}", "exec </dev/null"]
    snippets = list(snippets)
    reads = [s for s in snippets if s.reads]
    if reads:
        group = "\n".join([READ_GROUP_TRAP] + [_block(nonce, s) for s in reads])
        lines.append(f"t $TO sh -c {quote_posix(group)}")
    lines += [_block(nonce, s) for s in snippets if not s.reads]
    return "\n".join(lines) + "\nexit 0\n"


def readable(path: str) -> str:
    return f"[ -r {path} ]"


def read_file(name: str, path: str, parser: str | None = None) -> Source:
    """``cat PATH`` when it is readable, in the shared read group; parsed by ``parser`` (default: ``name``)."""
    return Source(name, f"cat {path}", parser or name, f"cat {path}", readable(path), reads=True)


CPUFREQ = Source(
    "cpufreq",
    "grep . /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq",
    "cpufreq",
    "grep . /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq",
    readable("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
    reads=True,
)
THERMAL = Source(
    "thermal",
    "grep . /sys/class/thermal/thermal_zone*/{type,temp}",
    "thermal",
    "grep . /sys/class/thermal/thermal_zone*/type /sys/class/thermal/thermal_zone*/temp",
    readable("/sys/class/thermal/thermal_zone0/type"),
    reads=True,
)
CPUINFO = read_file("cpuinfo", "/proc/cpuinfo")
MEMINFO = read_file("meminfo", "/proc/meminfo")
PROC_VERSION = read_file("proc_version", "/proc/version")
UNAME = Source("uname", "uname -a", "uname", "t $TO uname -a")
