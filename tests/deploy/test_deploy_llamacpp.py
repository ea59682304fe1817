# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""llama.cpp end to end on the virtual lab: the real build (from the cache; built when missing) and a
random-weight GGUF, deployed by template from the device store, measured from the lab side through a
forwarded port, stopped without a trace; refused with its remedy when the build is missing."""

from __future__ import annotations

import re
import time

import pytest

from deploy.test_deploy_helpers import deploy_lab, group_members  # noqa: F401 - fixture
from edgelab.artifacts.registry import add_artifact
from edgelab.bench import BenchRequest, run_bench
from edgelab.deploy import control, follow, launch, planning, results
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.store.db import session_scope
from edgelab.store.deployments import processes

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]


@pytest.fixture(scope="module")
def llama_lab(deploy_lab, llama_build, tmp_path_factory):
    """The deploy lab plus the llama.cpp linux-x86_64 build (the cache; built when missing, see
    fixtures/llama_build.py) and a 4M random GGUF, registered in this module's database."""
    from edgelab.models.synth import synth_files
    from edgelab.runtimes import load_runtimes
    from edgelab.runtimes.build import register_build

    url, engine, opts = deploy_lab
    spec = load_runtimes()["llama.cpp"]
    model = synth_files("spark-x2.5-test", "4M", out_dir=tmp_path_factory.mktemp("models"))
    with session_scope(engine) as s:
        arts = register_build(s, spec, llama_build, prefix="test-llama")
        add_artifact(
            s,
            "spark-x2.5-test",
            [model.path],
            kind="model",
            target="any",
            component="spark-x2.5",
            meta=model.meta,
            replace=True,
        )
    return url, engine, opts, {a.meta["product"]: a for a in arts}


def test_missing_build_is_refused_before_anything_is_pushed_with_the_remedy(deploy_lab):
    _url, engine, opts = deploy_lab
    with session_scope(engine, write=False) as s:
        from sqlmodel import select

        from edgelab.store.artifacts import Artifact

        if s.exec(select(Artifact).where(Artifact.component == "llama.cpp")).first() is not None:
            pytest.skip("a llama.cpp build is registered in this module's database already")
    planned = planning.plan(engine, DeployRequest("orin-agx", "spark-x2.5", runtime="llama.cpp"))
    assert planned.plan.strategy == "S3" and planned.plan.processes[0].template == "llama.cpp:text_lm:S3"
    try:  # a virtual Orin runs the device's own build (aarch64, emulated) unless told otherwise
        launch.deploy(engine, DeployRequest("orin-agx", "spark-x2.5", runtime="llama.cpp"), opts=opts)
        raise AssertionError("deployed without a runtime build")
    except Refusal as r:
        assert r.code == "no_exported_graph" and "a llama.cpp build for linux-aarch64" in r.detail
        assert "edgelab runtime build llama.cpp --target linux-aarch64" in r.remedy
        assert "--kind runtime --target linux-aarch64" in r.remedy and "--lab-host-build" in r.remedy
    try:
        req = DeployRequest("orin-agx", "spark-x2.5", runtime="llama.cpp", lab_host_build=True)
        launch.deploy(engine, req, opts=opts)
        raise AssertionError("deployed without a runtime build")
    except Refusal as r:
        assert r.code == "no_exported_graph" and "a llama.cpp build for linux-x86_64" in r.detail
        assert "edgelab runtime build llama.cpp --target linux-x86_64" in r.remedy


