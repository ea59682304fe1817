"""Driving requests at a deployment's server (llama-server) from the lab: live TTFT and tokens/s.

A server writes no edgelab events, so its follower measures it: requests paced one a second in a
worker thread, their events offered to the Ingestor; the follower's own thread is the heartbeat.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, cast

from edgelab.deploy.follow.heartbeat import Following, Heartbeat, within
from edgelab.deploy.follow.target import READ_TIMEOUT_S, ServerTarget, connect
from edgelab.errors import EdgelabError, TransportError
from edgelab.logs import swallowed
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.runtimes.spec import Adapter
from edgelab.store.db import session_scope
from edgelab.store.deployments import ACTIVE_STATES, DeploymentState, get_deployment

log = logging.getLogger(__name__)

FLUSH_S = 1.0  # a follower that drives llama-server stores the requests' events this often
DRIVE_TIMEOUT_S = 10.0  # one operation of the lab-side requests (forward, procstat); loss is the heartbeat's


def drive(
    f: Following, t: Any, server: ServerTarget, ing: Ingestor, stop_event: threading.Event
) -> dict[str, Any] | None:
    """Requests paced one a second until the deployment ends: live TTFT and tokens/s in the store.

    The requests run in a worker thread (their events offered to the ingestor); this thread is
    the heartbeat, as a reader's reads are: a ``true`` on the device every poll, so a device
    that freezes mid-request is device-lost within LOSS_S whatever the request waits for.
    """
    from edgelab.deploy import control

    ing.feed(
        ev.RunStart(
            t=time.time(),
            run=f.run_id,
            device=server.device,
            runtime="llama.cpp",
            strategy="S3",
            meta={"adapter": Adapter.LLAMA_SERVER, "measured_from": "lab"},
        )
    )
    cut = threading.Event()  # the requests stop: the deployment ended, its device is lost, or handed over
    failed: list[Exception] = []
    worker = threading.Thread(
        target=_requests, args=(f, server, ing, cut, failed), name=f"drive-{f.run_id}", daemon=True
    )
    sampler = f.start_sampler(ing)  # beside the lab-side requests too, like every other deployment
    beat = Heartbeat(f, server.endpoint, t)
    worker.start()
    last_lease = last_flush = time.monotonic()
    told = False
    try:
        while True:
            with session_scope(f.engine, write=False) as s:
                dep = get_deployment(s, f.run_id)
            if dep.state not in ACTIVE_STATES:
                break
            if stop_event.is_set():
                cut.set()
                ing.flush(live=True)  # hand over: the lease expires
                return None
            if failed and not told:  # the requests ended early: say why, look at the process
                told, f.error = True, str(failed[0])
                ing.feed(ev.ErrorEvent(time.time(), f.run_id, cls="infra", message=f.error[:500]))
                if not isinstance(failed[0], EdgelabError):
                    raise failed[0]
                control.refresh(f.engine, f.run_id)  # ended on its own: finished or failed
                continue
            try:
                within(READ_TIMEOUT_S, functools.partial(beat.t.run, ["true"], timeout=READ_TIMEOUT_S))
                beat.answered()
            except TransportError as err:
                beat.failed(err, ing)
                if beat.decide(err) == "retry" and beat.backoff(stop_event):
                    continue
                ing.flush()  # keep the lease while retrying
                continue
            if time.monotonic() - last_lease >= f.lease_s / 4:
                if not f.still_mine():
                    f.error = "lease taken over by another follower"
                    cut.set()
                    return None
                last_lease = time.monotonic()
            if time.monotonic() - last_flush >= FLUSH_S:
                ing.flush()  # the requests' events, the lease and the live summary
                last_flush = time.monotonic()
            stop_event.wait(f.poll_s)
        cut.set()
        # a stopped server ends the request in flight at once; a frozen device's never comes back
        worker.join(READ_TIMEOUT_S if dep.state == DeploymentState.DEVICE_LOST else DRIVE_TIMEOUT_S)
    finally:
        cut.set()
        if sampler is not None:
            sampler.stop()
        beat.close()
    ing.lease_done()
    f.final = ing.close(state=dep.state, error=dep.error)
    return f.final


def _requests(
    f: Following, server: ServerTarget, ing: Ingestor, cut: threading.Event, failed: list[Exception]
) -> None:
    """The drive's worker: requests until ``cut``; an error is left in ``failed`` for the heartbeat."""
    from edgelab.deploy import llama_drive as llama

    try:
        t = connect(server.endpoint, f.transport, DRIVE_TIMEOUT_S)
        try:
            llama.drive(
                t,
                server.port,
                cast(int, server.pid),  # as stored: a started server's row has its pid
                run=f.run_id,
                device=cast(str, server.device),  # None where the plan names no device, as before
                feed=ing.offer,  # one thread writes: the heartbeat's flushes store them
                warmup=1,
                requests=None,
                pause_s=1.0,
                cancel=cut,
            )
        finally:
            with swallowed(log, "closing the device connection"):
                t.close()
    except Exception as e:  # noqa: BLE001 - reported by the heartbeat thread
        if not cut.is_set():
            failed.append(e)
