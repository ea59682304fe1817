"""Probing: collectors gather raw outputs in one exec per device, parsers turn them into facts.

``from edgelab.probe import probe_device, probe_devices`` is the Python entry point.
"""

from __future__ import annotations

__all__ = ["ProbeOutcome", "facts_from_raw", "probe_device", "probe_devices"]


def __getattr__(name: str):
    # Lazy: importing edgelab.probe.parsers must not pull in the store and transports.
    if name in __all__:
        from edgelab.probe import snapshot

        return getattr(snapshot, name)
    raise AttributeError(name)
