"""One follower: takes a run's lease, connects to its device and ingests until the deployment ends.

What it follows (:mod:`.target`) decides how: a log of edgelab events is read (:mod:`.reader`), a
llama-server is driven from the lab (:mod:`.drivers`); both beat on the device (:mod:`.heartbeat`)
and store through an Ingestor that writes the lease (:mod:`.lease`) with every flush.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy.clock import measure_offset
from edgelab.deploy.follow import lease
from edgelab.deploy.follow.drivers import drive
from edgelab.deploy.follow.heartbeat import BACKOFF_MAX_S, LOSS_S, close
from edgelab.deploy.follow.lease import LEASE_S
from edgelab.deploy.follow.reader import follow_log, replay
from edgelab.deploy.follow.target import ServerTarget, connect, target
from edgelab.errors import EdgelabError, TransportError
from edgelab.logs import Phases
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.store.db import session_scope
from edgelab.store.deployments import DeploymentState, get_deployment
from edgelab.store.runs import get_run

log = logging.getLogger(__name__)

POLL_S = 0.25


class Follower:
    """Follows one run's deployment until it ends (or ``stop_event`` is set); see the package doc."""

    def __init__(
        self,
        engine: Engine,
        run_id: str,
        *,
        transport: dict[str, Any] | None = None,
        lease_s: float = LEASE_S,
        poll_s: float = POLL_S,
        telemetry: bool = True,
    ):
        self.engine = engine
        self.telemetry = telemetry  # False: a drain after the run ended samples nothing
        self.run_id = run_id
        self.transport = dict(transport or {})
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.owner = lease.owner_id()
        self.final: dict[str, Any] | None = None
        self.error: str | None = None

    def acquire(self) -> bool:
        """Take the run's lease unless a live follower holds it (see :func:`.lease.acquire`)."""
        rid = lease.acquire(self.engine, self.run_id, self.owner, self.lease_s)
        if rid is not None:
            self.run_id = rid
        return rid is not None

    def still_mine(self) -> bool:
        return lease.held_by(self.engine, self.run_id, self.owner)

    def run(self, stop_event: threading.Event | None = None) -> dict[str, Any] | None:
        """Ingest until the deployment is final; returns its final summary (None when stopped early)."""
        stop_event = stop_event or threading.Event()
        phases = Phases(log, f"follow {self.run_id}")
        what = target(self.engine, self.run_id)
        server = isinstance(what, ServerTarget)
        meta, held = lease.meta_and_lease(self.engine, self.run_id)
        t = self._connect_retrying(what.endpoint, stop_event)
        if t is None:
            phases("stopped before connecting")
            return None
        phases("connected", server=server)
        try:
            if isinstance(what, ServerTarget):
                ing = lease.leased(self.engine, self.run_id, held, meta)
                final = drive(self, t, what, ing, stop_event)
                phases("ended", total_s=round(phases.total(), 2))
                return final
            if "clock" not in held:  # measured once per run, so replayed and new events agree
                c = measure_offset(t)
                held["clock"] = {"offset_s": c.offset_s, "rtt_s": c.rtt_s}
            clock = ev.ClockOffset(held["clock"]["offset_s"], held["clock"]["rtt_s"])
            ing = lease.leased(self.engine, self.run_id, held, meta)
            if ing.offset:
                replay(t, what.path, ing, clock)
                phases("replayed", offset=ing.offset)
            sampler = self.start_sampler(ing)
            try:
                final = follow_log(self, t, what, ing, clock, stop_event)
                phases("ended", total_s=round(phases.total(), 2))
                return final
            finally:
                if sampler is not None:
                    sampler.stop()
        finally:
            close(t)

    def _connect_retrying(self, endpoint, stop_event: threading.Event):
        """Connect and measure the clock, retrying a transient fault with backoff for ``LOSS_S``;
        then the device is checked once more (an unreachable one marks the run device-lost)."""
        from edgelab.deploy import control

        start, delay = time.monotonic(), self.poll_s
        while True:
            try:
                t = connect(endpoint, self.transport)
                t.run(["true"], timeout=LOSS_S)  # a listed-but-frozen device fails here, not later
                return t
            except TransportError as err:
                self.error = str(err)
                if time.monotonic() - start >= LOSS_S:
                    dep = control.refresh(self.engine, self.run_id)
                    if dep.state != DeploymentState.RUNNING:
                        raise TransportError(
                            f"run {self.run_id}: {err}", remedy=getattr(err, "remedy", None)
                        ) from None
                    start = time.monotonic()
            if stop_event.wait(delay):
                return None
            delay = min(delay * 2, BACKOFF_MAX_S)

    def start_sampler(self, ing: Ingestor):
        """The device's telemetry sampler beside this follower (telemetry never stops a follower)."""
        from edgelab.metrics.sampler import start_beside

        if not self.telemetry:
            return None
        with session_scope(self.engine, write=False) as s:
            device = get_deployment(s, self.run_id).device_name
        try:
            sampler = start_beside(self.engine, self.run_id, device, ing, transport=self.transport)
        except EdgelabError:
            return None
        with session_scope(self.engine, write=False) as s:  # the lease's meta writes must keep it
            ing.base_meta["telemetry"] = get_run(s, self.run_id).meta.get("telemetry")
        return sampler
