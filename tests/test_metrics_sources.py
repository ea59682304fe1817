"""A real process's output through a Transport becomes events on the lab clock, then a stored run."""

from __future__ import annotations

import sys
import time

import pytest

from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor, store_telemetry
from edgelab.metrics.sources import events_from_process, measure_clock_offset
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


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "lab.db"))
    dbmod.dispose_engines()


def test_clock_offset_by_round_trip_is_within_half_the_rtt():
    with LocalTransport() as tr:
        same = measure_clock_offset(tr, rounds=3)  # `date +%s.%N`: the same clock
        skewed = measure_clock_offset(tr, rounds=3, argv=[sys.executable, "-c",
                                                          f"import time; print(time.time() + {SKEW})"])
    # the device stamp lies between send (t0) and receive (t1), so |error| <= rtt / 2
    assert abs(same.offset_s) <= same.rtt_s / 2 + 1e-3
    assert abs(skewed.offset_s - SKEW) <= skewed.rtt_s / 2 + 1e-6


def test_process_events_are_corrected_and_stored(engine):
    with session_scope(engine) as s:
        rid = create_run(s, pipeline="internvla-a1", device_name="lab-host", meta={"control_period_s": 0.05}).id
    with LocalTransport() as tr:
        offset = measure_clock_offset(tr, rounds=3, argv=[sys.executable, "-c",
                                                          f"import time; print(time.time() + {SKEW})"])
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
