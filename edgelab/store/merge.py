"""Moving one run's evidence into another: how the blocks of an interleaved A/B or sweep become one
stored run per configuration.

Every row a block recorded (requests, raw samples, telemetry, log/error/stage lines) is re-pointed
at the configuration's run in one transaction, its request ids prefixed with the block's label so
they stay unique; the emptied block run (its row and summaries) is then deleted. A crash between
two blocks leaves the blocks moved so far inside the configuration's run and the rest as ordinary
runs: nothing measured is lost.
"""

from __future__ import annotations

from sqlalchemy import CursorResult, String, literal, update
from sqlmodel import Session, col

from edgelab.store.purge import delete_runs
from edgelab.store.runs import RunLog, RunRequest, RunSample, TelemetrySample


def move_run_rows(session: Session, src: str, dst: str, prefix: str) -> int:
    """Re-point ``src``'s rows at ``dst`` (request ids prefixed), delete ``src``; returns requests moved."""

    def renamed(column):
        return literal(prefix, String) + column

    moved: CursorResult = session.execute(  # type: ignore[assignment]  # an UPDATE's result has rowcount
        update(RunRequest)
        .where(col(RunRequest.run_id) == src)
        .values(run_id=dst, request=renamed(RunRequest.request))
    )
    session.execute(
        update(RunSample)
        .where(col(RunSample.run_id) == src)
        .values(run_id=dst, request=renamed(RunSample.request))
    )
    session.execute(
        update(RunLog).where(col(RunLog.run_id) == src).values(run_id=dst, request=renamed(RunLog.request))
    )
    session.execute(update(TelemetrySample).where(col(TelemetrySample.run_id) == src).values(run_id=dst))
    session.flush()
    delete_runs(session, [src])  # the emptied run, with whatever else refers to it (its reservation)
    return int(moved.rowcount or 0)