def test_s3_llama_server_deploys_from_the_store_is_measured_live_and_stops_clean(llama_lab):
    _url, engine, opts, arts = llama_lab
    planned = planning.plan(
        engine, DeployRequest("orin-agx", "spark-x2.5", runtime="llama.cpp", lab_host_build=True)
    )
    p = planned.plan
    proc = p.processes[0]
    assert any("virtual device: lab host build (linux-x86_64)" in n for n in p.notes)
    assert proc.adapter == "llama-server" and proc.ready["kind"] == "http" and proc.target == "linux-x86_64"
    assert proc.links["llama-server"] == next(f for f in _files(engine, arts["llama-server"]))
    assert proc.argv[0] == "{bin}/llama-server" and any(w.startswith("{blob:") for w in proc.argv)
    dep = launch.deploy(
        engine, DeployRequest("orin-agx", "spark-x2.5", runtime="llama.cpp", lab_host_build=True), opts=opts
    )
    th = None
    try:
        assert dep.state == "running"
        assert {pl["observed"] for pl in dep.placement} == {"cpu"}  # from llama.cpp's own load log
        with session_scope(engine, write=False) as s:
            (row,) = processes(s, dep.id)
        assert "/bin/llama-server" in row.argv[0] and "/.edgelab/store/" in row.argv[row.argv.index("-m") + 1]
        th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
        assert th is not None
        end = time.monotonic() + 120
        while time.monotonic() < end:
            summ = _live(engine, dep.run_id)
            if summ and (summ.get("text") or {}).get("requests", 0) >= 2:
                break
            time.sleep(0.5)
        text = _live(engine, dep.run_id)["text"]
        assert text["ttft_ms"]["count"] >= 2 and text["decode_tok_s"]["p50"] > 0
        from edgelab.store.runs import telemetry_of

        end = time.monotonic() + 60  # the Jetson's tegrastats runs beside the lab-side requests too
        while time.monotonic() < end:
            with session_scope(engine, write=False) as s:
                sources = {row.source for row in telemetry_of(s, run_id=dep.run_id)}
            if "tegrastats" in sources:
                break
            time.sleep(0.5)
        assert "tegrastats" in sources, sources
        pgid = row.pid
        assert group_members(pgid)
    finally:
        stopped = control.stop(engine, dep.run_id, opts=opts)
        if th is not None:
            th.join(60)
    assert stopped.state == "stopped" and group_members(pgid) == []  # no process left


def test_s5_llama_completion_runs_once_and_finishes(llama_lab):
    _url, engine, opts, _arts = llama_lab
    dep = launch.deploy(
        engine,
        DeployRequest(
            "orin-agx",
            "spark-x2.5",
            strategy="S5",
            runtime="llama.cpp",
            values={"n_predict": 16},
            lab_host_build=True,
        ),
        opts=opts,
    )
    try:
        assert dep.plan["processes"][0]["adapter"] == "llama-completion"
        end = time.monotonic() + 120
        while time.monotonic() < end:
            dep = control.refresh(engine, dep.run_id, opts=opts)
            if dep.state != "running":
                break
            time.sleep(0.5)
        assert dep.state == "finished", (dep.state, dep.error, dep.phases)
        err = next(v for k, v in dep.logs.items() if k.endswith("stderr.log"))
        from edgelab.adapters.llama_perf import parse_perf

        perf = parse_perf(err)
        from edgelab.store.runs import get_run

        with session_scope(engine, write=False) as s:
            res = get_run(s, dep.run_id).meta["results"]["native"]
        assert res["placement"] == "cpu"  # the load log comes first: always there
        assert perf is not None, err[-1500:]  # the recipe's patch flushes llama.cpp's log at exit
        assert perf.eval.tokens >= 15 and res["perf"]["eval"]["tokens"] == perf.eval.tokens
        # an upstream build can still lose them (ggml-org/llama.cpp#22142): that run says so
        cut = err[: re.search(r"common_perf_print|llama_perf_|llama_print_timings", err).start()]
        name = dep.plan["processes"][0]["name"]
        lost = results.adapter_results(dep.plan, {f"{name}/stderr.log": cut})[name]
        assert lost["perf"] is None and lost["perf_missing"] == results.PERF_LOST
        assert lost["placement"] == "cpu"
        # what llama-completion printed is the run's figures: one request with its counts
        from edgelab.store.runs import get_summary

        with session_scope(engine, write=False) as s:
            summ = get_summary(s, dep.run_id, "final").metrics
        assert summ["requests"]["total"] == 1 and summ["requests"]["by_phase"] == {"measured": 1}
        rep = summ["reported"]
        assert rep["source"] == "llama-completion perf lines"
        assert rep["bands"]["all"]["decode_tok_s"]["p50"] == perf.eval.tokens_per_s
        assert rep["bands"]["all"]["eval_tokens"]["p50"] == perf.eval.tokens
    finally:
        control.stop(engine, dep.run_id, opts=opts)


