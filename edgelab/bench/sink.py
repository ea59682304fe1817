"""Where a bench run's events go, how it starts and how it ends: one home for all three.

Every bench adapter (llama-server driven from the lab, llama-tts one process per request,
llama-bench, a streamed workload, an external endpoint) feeds its events to the run's
:class:`~edgelab.metrics.ingest.Ingestor` and to the caller's ``on_event``, then ends the run
the same way: its ``run.start`` event first, then its ``run.end`` event (unless the workload sent its own), the ingestor closed
with the final state, and a failed run raised as ``BenchFailed`` with its remedy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine

from edgelab.errors import BenchFailed, EdgelabError
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.states import RunState


class RunSink:
    """A bench run's events into its ingestor, then to the caller (``on_event``); ``stamp``:
    events are given the run's id on the way (their source does not know it)."""

    def __init__(
        self,
        engine: Engine,
        run_id: str,
        on_event: Callable[[ev.Event], None] | None = None,
        *,
        stamp: bool = False,
    ):
        self.run_id, self.on_event, self.stamp = run_id, on_event, stamp
        self.ing = Ingestor(engine, run_id)
        self.state: str | None = None  # how the measuring ended, once it is known (None: as its events say)
        self.error: str | None = None

    @contextmanager
    def measuring(self, sampler: Any = None) -> Iterator[None]:
        """Around an adapter's measuring: a Ctrl-C makes the run ``stopped`` and goes on, an edgelab
        error makes it ``failed`` with its text (raised by :meth:`end`, with the remedy, once the
        run is stored); the telemetry sampler beside it is stopped either way (its queued samples
        are fed at the ingestor's next flush)."""
        try:
            yield
        except KeyboardInterrupt:
            self.state, self.error = RunState.STOPPED, "interrupted (SIGINT) during bench"
            raise
        except EdgelabError as exc:
            self.state, self.error = RunState.FAILED, str(exc)[:2000]
        finally:
            if sampler is not None:
                sampler.stop()

    def stopped(self, why: str = "cancelled by the caller (timeout or stop)") -> None:
        """The caller stopped the measuring (its cancel was set): the run ends ``stopped``."""
        self.state, self.error = RunState.STOPPED, why

    def __call__(self, e: ev.Event) -> None:
        if self.stamp:
            e.run = self.run_id
        self.ing.feed(e)
        if self.on_event:
            self.on_event(e)

    def start(
        self,
        pipeline: str | None,
        device: str | None,
        runtime: str | None,
        meta: dict[str, Any],
        *,
        virtual: bool,
        strategy: str | None = None,
    ) -> None:
        """The run's ``run.start`` (now, lab clock): what runs where, as its adapter knows it."""
        self(
            ev.RunStart(
                t=time.time(),
                run=self.run_id,
                pipeline=pipeline,
                device=device,
                runtime=runtime,
                strategy=strategy,
                virtual=virtual,
                meta=meta,
            )
        )

    def end(
        self,
        state: str | None,
        error: str | None,
        *,
        remedy: str,
        run_end: bool = True,
        **failed: Any,
    ) -> tuple[dict[str, Any], str]:
        """The run ended (``state`` None: as its events say, else finished): its ``run.end`` fed
        (``run_end``), the ingestor closed; (final summary, state). A failed run raises
        ``BenchFailed`` with ``remedy`` (and ``failed``: the workload's exit code, its stderr)."""
        if run_end:
            self(ev.RunEnd(t=time.time(), run=self.run_id, state=state or RunState.FINISHED, error=error))
        final = self.ing.close(state=state, error=error)
        if state == RunState.FAILED:
            raise BenchFailed(
                f"bench run {self.run_id} failed: {error}", run_id=self.run_id, remedy=remedy, **failed
            )
        return final, state or RunState.FINISHED
