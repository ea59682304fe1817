"""The launch pipeline: deploy and bench as two compositions of the same steps over one context.

In the spirit of LAVA's dispatcher actions: a step (Record, Admit, Connect, Push, Start, Ready,
Measure) has ``run``, which may yield :class:`PhaseEvent` s as it goes, ``undo``, which takes back
what it did when anything after it (or in it) failed, and ``close``, which lets go of what it
holds whatever happened (a connection, a reservation). :func:`run_steps` runs them in order over
one :class:`LaunchContext` (the run id, the plan, the device, the transport, the workdirs and
pids: every value a later step needs is carried there, never read back from the database), logs
one line per phase with its duration (``edgelab.logs.Phases``) and, on any ``BaseException``
(Ctrl-C, a generator closed by its consumer), undoes every step it entered, in reverse and with
SIGINT ignored, before the exception goes on.

The events are yielded, not called back: a UI iterates a :class:`Launch` (``with launch: for
event in launch: ...``), so no domain code calls into UI code; leaving the ``with`` on an
exception (a Ctrl-C while the UI draws an event) throws it into the pipeline, which undoes as if
it had been raised there.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, TypeVar

from sqlalchemy import Engine

from edgelab.deploy.options import Options, connect_device
from edgelab.errors import Interrupted
from edgelab.logs import Phases
from edgelab.store.runs import new_run_id
from edgelab.transport import Transport
from edgelab.transport.base import Endpoint

log = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C", bound="LaunchContext")


@dataclass(frozen=True)
class PhaseEvent:
    """One phase of a launch as it happens (``connected``, ``pushed``, ``spawned``, ``ready``...):
    what a UI shows a line for; ``info`` its fields (``placement``: the table shown at the end)."""

    name: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class LaunchContext:
    """Everything a launch knows, carried from step to step (not re-read from the database)."""

    engine: Engine
    opts: Options
    run_id: str
    phases: Phases
    lease_id: str | None = None
    planned: Any = None  # edgelab.deploy.planning.Planned, once planned
    plan_dict: dict[str, Any] | None = None  # the plan serialised once: provenance, run and rows
    device_id: int | None = None
    device_name: str | None = None
    endpoint: Endpoint | None = None
    shell: Any = None  # edgelab.transport.quoting.Shell of the device, as registered
    transport: Transport | None = None
    run_dir: str | None = None
    workdirs: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    blob_paths: dict[str, str] = field(default_factory=dict)
    pushed: dict[str, int] = field(default_factory=dict)  # the push's counts per status
    result: Any = None  # what the composition returns (the deployment, the bench's summary)

    @property
    def plan(self) -> Any:  # edgelab.deploy.plan.ExecutionPlan
        return self.planned.plan

    def connect(self) -> Transport:
        """The device's transport, opened once (``device_unreachable`` with the transport's remedy)."""
        assert self.endpoint is not None and self.device_name is not None
        self.transport = connect_device(self.endpoint, self.opts, self.device_name)
        return self.transport


class Step:
    """One step of a launch. ``run`` may yield events; ``undo`` runs (in reverse) for every step
    entered when the launch fails, the failing one included, so it must cope with a half-done run;
    ``close`` runs for every step entered, failed or not, after the undos."""

    def run(self, ctx: Any) -> Iterator[PhaseEvent]:
        return iter(())

    def undo(self, ctx: Any, exc: BaseException) -> None:
        pass

    def close(self, ctx: Any) -> None:
        pass


def check_cancel(opts: Options) -> None:
    """A caller's stop (a playbook's Ctrl-C) ends the deploy between two steps, like a SIGINT."""
    if opts.cancel is not None and opts.cancel.is_set():
        raise Interrupted("deploy stopped by its caller", remedy="deploy again when wanted")


@contextmanager
def no_sigint() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C waits until the group is gone and the pool released."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def logged(phases: Phases, event: PhaseEvent) -> PhaseEvent:
    """The phase's one log line with its duration (the placement table is left to the UI)."""
    phases(event.name, **{k: v for k, v in event.info.items() if k != "placement"})
    return event


def run_steps(steps: Sequence[Step], ctx: LaunchContext) -> Generator[PhaseEvent, None, Any]:
    """Run ``steps`` in order, yielding their events; returns ``ctx.result``.

    Any exception (a GeneratorExit too: the consumer stopped iterating) undoes the entered steps
    in reverse with SIGINT ignored, then goes on; every entered step is closed in reverse."""
    entered: list[Step] = []
    try:
        for step in steps:
            entered.append(step)
            for event in step.run(ctx):
                yield logged(ctx.phases, event)
        return ctx.result
    except BaseException as exc:
        with no_sigint():
            for step in reversed(entered):
                step.undo(ctx, exc)
        raise
    finally:
        for step in reversed(entered):
            step.close(ctx)


def under_lease(
    engine: Engine,
    steps: Sequence[Step],
    make: Callable[..., C],
    *,
    device: str,
    what: str,
    log: logging.Logger,
    opts: Options | None,
    lease_id: str | None,
    on_lost: Callable[[str], None] | None = None,
) -> Generator[PhaseEvent, None, C]:
    """What every launch does around its steps: what a dead command left on the device is
    reaped first, then the device's lease is held (``what``: ``deploy PIPELINE``) while the steps
    run over a new context (``make``: its class, given the run id, the options, the phase log and
    the lease); returns the context.

    The lease is the caller's ``lease_id`` / ``EDGELAB_LEASE``, the holder's own, or one of its
    own, renewed while the steps run; ``on_lost``: told when it is lost meanwhile (kicked)."""
    from edgelab.deploy.reap import reap
    from edgelab.lease import held

    reap(engine, device, opts=opts)
    with held(engine, [device], what, lease_id=lease_id, on_lost=on_lost) as use:
        run_id = new_run_id()
        ctx = make(
            engine=engine,
            opts=opts or Options(),
            run_id=run_id,
            phases=Phases(log, f"{what} on {device} {run_id}"),
            lease_id=use.lease_for(device),
        )
        yield from run_steps(steps, ctx)
        return ctx


class Launch(Generic[T]):
    """A launch under way: iterate it for its :class:`PhaseEvent` s; ``result`` once it is done.

    Use it as a context manager: an exception that leaves the ``with`` while the launch is not
    done (a Ctrl-C in the code that shows an event) is thrown into the pipeline, which undoes what
    it started and lets it go on; leaving early without one closes it (undone as stopped)."""

    def __init__(self, steps: Generator[PhaseEvent, None, T]):
        self._steps = steps
        self.done = False
        self.result: T | None = None

    def __iter__(self) -> Launch[T]:
        return self

    def __next__(self) -> PhaseEvent:
        if self.done:
            raise StopIteration
        try:
            return next(self._steps)
        except StopIteration as stop:
            self.done, self.result = True, stop.value
            raise StopIteration from None
        except BaseException:
            self.done = True
            raise

    def run(self) -> T:
        """To the end, without watching: the result."""
        for _event in self:
            pass
        assert self.result is not None
        return self.result

    def __enter__(self) -> Launch[T]:
        return self

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.done:
            return
        self.done = True
        if exc is None:
            self._steps.close()
            return
        try:
            self._steps.throw(exc)
        except BaseException as raised:
            if raised is exc:
                return  # undone; the exception goes on from the with
            raise
        self._steps.close()  # it yielded again: it did not take the exception; stop it
