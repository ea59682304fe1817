# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""`edgelab bench` on virtual devices: the study's protocol stores raw records and a summary that
recomputes identically from them; the VLA reports latency, age and deadline misses."""

from __future__ import annotations

import json

from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from typer.testing import CliRunner

from edgelab.bench import BenchRequest, run_bench
from edgelab.cli import app
from edgelab.errors import Refusal
from edgelab.metrics.ingest import finalize
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run, get_summary, requests_of, samples_of

runner = CliRunner()


def test_tts_bench_stores_warmup_and_measured_requests_with_raw_chunks(deploy_lab):
    url, engine, opts = deploy_lab
    res = run_bench(
        engine,
        BenchRequest(
            "s25",
            "qwen3-tts",
            runtime="reference",
            warmup=1,
            requests=20,
            band="short",
            frames=6,
            frames_per_s=0,
        ),
        opts=opts,
    )
    assert res.state == "finished" and res.kind == "tts"
    with session_scope(engine, write=False) as s:
        run = get_run(s, res.run_id)
        reqs = requests_of(s, res.run_id)
        samples = samples_of(s, res.run_id, kind="audio")
        stored = get_summary(s, res.run_id, "final")
    assert run.kind == "bench" and run.virtual and run.meta["protocol"] == "single_request_batch1_v1"
    assert run.provenance["virtual"] is True and run.provenance["runtime"] == "reference"
    assert "edgelab.reference" in run.provenance["command"] and run.provenance["facts_hash"]
    assert "clock" in run.meta and run.meta["clock"]["rtt_s"] is not None
    assert [r.phase for r in reqs] == ["warmup"] + ["measured"] * 20
    assert all(r.band == "short" and r.ok and r.finished >= r.submitted for r in reqs)
    by_req = {}
    for x in samples:
        by_req.setdefault(x.request, []).append(x)
    assert set(by_req) == {r.request for r in reqs}
    argv = run.provenance["command"].split()
    first = int(argv[argv.index("--schedule") + 1].split(",")[0])  # the phone profile's ramp start
    for chunks in by_req.values():  # 6 frames on the profile's ramp: 1920 samples per frame, hashed
        assert sum(c.n for c in chunks) == 6 * 1920 and chunks[0].n == min(first, 6) * 1920
        assert all(len(c.sha256) == 64 and c.t_ms is not None and c.t_ms >= 0 for c in chunks)
    # the summary recomputes identically from the raw samples, and matches the live figures
    again = finalize(engine, res.run_id)
    assert {k: v for k, v in stored.metrics.items() if k != "live_equals_final"} == again
    assert res.live_equals_final and stored.metrics["live_equals_final"] is True
    assert again["requests"]["by_phase"] == {"warmup": 1, "measured": 20}
    assert again["audio"]["requests"] == 20 and again["audio"]["ttfa_ms"]["count"] == 20
    assert stored.provenance["virtual"] is True


def test_vla_bench_reports_latency_age_and_slow_steps_as_misses(deploy_lab, ssh_lab):
    url, engine, _opts = deploy_lab
    res = runner.invoke(
        app,
        [
            "--db",
            url,
            "bench",
            "internvla-a1",
            "--device",
            "orin-agx",
            "--runtime",
            "reference",
            "--control-hz",
            "10",
            "--warmup",
            "0",
            "--requests",
            "8",
            "--json",
        ],
        env=cli_env(url, ssh_lab),
    )
    assert res.exit_code == 0, res.output
    clean = json.loads(res.stdout)
    act = clean["action"]
    assert clean["virtual"] is True and clean["state"] == "finished"
    assert act["chunks"] == 8 and act["control_period_ms"] == 100.0
    assert act["latency_ms"]["count"] == 8 and act["latency_ms"]["p50"] <= act["latency_ms"]["p95"]
    assert act["age_ms"]["count"] == 8 and act["age_ms"]["p95"] >= act["latency_ms"]["p50"]
    # Counted, never null; how many a clean run misses depends on the lab host's load, so no number here.
    assert isinstance(act["deadline_misses"], int) and 0 <= act["deadline_misses"] <= act["chunks"]
    slow = runner.invoke(
        app,
        [
            "--db",
            url,
            "bench",
            "internvla-a1",
            "--device",
            "orin-agx",
            "--runtime",
            "reference",
            "--control-hz",
            "10",
            "--warmup",
            "0",
            "--requests",
            "8",
            "--slow-every",
            "3",
            "--slow-ms",
            "150",
            "--json",
        ],
        env=cli_env(url, ssh_lab),
    )
    assert slow.exit_code == 0, slow.output
    sa = json.loads(slow.stdout)["action"]
    assert sa["deadline_misses"] >= 2  # inferences 3 and 6 take > 150 ms against a 100 ms period
    assert sa["latency_ms"]["p95"] > 150.0
    text = runner.invoke(
        app,
        [
            "--db",
            url,
            "bench",
            "internvla-a1",
            "--device",
            "orin-agx",
            "--runtime",
            "reference",
            "--warmup",
            "0",
            "--requests",
            "3",
        ],
        env=cli_env(url, ssh_lab),
    )
    assert text.exit_code == 0, text.output
    assert "deadline misses" in text.stdout and "VIRTUAL" in text.stdout


def test_bench_refuses_what_the_reference_cannot_run(deploy_lab):
    url, engine, opts = deploy_lab
    try:
        run_bench(engine, BenchRequest("s25", "spark-x2.5", runtime="reference"), opts=opts)
        raise AssertionError("a text LM was benched on the reference runtime")
    except Refusal as r:
        assert r.code == "no_exported_graph"
