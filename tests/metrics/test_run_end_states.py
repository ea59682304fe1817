"""``run.end``'s states as the device-side programs write them (``metrics.events.RunEndState``) are
the run's final states (``edgelab.states``): the zipapps cannot import the enum, so the two are
spelled twice and kept equal here."""

from __future__ import annotations

from edgelab.metrics.events import RunEnd, RunEndState, decode, encode
from edgelab.states import FINAL_STATES, RunState


def test_the_wire_states_are_the_final_run_states() -> None:
    wire = {k: v for k, v in vars(RunEndState).items() if not k.startswith("_")}
    assert wire == {s.name: s.value for s in RunState if s in FINAL_STATES}


def test_a_run_end_says_finished_unless_told() -> None:
    end = RunEnd(t=1.0)
    assert end.state == RunState.FINISHED
    back = decode(encode(end))
    assert isinstance(back, RunEnd) and back.state == RunState.FINISHED
    assert '"state": "finished"' in encode(end) or '"state":"finished"' in encode(end)
