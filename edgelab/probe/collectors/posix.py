"""Building blocks of the POSIX sh collection scripts (Linux, WSL, Jetson, Android's toybox sh).

Each source is ``GUARD`` (is it there at all?) and ``BODY`` (the command, under its own short
``timeout`` so a dead mount or a hung tool costs seconds, not the probe). A source whose guard
fails prints no section at all: absent and failed stay distinguishable.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgelab.probe.collectors.sections import begin_marker, end_marker_prefix

PRELUDE = r"""LC_ALL=C; export LC_ALL; LANG=C; export LANG
PATH="$PATH:/usr/sbin:/sbin:/usr/bin:/bin:/system/bin:/vendor/bin"
T=; command -v timeout >/dev/null 2>&1 && T=1
# GNU timeout moves its command into a new process group, out of reach of the probe's own
# kill; --foreground keeps it in ours (toybox and busybox never move it).
F=; [ -n "$T" ] && timeout --foreground 5 true >/dev/null 2>&1 && F=--foreground
t() { if [ -n "$T" ]; then timeout $F "$@"; else shift; "$@"; fi; }
have() { command -v "$1" >/dev/null 2>&1; }
"""


@dataclass(frozen=True)
class Snippet:
    name: str
    guard: str  # sh condition; "" = always
    body: str  # sh command list; may use t SECONDS CMD... and $TO (the per-source timeout)


def script(nonce: str, snippets: list[Snippet], per_source_timeout: float) -> str:
    """One sh script printing every snippet between nonce markers, stdin closed for all."""
    to = max(1, int(round(per_source_timeout)))
    lines = [PRELUDE, f"TO={to}", "exec </dev/null"]
    for s in snippets:
        begin = begin_marker(nonce, s.name)
        end = end_marker_prefix(nonce, s.name)
        block = f"printf '%s\\n' '{begin}'; {{ {s.body}\n}}; rc=$?; printf '\\n%s%s@@\\n' '{end}' \"$rc\""
        lines.append(f"if {s.guard}; then {block}; fi" if s.guard else block)
    return "\n".join(lines) + "\nexit 0\n"


def readable(path: str) -> str:
    return f"[ -r {path} ]"


def cat(path: str) -> str:
    return f"t $TO cat {path}"


CPUFREQ = Snippet(
    "cpufreq",
    readable("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
    "t $TO grep . /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq",
)
THERMAL = Snippet(
    "thermal",
    readable("/sys/class/thermal/thermal_zone0/type"),
    "t $TO grep . /sys/class/thermal/thermal_zone*/type /sys/class/thermal/thermal_zone*/temp",
)
CPUINFO = Snippet("cpuinfo", readable("/proc/cpuinfo"), cat("/proc/cpuinfo"))
MEMINFO = Snippet("meminfo", readable("/proc/meminfo"), cat("/proc/meminfo"))
PROC_VERSION = Snippet("proc_version", readable("/proc/version"), cat("/proc/version"))
UNAME = Snippet("uname", "", "t $TO uname -a")
