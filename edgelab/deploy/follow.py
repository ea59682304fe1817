"""Follow a deployment's output into the metrics store: one follower per run, resumable.

A deployed process writes edgelab events as JSON lines to ``stdout.log`` in its run directory on
the device. A follower reads that file from a byte offset through the transport, corrects the
device clock, feeds the metrics Ingestor (raw samples, live summary, log lines) and ends when
the deployment ends, writing the final summary recomputed from the raw samples.

Only one follower ingests a run: it holds a lease in ``run.meta["follower"]`` (owner, its pid,
host and start time, heartbeat, byte offset, clock offset). The offset is written in the same transaction as the samples it
covers, so a follower that dies loses nothing and duplicates nothing: the next one (after the
lease expires, or at once when the dead one is proven gone on this host) replays the log up to the
offset into its live aggregator only, and stores from there on. Any process may start one: the
deploying CLI (detached), ``edgelab watch``, the TUI; ``edgelab.deploy.supervise`` replaces a dead one.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from edgelab.deploy import remote
from edgelab.deploy.clock import measure_offset
from edgelab.deploy.plan import ExecutionPlan
from edgelab.errors import EdgelabError, TransportError
from edgelab.identity import identity
from edgelab.logs import Phases, swallowed
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.runtimes.spec import Adapter
from edgelab.store.db import session_scope
from edgelab.store.deployments import (
    ACTIVE_STATES,
    GONE_PROCESS_STATES,
    DeploymentState,
    get_deployment,
    processes,
)
from edgelab.store.devices import get_device
from edgelab.store.runs import get_run

log = logging.getLogger(__name__)

LEASE_S = 10.0  # a follower silent this long has lost its run to the next one
POLL_S = 0.25
LOSS_S = 10.0  # a device that has not answered the follower this long is marked device-lost
READ_TIMEOUT_S = 3.0  # one read (the heartbeat) waits this long; the last check before LOSS_S fits in it
BACKOFF_MAX_S = 4.0  # retries of a failed read back off up to this
READ_MAX = 4 << 20  # bytes read per poll (a slow reader catches up in steps)
FLUSH_S = 1.0  # a follower that drives llama-server stores the requests' events this often
DRIVE_TIMEOUT_S = 10.0  # one operation of the lab-side requests (forward, procstat); loss is the heartbeat's


def owner_id() -> str:
    """This follower's lease token (``host:pid:nonce``, :func:`edgelab.identity.identity`)."""
    return identity().token()


def lease_of(engine: Engine, run_id: str) -> dict[str, Any]:
    """The run's follower lease as stored (empty when none ever followed it)."""
    with session_scope(engine, write=False) as s:
        return dict(get_run(s, run_id).meta.get("follower") or {})


def follower_alive(engine: Engine, run_id: str, lease_s: float = LEASE_S) -> bool:
    f = lease_of(engine, run_id)
    return bool(f.get("owner")) and not f.get("done") and time.time() - float(f.get("heartbeat", 0)) < lease_s


def _within(timeout: float, fn: Callable[[], Any], late: Callable[[Any], None] | None = None) -> Any:
    """``fn()`` waited for at most ``timeout``: past it the device is silent (TransportError).

    A transport bounds each wait by its timeout, but one call may chain several (a dead pooled
    connection reconnected, the TERM and KILL of a command that started just before the freeze),
    so the heartbeat's budget cannot rest on them. A late result goes to ``late`` (a connection
    opened after the caller gave up is closed there) and is otherwise dropped.
    """
    box: dict[str, Any] = {}
    lock = threading.Lock()

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
            box["error"] = e
        with lock:
            box["done"] = True
            if box.get("gave_up") and "value" in box and late is not None:
                late(box["value"])

    th = threading.Thread(target=call, name="follower-beat", daemon=True)
    th.start()
    th.join(timeout)
    with lock:
        if not box.get("done"):
            box["gave_up"] = True
            raise TransportError(
                f"the device did not answer within {timeout:g} s",
                remedy="check the device (`edgelab device check`)",
            )
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _close(t: Any) -> None:
    with swallowed(log, "closing the device connection"):
        t.close()


