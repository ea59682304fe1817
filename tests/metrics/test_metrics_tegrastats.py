"""tegrastats' full grammar on public captures from eight boards (tests/corpus/SOURCES.md):
every field parsed, nothing left over, and a sample made of each line."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgelab.metrics.telemetry import from_tegrastats
from edgelab.probe.parsers.tegrastats import parse_line

CORPUS = Path(__file__).parents[1] / "corpus" / "jetson"
BOARDS = ["tx1", "tx2", "nano", "agx-xavier", "xavier-nx", "orin-jp5", "orin-r36", "orin-no-emc"]
LINES = dict(
    zip(BOARDS, (CORPUS / "datadog-agent_jetson_test_tegrastats.txt").read_text().splitlines(), strict=True)
)
LINES["orin-agx-12cpu"] = (CORPUS / "jetson-12cpu-62801MB_tegrastats.txt").read_text().splitlines()[0]


@pytest.mark.parametrize("board", sorted(LINES))
def test_every_field_of_every_board_is_parsed(board):
    v = parse_line(LINES[board])
    assert v is not None and "unparsed" not in v, v.get("unparsed")
    assert v["ram_total_mb"] > 0 and v["cpus"] and v["temps_c"]
    s = from_tegrastats(LINES[board], t=1.0, device=board)
    assert s is not None and s.mem_available_bytes > 0 and s.raw["cpus"] == v["cpus"]


def test_the_field_shapes_of_each_generation():
    tx1 = parse_line(LINES["tx1"])
    assert (tx1["iram_used_kb"], tx1["iram_total_kb"], tx1["iram_lfb_kb"]) == (0, 252, 252)
    assert (
        tx1["rails_mw"]["VDD_IN"] == 2532 and tx1["rails_avg_mw"]["VDD_IN"] == 2698
    )  # no mW unit (older L4T)
    assert tx1["engines"]["APE"] == {"mhz": 25.0} and tx1["lfb_blocks"] == 120 and tx1["lfb_block_mb"] == 4
    tx2 = parse_line(LINES["tx2"])
    assert [c["online"] for c in tx2["cpus"]] == [True, False, False, True, True, True]
    assert tx2["swap_cached_mb"] == 0 and "VDD_4V0_WIFI" in tx2["rails_mw"]
    agx = parse_line(LINES["agx-xavier"])
    assert (agx["mts_fg_pct"], agx["mts_bg_pct"]) == (0.0, 0.0)
    assert (
        agx["rails_mw"]["CPU"] == 311 and agx["temps_c"]["CPU"] == 37.5
    )  # a rail named CPU beside CPU@ temp
    nx = parse_line(LINES["xavier-nx"])
    assert nx["engines"]["GR3D_FREQ"] == {"load_pct": 62.0, "mhz": [306.0]}
    assert nx["cpus"][-1] == {"online": True, "load_pct": 8.0, "mhz": 1267.0}
    r36 = parse_line(LINES["orin-r36"])
    assert r36["engines"]["GR3D_FREQ"] == {"load_pct": 0.0, "mhz": [305.0, 305.0]}  # one clock per GPC
    for eng in ("NVENC", "NVDEC", "NVJPG", "NVJPG1", "VIC", "OFA", "NVDLA0", "NVDLA1", "PVA0_FREQ"):
        assert r36["engines"][eng] == {"state": "off"}, eng
    assert r36["rails_mw"] == {"VDD_GPU_SOC": 3205, "VDD_CPU_CV": 4405, "VIN_SYS_5V0": 4767}
    assert r36["temps_c"]["cpu"] == 53.062 and r36["swap_used_mb"] == 4915
    no_emc = parse_line(LINES["orin-no-emc"])
    assert "EMC_FREQ" not in no_emc["engines"] and no_emc["engines"]["GR3D_FREQ"] == {
        "load_pct": 0.0,
        "mhz": None,
    }
    orin = parse_line(LINES["orin-agx-12cpu"])
    assert orin["timestamp"] == "04-11-2025 10:36:27" and orin["engines"]["VIC_FREQ"] == {"mhz": 729.0}
    assert set(orin["sensors_off"]) == {
        "CV0",
        "CV1",
        "CV2",
        "GPU",
    }  # -256C: kept as off, not as a temperature


def test_unknown_fields_are_kept_not_dropped():
    v = parse_line("RAM 100/200MB CPU [1%@100] FOO_BAR 3 weird-token zz@12C")
    assert v["engines"]["FOO_BAR"] == {"mhz": 3.0} and v["temps_c"]["zz"] == 12.0
    assert v["unparsed"] == ["weird-token"]
    assert parse_line("no tegrastats here") is None
