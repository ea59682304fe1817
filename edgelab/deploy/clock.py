"""Device clock offset, measured over the transport, so device timestamps land on the lab clock.

Events a device process emits carry its own clock; a phone's clock can be seconds off. Three
round trips of ``date`` (the one with the smallest RTT wins, NTP's rule) bound the offset by
half a round trip; a device whose ``date`` has no sub-second field is trusted to the second.
"""

from __future__ import annotations

import time

from edgelab.errors import TransportError
from edgelab.metrics.events import ClockOffset
from edgelab.transport import winscripts
from edgelab.transport.base import Transport
from edgelab.transport.quoting import Shell


def _device_now(t: Transport) -> float:
    if t.shell is Shell.POWERSHELL:
        out = t.run_ps(winscripts.clock_ms(), timeout=20).stdout
        return int(out.strip()) / 1000.0
    out = t.run(["date", "+%s.%N"], timeout=20).stdout.strip()
    try:
        return float(out)
    except ValueError:  # no %N on this date(1): whole seconds
        return float(t.run(["date", "+%s"], timeout=20).stdout.strip())


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