def _leased(engine: Engine, run_id: str, lease: dict[str, Any], base_meta: dict[str, Any]) -> Ingestor:
    """An Ingestor whose every flush also writes the lease (heartbeat + byte offset) in the same transaction."""
    return Ingestor(engine, run_id, flush_s=0.2, lease=lease, base_meta=base_meta)


class _Heartbeat:
    """The follower's heartbeat on its device: when the device last answered, and what a silence means.

    Every answer (a read of the log, a ``true``) resets it. A failed one is retried with backoff
    until one more wait and try could not leave time for the check (2 tries) inside ``LOSS_S`` of
    the last answer; then a fresh connection decides: it answers (this connection was bad: ``t``
    becomes the fresh one) or the run is marked device-lost (memory held, processes to stop).
    """

    def __init__(self, follower: Follower, endpoint: Any, t: Any):
        self.follower, self.endpoint, self.t = follower, endpoint, t
        self.last_ok = time.monotonic()
        self.failing_since: float | None = None  # first failed try of the current outage
        self.delay = follower.poll_s
        self.fresh: Any = None  # a connection this heartbeat opened (close() closes it)

    def answered(self) -> None:
        self.last_ok, self.failing_since, self.delay = time.monotonic(), None, self.follower.poll_s

    def failed(self, err: Exception, ing: Ingestor) -> None:
        """A try failed: transient until proven otherwise; the first of an outage is said in the run."""
        if self.failing_since is None:
            self.failing_since = time.monotonic()
            ing.feed(
                ev.ErrorEvent(
                    time.time(),
                    self.follower.run_id,
                    cls="infra",
                    message=f"follower: device did not answer, retrying: {err}"[:500],
                )
            )

    def decide(self, err: Exception) -> str:
        """``retry`` (budget left), ``answered`` (a fresh connection did: ``t`` is it) or ``lost``."""
        if time.monotonic() - self.last_ok + self.delay + 3 * READ_TIMEOUT_S < LOSS_S:
            return "retry"
        f = self.follower
        fresh = f._answers(self.endpoint)
        if fresh is not None:  # the device is there; this follower's connection was not
            with swallowed(log, "closing the device connection"):
                self.t.close()
            self.t = self.fresh = fresh
            self.last_ok, self.failing_since = time.monotonic(), None
            return "answered"
        dep = f._lost(
            f"{f.run_id}: the device stopped answering the follower (no answer within {LOSS_S:g} s): {err}"
        )
        f.error = dep.error if dep.state == DeploymentState.DEVICE_LOST else None
        self.failing_since = None
        return "lost"

    def backoff(self, stop_event: threading.Event) -> bool:
        """Wait before the next try (doubling up to BACKOFF_MAX_S); True when ``stop_event`` was set."""
        if stop_event.wait(self.delay):
            return True
        self.delay = min(self.delay * 2, BACKOFF_MAX_S)
        return False

    def close(self) -> None:
        if self.fresh is not None:
            with swallowed(log, "closing the device connection"):
                self.fresh.close()


