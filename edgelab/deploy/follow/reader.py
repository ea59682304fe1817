"""Reading a deployment's event log on the device: from the stored offset to the run's end.

The reader's reads are the heartbeat's beats; each line's bytes are counted into the Ingestor's
offset before it is fed, so a flush (which stores the offset with the samples) covers exactly what
it wrote. A new follower first replays the bytes before the offset into its live aggregate only.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from edgelab.deploy import remote
from edgelab.deploy.follow.heartbeat import LOSS_S, Following, Heartbeat, within
from edgelab.deploy.follow.target import READ_TIMEOUT_S, LogTarget
from edgelab.errors import TransportError
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.store.db import session_scope
from edgelab.store.deployments import ACTIVE_STATES, get_deployment

READ_MAX = 4 << 20  # bytes read per poll (a slow reader catches up in steps)


def read(t: Any, path: str, offset: int) -> str:
    return remote.read_from(t, path, offset, READ_MAX, timeout=READ_TIMEOUT_S)


def replay(t: Any, path: str, ing: Ingestor, clock: ev.ClockOffset) -> None:
    """Rebuild the live aggregate from what an earlier follower already stored (bytes < offset)."""
    got, pos = "", 0
    while pos < ing.offset:
        chunk = read(t, path, pos)
        if not chunk:
            break
        got += chunk
        pos += len(chunk.encode())
    data = got.encode()[: ing.offset].decode("utf-8", "replace")
    for e in ev.decode_lines(data.splitlines()):
        _note(e, ing)
        ing.agg.feed(_fix(e, clock))


def _fix(e: ev.Event, clock: ev.ClockOffset) -> ev.Event:
    return e if isinstance(e, ev.LogLine) else clock.correct(e)


def _note(e: ev.Event, ing: Ingestor) -> None:
    if isinstance(e, ev.RunStart) and e.meta.get("control_period_s") is not None:
        ing.base_meta["control_period_s"] = e.meta["control_period_s"]


def follow_log(
    f: Following,
    t: Any,
    target: LogTarget,
    ing: Ingestor,
    clock: ev.ClockOffset,
    stop_event: threading.Event,
) -> dict[str, Any] | None:
    """Ingest the log until the deployment is final (its summary) or ``stop_event`` (None)."""
    beat = Heartbeat(f, target.endpoint, t)
    try:
        return _follow(f, beat, target.path, target.pid, ing, clock, stop_event)
    finally:
        beat.close()  # the caller closes the first connection


def _follow(
    f: Following,
    beat: Heartbeat,
    path: str,
    pid: int | None,
    ing: Ingestor,
    clock: ev.ClockOffset,
    stop_event: threading.Event,
) -> dict[str, Any] | None:
    from edgelab.deploy import control

    last_beat = last_data = time.monotonic()
    final_pass = False
    while True:
        t = beat.t
        try:
            text = within(READ_TIMEOUT_S, functools.partial(read, t, path, ing.offset))
            beat.answered()  # the heartbeat: the device answered
        except TransportError as err:
            # transient until proven otherwise: retry with backoff, then let the device decide
            text = ""
            beat.failed(err, ing)
            if final_pass:
                # the run ended: its log is still there to read to the end; a slow answer is
                # tried again until the device has been silent for LOSS_S, then given up
                if time.monotonic() - beat.last_ok >= LOSS_S or beat.backoff(stop_event):
                    break
                continue
            if beat.decide(err) == "answered":
                continue
            if beat.backoff(stop_event):
                ing.flush(live=True)
                return None
            if time.monotonic() - last_beat >= f.lease_s / 4:
                ing.flush()  # keep the lease while retrying
                last_beat = time.monotonic()
            with session_scope(f.engine, write=False) as s:
                if get_deployment(s, f.run_id).state not in ACTIVE_STATES:
                    final_pass = True
            continue
        end = text.rfind("\n")
        if end >= 0:
            last_data = time.monotonic()
            for line in text[:end].split("\n"):
                ing.offset += len(line.encode()) + 1  # counted before feed: a flush inside covers it
                if not line.strip():
                    continue
                e = next(ev.decode_lines([line]))
                if isinstance(e, ev.LogLine):
                    e.stream = "stdout"
                elif e.run is not None and e.run != f.run_id:
                    continue
                _note(e, ing)
                ing.feed(_fix(e, clock))
        if final_pass and (end < 0 or len(text.encode()) < READ_MAX):
            break
        with session_scope(f.engine, write=False) as s:
            dep_state = get_deployment(s, f.run_id).state
        if dep_state not in ACTIVE_STATES:
            final_pass = True  # read what the process wrote before it ended, then close
            continue
        if time.monotonic() - last_beat >= f.lease_s / 4:
            if not f.still_mine():
                f.error = "lease taken over by another follower"
                return None
            ing.flush()
            last_beat = time.monotonic()
            if time.monotonic() - last_data > 2.0 and pid and not remote.alive(t, pid):
                control.refresh(f.engine, f.run_id)  # the process ended on its own
        if stop_event.is_set():
            ing.flush(live=True)  # hand over: offset stored, lease expires
            return None
        time.sleep(f.poll_s)
    with session_scope(f.engine, write=False) as s:
        dep = get_deployment(s, f.run_id)
    ing.lease_done()
    f.final = ing.close(state=dep.state, error=dep.error)
    return f.final
