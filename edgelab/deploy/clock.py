"""Device clock offset, measured over the transport, so device timestamps land on the lab clock.

Events a device process emits carry its own clock; a phone's clock can be seconds off. Three
round trips of ``date`` (the one with the smallest RTT wins, NTP's rule) bound the offset by
half a round trip; a device whose ``date`` has no sub-second field is trusted to the second.
"""

from __future__ import annotations

import time

from edgelab.errors import TransportError
from edgelab.metrics.events import ClockOffset
from edgelab.transport.base import Transport
from edgelab.transport.host import host_of


def _device_now(t: Transport) -> float:
    return host_of(t).clock()


def measure_offset(t: Transport, rounds: int = 3) -> ClockOffset:
    """Device clock minus lab clock (ClockOffset.correct moves device stamps onto the lab clock)."""
    samples = []
    for _ in range(max(1, rounds)):
        t0 = time.time()
        try:
            td = _device_now(t)
        except (ValueError, TransportError):
            continue
        samples.append((t0, td, time.time()))
    if not samples:
        return ClockOffset(0.0, None)  # unknown: rtt None says so
    return ClockOffset.best_of(samples)
