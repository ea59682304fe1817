"""Events from a process's output through a Transport, on the lab clock.

A runtime adapter prints edgelab event JSON lines (or its native output, which an adapter
function turns into events); times it stamps are on the *device* clock, so the device's
offset is measured first by round trips and every event is shifted onto the lab clock.
Lines that are not events are kept as log lines of the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from edgelab.errors import TransportError
from edgelab.metrics import events as ev
from edgelab.transport.base import RemoteProcess, Transport

DATE_ARGV = ["date", "+%s.%N"]

Adapter = Callable[[str, float], Sequence[ev.Event]]
"""A runtime's native line + its lab arrival time -> events (empty when the line says nothing)."""


def measure_clock_offset(transport: Transport, *, rounds: int = 5, argv: Sequence[str] = DATE_ARGV,
                         clock: Callable[[], float] = time.time) -> ev.ClockOffset:
    """Device clock minus lab clock, from the round trip with the smallest RTT."""
    samples = []
    for _ in range(rounds):
        t0 = clock()
        res = transport.run(list(argv), timeout=30)
        t1 = clock()
        if not res.ok:
            raise TransportError(f"cannot read the device clock: {' '.join(argv)} exited {res.exit_code}",
                                 remedy="the device needs `date +%s.%N` (coreutils, toybox) or pass another argv")
        try:
            device_t = float(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise TransportError(f"device clock reading is not a number: {res.stdout.strip()[:40]!r}",
                                 remedy="pass an argv that prints Unix seconds") from None
        samples.append((t0, device_t, t1))
    return ev.ClockOffset.best_of(samples)


def json_adapter(line: str, arrival: float) -> Sequence[ev.Event]:
    """Edgelab event JSON lines as they are; any other line becomes a log line stamped at arrival."""
    s = line.strip()
    if not s:
        return ()
    if s.startswith("{"):
        try:
            return (ev.decode(s),)
        except ev.EventError:
            pass
    return (ev.LogLine(t=arrival, line=line),)


def events_from_process(proc: RemoteProcess, *, offset: ev.ClockOffset | None = None, run: str | None = None,
                        adapter: Adapter = json_adapter,
                        clock: Callable[[], float] = time.time) -> Iterator[ev.Event]:
    """Events from a running process's stdout, device times corrected onto the lab clock.

    Log lines made here are stamped on the lab clock already and are not shifted."""
    for line in proc.lines():
        arrival = clock()
        for e in adapter(line, arrival):
            if offset is not None and not (type(e) is ev.LogLine and e.t == arrival):
                offset.correct(e)
            if run is not None and e.run is None:
                e.run = run
            yield e
