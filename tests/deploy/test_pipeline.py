"""The launch pipeline's runner (edgelab.deploy.pipeline): steps in order, their events yielded and
logged, and on any exception (raised in a step, thrown in by the consumer through ``Launch``'s
``with``, or the consumer closing it) every entered step undone in reverse with SIGINT ignored,
then every entered step closed. Deploy and bench over the real lab are covered by
test_deploy_lifecycle and test_faults_kill; these pin the runner's own contract."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator

import pytest

from edgelab.deploy.options import Options
from edgelab.deploy.pipeline import Launch, LaunchContext, PhaseEvent, Step, run_steps
from edgelab.logs import Phases


class Noted(Step):
    """A step that notes what the runner asks of it (and what SIGINT was when it undid)."""

    def __init__(self, name: str, journal: list[str], *, events: int = 1, fail: bool = False):
        self.name, self.journal, self.events, self.fail = name, journal, events, fail

    def run(self, ctx: LaunchContext) -> Iterator[PhaseEvent]:
        self.journal.append(f"run {self.name}")
        for i in range(self.events):
            yield PhaseEvent(self.name, {"i": i})
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        ctx.result = self.name

    def undo(self, ctx: LaunchContext, exc: BaseException) -> None:
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        self.journal.append(f"undo {self.name} {type(exc).__name__} sigint-ignored={ignored}")

    def close(self, ctx: LaunchContext) -> None:
        self.journal.append(f"close {self.name}")


def _ctx() -> LaunchContext:
    return LaunchContext(
        engine=None,  # type: ignore[arg-type] - the runner never touches the database itself
        opts=Options(),
        run_id="r0",
        phases=Phases(logging.getLogger("edgelab.test.pipeline"), "test"),
    )


def test_steps_run_in_order_their_events_are_yielded_and_logged_and_all_are_closed(caplog):
    journal: list[str] = []
    steps = [Noted("a", journal), Noted("b", journal, events=2)]
    caplog.set_level(logging.INFO, logger="edgelab.test.pipeline")
    with Launch(run_steps(steps, _ctx())) as launch:
        names = [(e.name, e.info["i"]) for e in launch]
    assert names == [("a", 0), ("b", 0), ("b", 1)]
    assert launch.result == "b"
    assert journal == ["run a", "run b", "close b", "close a"]
    assert [r.getMessage().split(":")[1].split(" in ")[0].strip() for r in caplog.records] == ["a", "b", "b"]


def test_a_failing_step_undoes_itself_and_those_before_in_reverse_with_sigint_ignored():
    journal: list[str] = []
    steps = [Noted("a", journal), Noted("b", journal, fail=True), Noted("c", journal)]
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(RuntimeError, match="b broke"), Launch(run_steps(steps, _ctx())) as launch:
        for _event in launch:
            pass
    assert journal == [
        "run a",
        "run b",
        "undo b RuntimeError sigint-ignored=True",
        "undo a RuntimeError sigint-ignored=True",
        "close b",
        "close a",
    ]
    assert signal.getsignal(signal.SIGINT) is before  # restored after the undo


def test_a_ctrl_c_in_the_consumer_is_thrown_into_the_pipeline_and_undone_as_such():
    journal: list[str] = []
    steps = [Noted("a", journal), Noted("b", journal), Noted("c", journal)]
    with pytest.raises(KeyboardInterrupt), Launch(run_steps(steps, _ctx())) as launch:
        for event in launch:
            if event.name == "b":
                raise KeyboardInterrupt  # the UI was drawing "b" when the Ctrl-C came
    assert journal == [
        "run a",
        "run b",
        "undo b KeyboardInterrupt sigint-ignored=True",
        "undo a KeyboardInterrupt sigint-ignored=True",
        "close b",
        "close a",
    ]


def test_a_consumer_that_stops_iterating_closes_the_launch_and_undoes_what_it_started():
    journal: list[str] = []
    steps = [Noted("a", journal), Noted("b", journal)]
    with Launch(run_steps(steps, _ctx())) as launch:
        for _event in launch:
            break
    assert launch.result is None
    assert journal == ["run a", "undo a GeneratorExit sigint-ignored=True", "close a"]
