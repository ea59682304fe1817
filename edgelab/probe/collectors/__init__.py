"""Collectors per OS family, and the dispatcher that picks one from how a device is reached.

ADB means Android; an SSH device whose shell is PowerShell is Windows; every other SSH or
local device is Linux (Jetson, WSL, ARM boards, x86 alike: the script finds out which).
"""

from __future__ import annotations

from edgelab.errors import ConfigError
from edgelab.probe.collectors import android, linux, windows
from edgelab.probe.collectors.base import Collection, Collector, Source, parse_sections, run_collector
from edgelab.probe.collectors.sections import Section, split_sections
from edgelab.transport.base import Endpoint
from edgelab.transport.host import host_class

COLLECTORS: dict[str, Collector] = {
    "linux": linux.COLLECTOR,
    "android": android.COLLECTOR,
    "windows": windows.COLLECTOR,
}

__all__ = [
    "COLLECTORS",
    "Collection",
    "Collector",
    "Section",
    "Source",
    "collector_for",
    "family_for",
    "get_collector",
    "parse_sections",
    "run_collector",
    "split_sections",
]


def family_for(endpoint: Endpoint) -> str:
    """The OS family to collect from: android over ADB, windows for a PowerShell shell, else linux."""
    return host_class(endpoint.login_shell).family


def get_collector(family: str) -> Collector:
    try:
        return COLLECTORS[family]
    except KeyError:
        raise ConfigError(
            f"no collector for OS family {family!r}", remedy=f"use one of {', '.join(COLLECTORS)}"
        ) from None


def collector_for(endpoint: Endpoint) -> Collector:
    return get_collector(family_for(endpoint))
