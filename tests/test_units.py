"""edgelab.units: how every view writes a byte count and a series (binary units, unknown never 0)."""

from __future__ import annotations

from edgelab.units import GIB, MIB, gib, human_bytes, mib, series_caption


def test_bytes_in_binary_units_and_unknown_as_a_marker() -> None:
    assert gib(12 * GIB + GIB // 4) == "12.2 GiB" and gib(3 * GIB, 2) == "3.00 GiB"
    assert gib(None) == "-" and gib(None, missing="?") == "?" and gib(None, missing=None) is None
    assert gib(0) == "0.0 GiB"  # a measured zero stays a number; callers map "not reported" to None
    assert mib(812 * MIB) == "812 MiB" and mib(int(1.5 * MIB), 1) == "1.5 MiB" and mib(None) == "-"
    assert [human_bytes(n) for n in (0, 512, 1024, 3 * 1024, int(1.5 * MIB), 5 * GIB, 2048 * GIB)] == [
        "0 B",
        "512 B",
        "1.0 KiB",
        "3.0 KiB",
        "1.5 MiB",
        "5.0 GiB",
        "2048.0 GiB",
    ]


def test_series_caption() -> None:
    assert series_caption("chunk gap", [], " ms") == "chunk gap: no samples yet"
    assert series_caption("chunk gap", [780.0, 1800.0, 1237.5], " ms") == (
        "chunk gap: 1237.5 ms  (min 780, max 1800, 3 samples)"
    )
