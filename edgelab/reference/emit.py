"""Events as JSON lines on a stream, flushed per line, each tagged with its runtime (default: reference).

A process launched on a device talks to the lab only through its stdout; flushing per line
keeps arrival times honest (a buffered line would arrive late and skew TTFA).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import TextIO

from edgelab.metrics.events import Event, to_dict
from edgelab.reference import PROVENANCE


class Emitter:
    """Writes events for one run; thread-safe so a stage thread may emit too."""

    def __init__(
        self, stream: TextIO | None = None, run: str | None = None, stamp: dict[str, str] | None = None
    ):
        self._stream = stream if stream is not None else sys.stdout
        self.run = run
        self.stamp = dict(PROVENANCE if stamp is None else stamp)  # runtime + weights on every line
        self._lock = threading.Lock()
        self.events: list[Event] = []  # kept for in-process callers (tests, servers)

    def emit(self, ev: Event) -> Event:
        if ev.run is None:
            ev.run = self.run
        d = to_dict(ev)
        d.update(self.stamp)
        line = json.dumps(d, separators=(",", ":"))
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
            self.events.append(ev)
        return ev


class NullEmitter(Emitter):
    """Keeps events in memory only (for servers that compute and let clients measure)."""

    def __init__(self, run: str | None = None):
        import io

        super().__init__(io.StringIO(), run)

    def emit(self, ev: Event) -> Event:
        if ev.run is None:
            ev.run = self.run
        with self._lock:
            self.events.append(ev)
        return ev
