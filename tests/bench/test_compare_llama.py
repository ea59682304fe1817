"""On a real runtime: a sweep of llama.cpp threads on orin-agx (llama-server, S3, the lab host's real
build on the virtual device, labelled) stores one run per point with text figures and names the best
point; an interleaved A/B of two quantizations of one random-weight model (F16 against Q8_0) is two
linked runs with a verdict and an interval; llama-bench's repetitions (S5) pool across blocks."""

from __future__ import annotations

import pytest

from edgelab.artifacts.registry import add_artifact
from edgelab.bench import BenchRequest
from edgelab.bench.sweep import Point, parse_sweep, run_points
from edgelab.deploy.options import Options
from edgelab.inventory.probe import probe_devices
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import get_run

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture(scope="module")
def llama_lab(tmp_path_factory, ssh_lab, llama_build):
    from edgelab.models.synth import synth_files
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import register_build

    url = f"sqlite:///{tmp_path_factory.mktemp('compare-llama') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=None), check=False)
    engine = get_engine(url)
    outcomes = probe_devices(engine, ["orin-agx"], timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    models = tmp_path_factory.mktemp("models")
    f16 = synth_files("spark-ab", "4M", out_dir=models)
    q8 = synth_files(
        "spark-ab", "4M", quant="q8_0", out_dir=models, quantizer=llama_build.products["llama-quantize"]
    )
    with session_scope(engine) as s:
        register_build(s, load_runtimes()["llama.cpp"], llama_build, prefix="test-llama")
        for name, m in (("spark-ab-f16", f16), ("spark-ab-q8_0", q8)):
            add_artifact(
                s,
                name,
                [m.path],
                kind="model",
                target="any",
                component="spark-x2.5",
                meta=m.meta,
                replace=True,
            )
    yield engine, Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 30})
    dbmod.dispose_engines()


def _base(**kw) -> BenchRequest:
    return BenchRequest(
        "orin-agx",
        "spark-x2.5",
        runtime="llama.cpp",
        strategy="S3",
        model="spark-ab-f16",
        lab_host_build=True,
        **kw,
    )


def test_threads_sweep_on_llama_server_stores_a_run_per_point_and_the_best(llama_lab):
    engine, opts = llama_lab
    res = run_points(engine, _base(requests=6, warmup=1), parse_sweep(["threads=1,2"]), block=3, opts=opts)
    assert [p.state for p in res.points] == ["finished", "finished"] and res.virtual
    for p in res.points:
        assert p.counts["decode_tok_s"] == 6 and p.counts["ttft"] == 6
    assert set(res.best) >= {"decode_tok_s", "ttft"}
    with session_scope(engine, write=False) as s:
        runs = [get_run(s, p.run_id) for p in res.points]
    assert [r.provenance["threads"] for r in runs] == ["1", "2"]  # what each point really ran
    assert all(
        r.meta["virtual_note"] == "virtual device: lab host build (linux-x86_64), --lab-host-build"
        for r in runs
    )
    for r in runs:  # the server's per-request records pooled over both blocks, the report remade
        assert len(r.meta["records"]) == 8 and r.meta["llama"]["requests"] == 6
        assert r.meta["llama"]["decode_tok_s"]["count"] == 6


def test_interleaved_ab_of_two_quantizations_is_compared(llama_lab):
    engine, opts = llama_lab
    res = run_points(
        engine,
        _base(requests=6, warmup=1, threads=1),
        [Point("A", {}), Point("B", {"model": "spark-ab-q8_0"})],
        kind="ab",
        block=3,
        opts=opts,
    )
    comp = res.comparison
    assert comp is not None and comp["comparable"]
    by = {m["metric"]: m for m in comp["metrics"]}
    assert by["decode_tok_s"]["verdict"] in ("faster", "slower", "no difference")
    assert (
        by["decode_tok_s"]["interval"][0] <= by["decode_tok_s"]["ratio"] <= by["decode_tok_s"]["interval"][1]
    )
    differs = {d["field"] for d in comp["provenance_differs"]}
    assert "artifacts" in differs  # the model's SHA-256 is what differs


def test_llama_bench_repetitions_pool_across_blocks(llama_lab):
    engine, opts = llama_lab
    base = BenchRequest(
        "orin-agx",
        "spark-x2.5",
        runtime="llama.cpp",
        strategy="S5",
        model="spark-ab-f16",
        requests=4,
        threads=1,
        lab_host_build=True,
    )
    res = run_points(engine, base, parse_sweep(["threads=1,2"]), block=2, opts=opts)
    for p in res.points:
        assert p.counts["tok_s_tg32"] == 4 and p.counts["tok_s_pp64"] == 4
    assert "tok_s_tg32" in res.best
