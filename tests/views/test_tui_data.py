"""The TUI's data layer without the UI: fleet reads, filter, sort, the playout buffer model."""

from __future__ import annotations

import pytest
from tui_seed import seed

from edgelab.store.db import dispose_engines, get_engine
from edgelab.views.device import load_device
from edgelab.views.fleet import filter_rows, load_fleet, sort_rows
from edgelab.views.run import buffer_levels


@pytest.fixture
def engine(tmp_path):
    eng = get_engine(str(tmp_path / "lab.db"))
    seed(eng, 6)
    yield eng
    dispose_engines()


def test_fleet_reads_latest_probe_and_hottest_sensor(engine) -> None:
    rows = {r.name: r for r in load_fleet(engine)}
    # orin-agx-000: three snapshots, the newest has cpu 40 + (0*7 + 2*3) % 45 = 46 C, gpu 43.5 C
    assert rows["orin-agx-000"].temperature_c == 46.0
    assert (
        rows["orin-agx-002"].last_probe is None and rows["orin-agx-002"].temperature_c is None
    )  # never probed
    assert all(r.virtual for r in rows.values())


def test_filter_words_and_sort_unknown_last(engine) -> None:
    rows = load_fleet(engine)
    assert [r.name for r in filter_rows(rows, "npu_phone online")] == ["s25-001"]
    assert [r.name for r in filter_rows(rows, "virtual lab-b")] == [
        "orin-agx-000",
        "orin-agx-002",
        "orin-agx-004",
    ]
    by_temp = sort_rows(rows, "temperature", reverse=True)
    assert [r.temperature_c for r in by_temp] == [74.0, 67.0, 53.0, 46.0, None, None]


def test_device_detail_groups_facts_and_derives_profile(engine) -> None:
    d = load_device(engine, "s25-001")
    assert d.virtual and d.profile["class"] == "npu_phone"
    assert ("model", "Galaxy S25") in d.facts["identity"]
    # s25-001 (i=1): cpu-0 = 40 + (7 + 3h) % 45 for h = 0, 1, 2, oldest first
    assert d.telemetry["temperature C"] == [47.0, 50.0, 53.0]
    never = load_device(engine, "orin-agx-002")
    assert never.profile is None and "no successful probe" in never.profile_note


def test_buffer_levels_follow_the_ring_buffer_model() -> None:
    # 1 frame (80 ms) at 120 ms, then 25 frames (2000 ms) at 900 ms and 2700 ms, 24 kHz.
    # start S = 120. chunk 2 needed at 200, arrives 900: stall 700, buffer 2080 - 80 played = 2000.
    # chunk 3 needed at 120 + 2080 + 700 = 2900, arrives 2700: on time; played 2700-120-700 = 1880,
    # buffer 4080 - 1880 = 2200.
    chunks = [(120.0, 1920, 24000), (900.0, 48000, 24000), (2700.0, 48000, 24000)]
    assert buffer_levels(chunks) == [80.0, 2000.0, 2200.0]
    assert buffer_levels([(5.0, 0, 24000)]) == []  # no audio: nothing to show, not zero