def test_the_default_deploy_of_a_text_lm_runs_llama_cpp_with_its_provenance(llama_lab):
    """No --runtime: with the build and a model registered, the plan chooses llama.cpp (S3), and the
    run's provenance names the build, the program, the library and the model it loaded."""
    _url, engine, opts, arts = llama_lab
    req = DeployRequest("orin-agx", "spark-x2.5", lab_host_build=True)  # this module registers the x86 build
    planned = planning.plan(engine, req)
    assert (planned.plan.strategy, planned.plan.runtime, planned.refusal) == ("S3", "llama.cpp", None)
    assert "runtime llama.cpp: the lab host's build (virtual device)" in planned.plan.reason
    gguf = next(a for a in planned.plan.present_artifacts() if a.role == "lm.model")
    assert sum(planned.plan.memory.values()) < 2 * 1024**3  # sized from the 4M GGUF, not 4 GB of bf16
    dep = launch.deploy(engine, req, opts=opts)
    try:
        assert (dep.strategy, dep.runtime, dep.state) == ("S3", "llama.cpp", "running")
        from edgelab.store.runs import get_run

        with session_scope(engine, write=False) as s:
            prov = get_run(s, dep.run_id).provenance
        assert (
            prov["runtime_build"] == arts["llama-server"].name
            and prov["runtime_sha256"] == arts["llama-server"].digest
        )
        assert prov["program"]["name"] == "llama-server" and len(prov["program"]["sha256"]) == 64
        assert (
            prov["runtime_library"]["name"] == "llama.cpp" and prov["runtime_library"]["version"] != "unknown"
        )
        assert prov["artifacts"]["lm.model"] == gguf.sha256 and prov["weights"] == "random"
        assert prov["models"]["lm.model"]["bytes"] == gguf.bytes and prov["strategy_label"] == "S3"
    finally:
        control.stop(engine, dep.run_id, opts=opts)


def test_bench_on_the_adb_phone_reports_text_figures_with_provenance(llama_lab):
    _url, engine, opts, arts = llama_lab
    res = run_bench(
        engine,
        BenchRequest(
            "s25", "spark-x2.5", runtime="llama.cpp", warmup=1, requests=3, threads=1, lab_host_build=True
        ),
        opts=opts,
    )
    rep = res.report()
    assert res.state == "finished" and rep["virtual"] and not rep["emulated"]
    assert rep["note"] == "virtual device: lab host build (linux-x86_64), --lab-host-build"
    text = rep["text"]
    assert (
        text["ttft_ms"]["count"] == 3 and text["decode_tok_s"]["count"] == 3 and text["itl_ms"]["count"] > 3
    )
    assert text["peak_rss_bytes"] and text["peak_rss_bytes"] > 1 << 20
    pv = rep["provenance"]
    assert pv["runtime_build"] == arts["llama-server"].name and len(pv["runtime_sha256"]) == 64
    assert len(pv["artifacts"]["lm.model"]) == 64 and pv["weights"] == "random" and pv["threads"] == "1"
    assert "/data/local/tmp/edgelab/store/" in pv["command"] and " -t 1 " in pv["command"]
    assert rep["placement"] == "cpu"


def _files(engine, art):
    from edgelab.artifacts.registry import artifact_files

    with session_scope(engine, write=False) as s:
        return [f.sha256 for f in artifact_files(s, art)]


def _live(engine, run_id):
    from edgelab.store.runs import get_summary

    with session_scope(engine, write=False) as s:
        summ = get_summary(s, run_id, "live") or get_summary(s, run_id, "final")
        return summ.metrics if summ else None


def test_bench_s5_runs_llama_bench_and_stores_its_json(llama_lab):
    _url, engine, opts, arts = llama_lab
    res = run_bench(
        engine,
        BenchRequest(
            "orin-agx",
            "spark-x2.5",
            runtime="llama.cpp",
            strategy="S5",
            requests=2,
            threads=1,
            lab_host_build=True,
        ),
        opts=opts,
    )
    rep = res.report()
    assert res.state == "finished" and set(rep["llama_bench"]) == {"pp64", "tg32"}
    assert rep["llama_bench"]["tg32"]["avg_ts"] > 0 and rep["llama_bench"]["tg32"]["n_threads"] == 1
    assert res.meta["template"] == "llama.cpp:text_lm+bench:S5"
    # llama-bench's own figures are the run's requests: 2 repetitions of each test, banded by test
    assert rep["requests"]["by_phase"] == {"measured": 4}
    bands = res.summary["reported"]["bands"]
    assert bands["tg32"]["requests"] == 2 and bands["tg32"]["tok_s"]["count"] == 2
    assert (
        rep["provenance"]["runtime_build"] == arts["llama-bench"].name
        and " -r 2 " in rep["provenance"]["command"]
    )