class Follower:
    """Follows one run's deployment until it ends (or ``stop_event`` is set); see the module doc."""

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
        self.owner = owner_id()
        self.final: dict[str, Any] | None = None
        self.error: str | None = None

    # --- lease ------------------------------------------------------------------------------
    def acquire(self) -> bool:
        """Take the run's lease unless a live follower holds it (serialised by the write transaction):
        free, expired, or held by a follower proven gone (its pid, host and start time)."""
        from edgelab.deploy import owner

        with session_scope(self.engine) as s:
            run = get_run(s, self.run_id)
            self.run_id = run.id
            f = dict(run.meta.get("follower") or {})
            if f.get("done"):
                return False
            if (
                f.get("owner") not in (None, self.owner)
                and time.time() - float(f.get("heartbeat", 0)) < self.lease_s
                and not owner.gone(f.get("pid"), f.get("host"), f.get("start"))
            ):
                return False
            me = owner.me()
            f.update(
                owner=self.owner,
                heartbeat=time.time(),
                offset=int(f.get("offset", 0)),
                pid=me["owner_pid"],
                host=me["owner_host"],
                start=me["owner_start"],
            )
            f.pop("spawned", None)
            run.meta = {**run.meta, "follower": f}
            s.add(run)
        return True

    def _still_mine(self) -> bool:
        return lease_of(self.engine, self.run_id).get("owner") == self.owner

    # --- following --------------------------------------------------------------------------
    def _target(self) -> tuple[Any, str, int | None, str]:
        with session_scope(self.engine, write=False) as s:
            dep = get_deployment(s, self.run_id)
            rows = processes(s, dep.pk)
            endpoint = get_device(s, dep.device_name).endpoint()
        if not rows:
            raise EdgelabError(f"run {self.run_id} has no process to follow", remedy="deploy it first")
        adapters = {pr.name: pr.adapter for pr in ExecutionPlan.from_dict(dep.plan).processes}
        row = next((r for r in rows if adapters.get(r.name) == Adapter.EDGELAB_EVENTS), None) or next(
            (r for r in rows if "edgelab.reference" in (r.argv or [])), rows[0]
        )
        return endpoint, f"{row.workdir}/stdout.log", row.pid, dep.state

    def _connect(self, endpoint, timeout: float | None = None):
        """The follower's transport: each operation on it waits at most ``timeout`` (the heartbeat's)."""
        from edgelab.transport import open_transport

        return open_transport(endpoint, **{**(self.transport or {}), "timeout": timeout or READ_TIMEOUT_S})

    def _server(self) -> dict[str, Any] | None:
        """The deployment's process measured from the lab side (llama-server), if it has one."""
        with session_scope(self.engine, write=False) as s:
            dep = get_deployment(s, self.run_id)
            rows = {r.name: r for r in processes(s, dep.pk)}
            endpoint = get_device(s, dep.device_name).endpoint()
            plan = ExecutionPlan.from_dict(dep.plan)
        for pr in plan.processes:
            if pr.adapter == Adapter.LLAMA_SERVER and pr.port and pr.name in rows:
                return {
                    "endpoint": endpoint,
                    "port": int(pr.port),
                    "pid": rows[pr.name].pid,
                    "device": plan.device or None,
                }
        return None

    def _meta_and_lease(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The run's meta without the lease, and the lease (what a new follower starts from)."""
        with session_scope(self.engine, write=False) as s:
            run = get_run(s, self.run_id)
            meta = {k: v for k, v in run.meta.items() if k != "follower"}
            return meta, dict(run.meta.get("follower") or {})

    def run(self, stop_event: threading.Event | None = None) -> dict[str, Any] | None:
        """Ingest until the deployment is final; returns its final summary (None when stopped early)."""
        stop_event = stop_event or threading.Event()
        phases = Phases(log, f"follow {self.run_id}")
        server = self._server()
        if server is None:
            endpoint, path, pid, _state = self._target()
        else:
            endpoint, path, pid = server["endpoint"], "", server["pid"]
        meta, lease = self._meta_and_lease()
        t = self._connect_retrying(endpoint, stop_event)
        if t is None:
            phases("stopped before connecting")
            return None
        phases("connected", server=server is not None)
        try:
            if server is not None:
                ing = _leased(self.engine, self.run_id, lease, meta)
                final = self._drive(t, server, ing, stop_event)
                phases("ended", total_s=round(phases.total(), 2))
                return final
            if "clock" not in lease:  # measured once per run, so replayed and new events agree
                c = measure_offset(t)
                lease["clock"] = {"offset_s": c.offset_s, "rtt_s": c.rtt_s}
            clock = ev.ClockOffset(lease["clock"]["offset_s"], lease["clock"]["rtt_s"])
            ing = _leased(self.engine, self.run_id, lease, meta)
            if ing.offset:
                self._replay(t, path, ing, clock)
                phases("replayed", offset=ing.offset)
            sampler = self._telemetry(ing)
            try:
                final = self._loop(t, endpoint, path, pid, ing, clock, stop_event)
                phases("ended", total_s=round(phases.total(), 2))
                return final
            finally:
                if sampler is not None:
                    sampler.stop()
        finally:
            with swallowed(log, "closing the device connection"):
                t.close()

    def _drive(
        self, t, server: dict[str, Any], ing: Ingestor, stop_event: threading.Event
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
                run=self.run_id,
                device=server["device"],
                runtime="llama.cpp",
                strategy="S3",
                meta={"adapter": Adapter.LLAMA_SERVER, "measured_from": "lab"},
            )
        )
        cut = threading.Event()  # the requests stop: the deployment ended, its device is lost, or handed over
        failed: list[Exception] = []
        worker = threading.Thread(
            target=self._requests, args=(server, ing, cut, failed), name=f"drive-{self.run_id}", daemon=True
        )
        sampler = self._telemetry(ing)  # beside the lab-side requests too, like every other deployment
        beat = _Heartbeat(self, server["endpoint"], t)
        worker.start()
        last_lease = last_flush = time.monotonic()
        told = False
        try:
            while True:
                with session_scope(self.engine, write=False) as s:
                    dep = get_deployment(s, self.run_id)
                if dep.state not in ACTIVE_STATES:
                    break
                if stop_event.is_set():
                    cut.set()
                    ing.flush(live=True)  # hand over: the lease expires
                    return None
                if failed and not told:  # the requests ended early: say why, look at the process
                    told, self.error = True, str(failed[0])
                    ing.feed(ev.ErrorEvent(time.time(), self.run_id, cls="infra", message=self.error[:500]))
                    if not isinstance(failed[0], EdgelabError):
                        raise failed[0]
                    control.refresh(self.engine, self.run_id)  # ended on its own: finished or failed
                    continue
                try:
                    _within(READ_TIMEOUT_S, functools.partial(beat.t.run, ["true"], timeout=READ_TIMEOUT_S))
                    beat.answered()
                except TransportError as err:
                    beat.failed(err, ing)
                    if beat.decide(err) == "retry" and beat.backoff(stop_event):
                        continue
                    ing.flush()  # keep the lease while retrying
                    continue
                if time.monotonic() - last_lease >= self.lease_s / 4:
                    if not self._still_mine():
                        self.error = "lease taken over by another follower"
                        cut.set()
                        return None
                    last_lease = time.monotonic()
                if time.monotonic() - last_flush >= FLUSH_S:
                    ing.flush()  # the requests' events, the lease and the live summary
                    last_flush = time.monotonic()
                stop_event.wait(self.poll_s)
            cut.set()
            # a stopped server ends the request in flight at once; a frozen device's never comes back
            worker.join(READ_TIMEOUT_S if dep.state == DeploymentState.DEVICE_LOST else DRIVE_TIMEOUT_S)
        finally:
            cut.set()
            if sampler is not None:
                sampler.stop()
            beat.close()
        ing.lease_done()
        self.final = ing.close(state=dep.state, error=dep.error)
        return self.final

    def _requests(
        self, server: dict[str, Any], ing: Ingestor, cut: threading.Event, failed: list[Exception]
    ) -> None:
        """The drive's worker: requests until ``cut``; an error is left in ``failed`` for the heartbeat."""
        from edgelab.deploy import llama_drive as llama

        try:
            t = self._connect(server["endpoint"], DRIVE_TIMEOUT_S)
            try:
                llama.drive(
                    t,
                    server["port"],
                    server["pid"],
                    run=self.run_id,
                    device=server["device"],
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

    def _connect_retrying(self, endpoint, stop_event: threading.Event):
        """Connect and measure the clock, retrying a transient fault with backoff for ``LOSS_S``;
        then the device is checked once more (an unreachable one marks the run device-lost)."""
        from edgelab.deploy import control

        start, delay = time.monotonic(), self.poll_s
        while True:
            try:
                t = self._connect(endpoint)
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

    def _telemetry(self, ing: Ingestor):
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

    def _read(self, t, path: str, offset: int) -> str:
        return remote.read_from(t, path, offset, READ_MAX, timeout=READ_TIMEOUT_S)

    def _answers(self, endpoint):
        """A fresh connection that runs ``true`` (two tries' time: connect, then run), or None (silent)."""

        def ask():
            fresh = self._connect(endpoint)
            try:
                fresh.run(["true"], timeout=READ_TIMEOUT_S)
            except BaseException:
                _close(fresh)
                raise
            return fresh

        try:
            return _within(2 * READ_TIMEOUT_S, ask, late=_close)
        except TransportError:
            return None

    def _lost(self, why: str):
        """No answer for LOSS_S: the run is device-lost, its memory held and its processes marked to stop."""
        from edgelab.deploy.transition import transition

        with session_scope(self.engine, write=False) as s:
            dep = get_deployment(s, self.run_id)
            unseen = any(r.pid and r.state not in GONE_PROCESS_STATES for r in processes(s, dep.pk))

        def lost(s, d) -> None:
            d.error, d.to_stop = why[:2000], unseen

        return transition(
            self.engine, dep.pk, DeploymentState.DEVICE_LOST, phase="device-lost", edit=lost, by="follower"
        )

    def _replay(self, t, path: str, ing: Ingestor, clock: ev.ClockOffset) -> None:
        """Rebuild the live aggregate from what an earlier follower already stored (bytes < offset)."""
        got, pos = "", 0
        while pos < ing.offset:
            chunk = self._read(t, path, pos)
            if not chunk:
                break
            got += chunk
            pos += len(chunk.encode())
        data = got.encode()[: ing.offset].decode("utf-8", "replace")
        for e in ev.decode_lines(data.splitlines()):
            self._note(e, ing)
            ing.agg.feed(self._fix(e, clock))

    def _fix(self, e: ev.Event, clock: ev.ClockOffset) -> ev.Event:
        return e if isinstance(e, ev.LogLine) else clock.correct(e)

    def _note(self, e: ev.Event, ing: Ingestor) -> None:
        if isinstance(e, ev.RunStart) and e.meta.get("control_period_s") is not None:
            ing.base_meta["control_period_s"] = e.meta["control_period_s"]

    def _loop(
        self,
        t,
        endpoint,
        path: str,
        pid: int | None,
        ing: Ingestor,
        clock: ev.ClockOffset,
        stop_event: threading.Event,
    ) -> dict[str, Any] | None:
        beat = _Heartbeat(self, endpoint, t)
        try:
            return self._follow(beat, path, pid, ing, clock, stop_event)
        finally:
            beat.close()  # run() closes the first connection

    def _follow(
        self,
        beat: _Heartbeat,
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
                text = _within(READ_TIMEOUT_S, functools.partial(self._read, t, path, ing.offset))
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
                if time.monotonic() - last_beat >= self.lease_s / 4:
                    ing.flush()  # keep the lease while retrying
                    last_beat = time.monotonic()
                with session_scope(self.engine, write=False) as s:
                    if get_deployment(s, self.run_id).state not in ACTIVE_STATES:
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
                    elif e.run is not None and e.run != self.run_id:
                        continue
                    self._note(e, ing)
                    ing.feed(self._fix(e, clock))
            if final_pass and (end < 0 or len(text.encode()) < READ_MAX):
                break
            with session_scope(self.engine, write=False) as s:
                dep_state = get_deployment(s, self.run_id).state
            if dep_state not in ACTIVE_STATES:
                final_pass = True  # read what the process wrote before it ended, then close
                continue
            if time.monotonic() - last_beat >= self.lease_s / 4:
                if not self._still_mine():
                    self.error = "lease taken over by another follower"
                    return None
                ing.flush()
                last_beat = time.monotonic()
                if time.monotonic() - last_data > 2.0 and pid and not remote.alive(t, pid):
                    control.refresh(self.engine, self.run_id)  # the process ended on its own
            if stop_event.is_set():
                ing.flush(live=True)  # hand over: offset stored, lease expires
                return None
            time.sleep(self.poll_s)
        with session_scope(self.engine, write=False) as s:
            dep = get_deployment(s, self.run_id)
        ing.lease_done()
        self.final = ing.close(state=dep.state, error=dep.error)
        return self.final


class FollowerThread(threading.Thread):
    """A follower in a daemon thread (the deploying CLI, ``edgelab watch``, the TUI)."""

    def __init__(self, follower: Follower):
        super().__init__(name=f"follow-{follower.run_id}", daemon=True)
        self.follower = follower
        self.stop_event = threading.Event()
        self.exc: BaseException | None = None

    def run(self) -> None:
        try:
            self.follower.run(self.stop_event)
        except BaseException as e:  # noqa: BLE001 - reported to whoever joins
            self.exc = e

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        self.join(timeout)


def ensure_follower(
    engine: Engine, run_id: str, *, transport: dict[str, Any] | None = None, lease_s: float = LEASE_S
) -> FollowerThread | None:
    """Start a follower thread for an active deployment unless a live one holds the run; None otherwise."""
    with session_scope(engine, write=False) as s:
        run = get_run(s, run_id)
        if run.kind != "deploy":
            return None
        try:
            dep = get_deployment(s, run.id)
        except EdgelabError:
            return None
    if dep.state not in ACTIVE_STATES and (run.meta.get("follower") or {}).get("done"):
        return None
    f = Follower(engine, run.id, transport=transport, lease_s=lease_s)
    if not f.acquire():
        return None
    th = FollowerThread(f)
    th.start()
    return th


def spawn_detached(run_id: str, env: dict[str, str] | None = None) -> int:
    """A follower process that outlives the caller (the deploying CLI); returns its pid.

    The database URL travels in the environment (EDGELAB_DB), never on the command line.
    """
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "edgelab.deploy.follow", run_id],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from edgelab import logs
    from edgelab.store.db import get_engine

    ap = argparse.ArgumentParser(
        prog="python -m edgelab.deploy.follow", description="Follow one run's events."
    )
    logs.add_argument(ap)
    ap.add_argument("run")
    ap.add_argument("--lease-s", type=float, default=LEASE_S)
    ap.add_argument("--ssh-config", default=None)
    args = ap.parse_args(argv)
    logs.setup(args.log_level)
    engine = get_engine(os.environ.get("EDGELAB_DB"))
    f = Follower(
        engine,
        args.run,
        lease_s=args.lease_s,
        transport={"ssh_config": args.ssh_config} if args.ssh_config else None,
    )
    if not f.acquire():
        print(f"run {args.run}: another follower holds it", file=sys.stderr)
        return 0
    try:
        f.run()
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - a detached follower must leave its reason in the run
        why = str(err) if isinstance(err, EdgelabError) else f"{type(err).__name__}: {err}"
        record_failure(engine, f.run_id, why)
        print(f"error: {why}", file=sys.stderr)
        return 1
    return 0


def record_failure(engine: Engine, run_id: str, why: str) -> None:
    """A follower that gives up says why in the run: an infra error line and ``meta.follower.error``.

    Its stdout goes nowhere (it is detached), so this is the only place its end is visible; the
    lease then expires and the next ``watch`` (or the TUI) takes the run over.
    """
    from edgelab.store.runs import RunLog

    try:
        with session_scope(engine) as s:
            run = get_run(s, run_id)
            f = dict(run.meta.get("follower") or {})
            f.update(error=why[:500], failed_at=time.time())
            run.meta = {**run.meta, "follower": f}
            s.add(run)
            s.add(
                RunLog(
                    run_id=run.id,
                    t=time.time(),
                    kind="error",
                    level="infra",
                    message=f"follower stopped: {why}"[:2000],
                )
            )
    except Exception:  # noqa: BLE001 - the database itself may be what failed
        log.debug("run %s: could not record the follower's failure (%s)", run_id, why, exc_info=True)


if __name__ == "__main__":
    raise SystemExit(main())
