"""A real process's output through a Transport becomes events on the lab clock, then a stored run.

The path the deploy follower takes: the device clock offset by round trips (edgelab.deploy.clock),
the process's lines decoded (metrics.events.decode_lines), device stamps corrected onto the lab clock.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from edgelab.deploy.clock import measure_offset
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor, store_telemetry
from edgelab.metrics.telemetry import sample_proc
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import create_run, get_summary, telemetry_of
from edgelab.transport.local import LocalTransport

SKEW = 100.0  # the "device" below runs 100 s ahead of the lab clock

# A workload that stamps its events on its own (skewed) clock: 5 action chunks at 20 Hz, one log line.
WORKLOAD = f"""
import json, time
clk = lambda: time.time() + {SKEW}
print("runtime starting", flush=True)
for i in range(5):
    obs = clk()
    time.sleep(0.01)
    start = clk(); time.sleep(0.02); end = clk()
    print(json.dumps({{"kind": "action.chunk", "t": clk(), "idx": i, "obs_t": obs, "infer_start": start,
                      "infer_end": end, "horizon": 50, "dims": 32}}), flush=True)
"""


def _skew_date(tmp_path, monkeypatch) -> None:
    """A device whose clock runs SKEW seconds ahead: its `date` (first on PATH) prints that clock."""
    shim = tmp_path / "skewed-bin"
    shim.mkdir()
    date = shim / "date"
    date.write_text(f"#!{sys.executable}\nimport time\nprint(f'{{time.time() + {SKEW}:.9f}}')\n")
    date.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")


@pytest.fixture
def skewed_date(tmp_path, monkeypatch):
    _skew_date(tmp_path, monkeypatch)


def events_from_process(proc, *, offset: ev.ClockOffset, run: str) -> list[ev.Event]:
    """The follower's decoding: event lines on the device clock corrected, other lines kept as logs."""
    out = []
    for e in ev.decode_lines(proc.lines()):
        e = e if isinstance(e, ev.LogLine) else offset.correct(e)
        if e.run is None:
            e.run = run
        out.append(e)
    return out


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "lab.db"))
    dbmod.dispose_engines()


def test_clock_offset_by_round_trip_is_within_half_the_rtt(monkeypatch, tmp_path):
    with LocalTransport() as tr:
        same = measure_offset(tr, rounds=3)  # `date +%s.%N`: the same clock
    _skew_date(tmp_path, monkeypatch)
    with LocalTransport() as tr:
        skewed = measure_offset(tr, rounds=3)
    # the device stamp lies between send (t0) and receive (t1), so |error| <= rtt / 2
    assert abs(same.offset_s) <= same.rtt_s / 2 + 1e-3
    assert abs(skewed.offset_s - SKEW) <= skewed.rtt_s / 2 + 1e-6


def test_process_events_are_corrected_and_stored(engine, skewed_date):
    with session_scope(engine) as s:
        rid = create_run(
            s, pipeline="internvla-a1", device_name="lab-host", meta={"control_period_s": 0.05}
        ).id
    with LocalTransport() as tr:
        offset = measure_offset(tr, rounds=3)
        assert abs(offset.offset_s - SKEW) <= offset.rtt_s / 2 + 1e-6
        before = time.time()
        with tr.stream([sys.executable, "-c", WORKLOAD]) as proc:
            got = list(events_from_process(proc, offset=offset, run=rid))
            assert proc.wait(30) == 0
        after = time.time()
    actions = [e for e in got if isinstance(e, ev.ActionChunk)]
    logs = [e.line for e in got if isinstance(e, ev.LogLine)]
    assert len(actions) == 5 and "runtime starting" in logs
    slack = offset.rtt_s / 2 + 1e-6
    for a in actions:  # back on the lab clock: inside the window the process ran in
        assert before - slack <= a.obs_t <= a.infer_start <= a.infer_end <= a.t <= after + slack
        assert a.run == rid
    with Ingestor(engine, rid) as ing:
        ing.feed_all(got)
    with session_scope(engine, write=False) as s:
        act = get_summary(s, rid, "final").metrics["action"]
    assert act["chunks"] == 5 and act["latency_ms"]["count"] == 5
    assert act["age_ms"]["min"] >= act["latency_ms"]["min"]  # age includes inference
    assert act["deadline_misses"] is not None  # judged against the run's 50 ms period


def test_device_telemetry_outside_a_run(engine):
    with LocalTransport() as tr:
        n = store_telemetry(engine, sample_proc(tr, interval_s=0.05, count=2, device="lab-host"))
    assert n == 2
    with session_scope(engine, write=False) as s:
        rows = telemetry_of(s, device="lab-host")
    assert len(rows) == 2 and rows[0].run_id is None and rows[-1].mem_available_bytes > 0
