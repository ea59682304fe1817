"""The bench report's lines (``edgelab.views.bench``): what `edgelab bench` prints after a run, as
plain text; a placement fallback and a failed parity check are the parts marked as alerts."""

from __future__ import annotations

from edgelab.views.bench import bench_rows, endpoint_line, p50_p95, virtual_note

DIST = {"p50": 12.345, "p95": 20.5, "count": 7}
PROV = {
    "runtime": "mnn",
    "weights": "random",
    "runtime_build": "mnn-3.6.1",
    "runtime_sha256": "ab" * 32,
    "threads": 4,
    "models": {"vision": {"artifact": "vla-vision", "sha256": "cd" * 32, "weights": "random"}},
}


def _report(**extra):
    return {
        "virtual": False,
        "protocol": "single_request_batch1_v1",
        "requests": {"total": 21, "by_phase": {"warmup": 1, "measured": 20}, "failed": 0},
        "provenance": PROV,
        "strategy": "S3",
        **extra,
    }


def _rows(rep):
    return {row.key: row.parts for row in bench_rows(rep)}


def test_distribution_text_and_nothing_measured():
    assert p50_p95(DIST, " ms") == "p50 12.3 ms  p95 20.5 ms  (n=7)"
    assert p50_p95({"p50": None}) == "-" and p50_p95(None) == "-"


def test_virtual_note_says_what_ran_and_that_it_is_no_model_figure():
    assert virtual_note(_report()) is None
    ref = _report(virtual=True, provenance={"runtime": "reference"})
    assert virtual_note(ref) == "VIRTUAL device, reference runtime: machinery only, not a model figure"
    host = _report(virtual=True, note="lab host build")
    assert virtual_note(host) == (
        "VIRTUAL device, mnn (random weights), the lab host's build: machinery only, not a model figure"
    )


def test_placement_fallback_and_failed_parity_are_alert_parts():
    rep = _report(
        controller=True,
        placement={
            "vision": {"observed": "cpu", "detail": "x" * 120, "fallback": True, "requested": "npu"},
            "action": {"observed": "gpu", "detail": "ok"},
        },
        parity={"ok": False, "error": "max abs diff 0.5"},
        action={
            "latency_ms": DIST,
            "age_ms": DIST,
            "deadline_misses": 3,
            "chunks": 40,
            "control_period_ms": 100.0,
        },
    )
    rows = _rows(rep)
    assert rows["placement vision"] == (
        (f"cpu ({'x' * 90})", False),
        ("  ", False),
        ("FALLBACK from npu", True),
    )
    assert rows["placement action"] == (("gpu (ok)", False),)
    assert rows["parity"] == (("FAILED", True), (" max abs diff 0.5", False))
    assert rows["deadline misses"] == (("3 of 40 (period 100.0 ms)", False),)
    assert _rows({**rep, "parity": {"ok": True}})["parity"] == (("ok", False),)


def test_a_launched_run_says_what_ran_an_endpoint_what_it_reported():
    launched = _rows(_report())
    assert [k for k in launched] == ["requests", "strategy", "runtime", "model vision"]
    assert launched["requests"] == (("21 (warmup 1, measured 20), failed 0", False),)
    assert launched["runtime"] == ((f"mnn-3.6.1 {'ab' * 6}, threads 4", False),)
    assert endpoint_line(_report()) is None
    ep = _report(
        endpoint={"url": "ws://127.0.0.1:8091", "protocol": "speech_ws", "reported": {"model": "m", "x": 1}}
    )
    assert endpoint_line(ep) == "endpoint ws://127.0.0.1:8091 (speech_ws; model m)"
    assert "strategy" not in _rows(ep)
    quiet = _report(endpoint={"url": "http://h:1", "protocol": "http", "reported": {}})
    assert endpoint_line(quiet) == "endpoint http://h:1 (http; reported nothing)"
