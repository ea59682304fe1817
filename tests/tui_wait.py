"""Waiting in TUI tests with Textual's own waits, not sleep-and-check loops.

``settle`` returns when the app has nothing left to do: the messages in flight (``pilot.pause()``),
the workers they started (``app.workers``), the messages those workers posted, and scheduled
animations. A screen that loads its data in a worker is then loaded, or it never will be: the test
asserts right after. Only what arrives from outside the app on a timer (another process writing a
run the run screen polls) waits by polls, each one settled the same way.
"""

from __future__ import annotations

from textual.worker import WorkerCancelled, WorkerState

ACTIVE = (WorkerState.PENDING, WorkerState.RUNNING)


async def settle(app, pilot, rounds: int = 50) -> None:
    """Let ``app`` finish what it started (a handler may start a worker whose message starts another)."""
    for _ in range(rounds):
        await pilot.pause()
        busy = [w for w in app.workers if w.state in ACTIVE]
        if not busy:
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            return
        for worker in busy:
            try:
                await worker.wait()
            except WorkerCancelled:
                pass  # an exclusive worker replaced by a newer one of its group
    raise AssertionError(f"the app never settled: workers still busy after {rounds} rounds")


async def until_polled(app, pilot, cond, polls: int = 16) -> None:
    """For what comes from outside on the app's poll timer: settle, check, wait one poll interval,
    again, at most ``polls`` times (16 x the run screen's 0.5 s: the 8 s the tests always allowed)."""
    for _ in range(polls):
        await settle(app, pilot)
        if cond():
            return
        await pilot.pause(app.run_poll_s)
    await settle(app, pilot)
    assert cond(), f"condition never became true in {polls} polls"
