"""edgelab.units: how every view writes a byte count and a series (binary units, unknown never 0)."""

from __future__ import annotations

from datetime import UTC

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


def test_stored_times_read_in_the_local_zone(monkeypatch) -> None:
    import time
    from datetime import datetime, timedelta
    from types import SimpleNamespace

    from edgelab.units import clock, when
    from edgelab.views.run import _log_line

    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving
    time.tzset()
    try:
        now = datetime.now(UTC).replace(microsecond=0)
        local = now.astimezone()
        assert when(now) == local.strftime("%H:%M:%S")  # today: the clock only
        assert when(now.replace(tzinfo=None)) == local.strftime("%H:%M:%S")  # naive rows are UTC
        old = now - timedelta(days=3)
        assert when(old) == old.astimezone().strftime("%Y-%m-%d %H:%M") and when(None) == "-"
        assert clock(0.25) == "05:30:00.250"  # the epoch in Kolkata, with milliseconds
        stage = SimpleNamespace(
            t=0.25,
            kind="stage",
            level=None,
            request="r-1",
            message="infer",
            data={"start": 0.0, "end": 0.0123},
        )
        assert _log_line(stage) == "05:30:00.250 stage infer 12.3 ms  r-1"
        log = SimpleNamespace(
            t=0.25,
            kind="log",
            level=None,
            request=None,
            message="load_tensors: done",
            data={"stream": "stderr"},
        )
        assert _log_line(log) == "05:30:00.250 stderr load_tensors: done"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
