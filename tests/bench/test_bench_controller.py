# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""`edgelab bench internvla-a1 --runtime mnn|onnxruntime` on a virtual Jetson: edgelab's S3 controller
runs the exported head on the real runtime over SSH; latency, age and misses come from its events,
the model's SHA-256, the observed placement and the parity report are stored with the run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from typer.testing import CliRunner

from edgelab.artifacts.registry import artifact_files, get_artifact
from edgelab.cli import app
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run

pytest.importorskip("MNN")
pytest.importorskip("onnxruntime")
pytestmark = [pytest.mark.ssh, pytest.mark.slow]
runner = CliRunner()


@pytest.mark.parametrize("runtime", ["mnn", "onnxruntime"])
def test_bench_on_a_real_runtime_reports_figures_sha_and_observed_placement(
    deploy_lab, ssh_lab, runtime, tmp_path, monkeypatch
):
    url, engine, _opts = deploy_lab
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    env = cli_env(url, ssh_lab) | {"EDGELAB_HOME": str(tmp_path / "home")}
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
            runtime,
            "--control-hz",
            "10",
            "--warmup",
            "1",
            "--requests",
            "6",
            "--json",
        ],
        env=env,
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["state"] == "finished" and rep["virtual"] is True and rep["runtime"] == runtime
    assert rep["weights"] == "random"
    act = rep["action"]
    # a tick whose observation is replaced before inference picks it up infers nothing (a loaded host
    # supersedes some), so the count is checked against the controller's own accounting, not a floor
    assert act["chunks"] >= 1 and act["latency_ms"]["count"] == act["chunks"]
    assert (
        act["latency_ms"]["p50"] <= act["latency_ms"]["p95"]
        and act["age_ms"]["p50"] >= act["latency_ms"]["p50"]
    )
    assert isinstance(act["deadline_misses"], int)
    # the SHA-256 is the registered artifact's, and the one the controller loaded
    with session_scope(engine, write=False) as s:
        (model,) = rep["provenance"]["models"].values()  # the exported head, as bound and loaded
        art = get_artifact(s, model["artifact"])
        run = get_run(s, rep["run"])
        (file,) = artifact_files(s, art)
        src = Path(file.source)
        assert art.kind == "model" and art.meta["weights"] == "random"
        assert model["sha256"] == rep["provenance"]["model_loaded"]["sha256"] == file.sha256
        assert hashlib.sha256(src.read_bytes()).hexdigest() == model["sha256"]
        prov, meta = dict(run.provenance), dict(run.meta)
    assert model["sha256"] in prov["artifacts"].values() and prov["virtual"] is True
    # the runtime library as the controller loaded it, and edgelab's controller package as the build
    lib = prov["runtime_library"]
    assert (
        lib["name"] in ("MNN", "ONNX Runtime") and len(lib["sha256"]) == 64 and lib["source"] == "as loaded"
    )
    assert prov["runtime_build"].startswith("edgelab ") and "controller" in prov["runtime_build"]
    # every inferred chunk is a request, the first one the warm-up (a superseded tick infers nothing)
    assert (
        rep["requests"]["by_phase"]["warmup"] == 1
        and rep["requests"]["by_phase"]["measured"] == act["chunks"]
    )
    # a virtual device runs the lab host's runtime on the lab host's CPU; the runtime itself says so
    pl = prov["placement"]["action_head"]
    assert pl["runtime"] == runtime and pl["requested"] == "cpu" and pl["observed"] == "cpu"
    assert pl["fallback"] is False and pl["runtime_version"]
    # launched from the runtime's template, the model pushed into the device's content store
    assert "edgelab.controller" in prov["command"] and f"--runtime {runtime}" in prov["command"]
    assert f"/.edgelab/store/{model['sha256']}" in prov["command"]
    assert meta["parity"]["ok"] and set(meta["parity"]["runtimes"]) == {"mnn", "onnxruntime"}
    # 10 flow steps per inferred chunk, the warm-up one included (the headline figures leave it out)
    assert meta["controller"]["ticks"] == 7
    assert rep["requests"]["total"] == 7 - meta["controller"]["superseded_observations"]
    assert meta["controller"]["step_ms"]["count"] == 10 * rep["requests"]["total"]


def test_bench_with_a_cpu_hog_and_the_human_view(deploy_lab, ssh_lab, tmp_path, monkeypatch):
    url, engine, _opts = deploy_lab
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    env = cli_env(url, ssh_lab) | {"EDGELAB_HOME": str(tmp_path / "home")}
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
            "mnn",
            "--warmup",
            "0",
            "--requests",
            "4",
            "--hog",
            "2",
        ],
        env=env,
    )
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())  # rich wraps to the terminal's width
    assert "VIRTUAL" in out and "mnn (random weights)" in out and "placement action_head" in out
    assert "sha256" in out and "parity" in out and "deadline misses" in out


@pytest.mark.adb
@pytest.mark.parametrize("runtime", ["mnn", "onnxruntime"])
def test_s4_deploy_decodes_the_lab_codec_stream_on_the_runtime(deploy_lab, runtime, tmp_path, monkeypatch):
    """`edgelab deploy qwen3-tts --device s25 --strategy S4 --endpoint ws://... --runtime mnn`: the
    device stage is the runtime's S4 template over the exported codec decoder, pushed to the store."""
    import subprocess
    import sys
    import time

    from edgelab.deploy import control, follow, launch, planning
    from edgelab.deploy.planning import DeployRequest
    from edgelab.models.export import export, register
    from edgelab.store.runs import get_summary

    _url, engine, opts = deploy_lab
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    ex = export("codec-decoder", "mnn" if runtime == "mnn" else "onnx")
    with session_scope(engine) as s:
        register(s, ex)
    srv = subprocess.Popen(
        [sys.executable, "-m", "edgelab.protocols", "serve", "speech", "--frames-per-s", "25"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        url = json.loads(srv.stdout.readline())["url"]
        req = DeployRequest("s25", "qwen3-tts", strategy="S4", runtime=runtime, endpoint=url)
        planned = planning.plan(engine, req)
        proc = planned.plan.processes[0]
        assert proc.template == f"{runtime}:tts:S4" and proc.argv[proc.argv.index("--server") + 1] == url
        dep = launch.deploy(engine, req, opts=opts)
        th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
        try:
            assert dep.state == "running"
            from edgelab.labels import placement_line

            lines = {pl["stage"]: placement_line(pl) for pl in dep.placement}
            assert lines["code2wav"] == "code2wav: planned cpu, ran on cpu"  # the runtime's word, no FALLBACK
            assert lines["talker"] == "talker: planned server, ran on server"
            end, summ = time.monotonic() + 60, None
            while time.monotonic() < end:
                with session_scope(engine, write=False) as s:
                    got = get_summary(s, dep.run_id, "live") or get_summary(s, dep.run_id, "final")
                    summ = got.metrics if got else None
                if summ and (summ.get("audio") or {}).get("ttfa_ms", {}).get("count"):
                    break
                time.sleep(0.5)
            assert summ and summ["codec"]["first_frame_ms"]["count"] >= 1  # frames from the lab's talker
            assert summ["audio"]["ttfa_ms"]["count"] >= 1  # decoded on the runtime on the device side
        finally:
            control.stop(engine, dep.run_id, opts=opts)
            if th is not None:
                th.join(30)
        with session_scope(engine, write=False) as s:
            from edgelab.store.runs import get_run

            run = get_run(s, dep.run_id)
            assert ex.sha256 in run.command and run.runtime == runtime
            # the follower's ingest stored what the runtime itself reported at run.start
            assert run.provenance["placement"]["code2wav"]["runtime"] == runtime
            assert run.provenance["placement"]["code2wav"]["observed"] == "cpu"
            assert run.provenance["model_loaded"]["sha256"] == ex.sha256
    finally:
        srv.terminate()
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()


def test_each_runtime_template_binds_its_own_export_and_pi0_gets_the_same_head(
    deploy_lab, tmp_path, monkeypatch
):
    """Both exports registered (the .mnn last): the ONNX Runtime plan binds the .onnx file, never the
    newest model of the pipeline; pi0 (50 x 32, 10 steps as well) gets the head under its own name."""
    from edgelab.deploy import planning
    from edgelab.deploy.planning import DeployRequest
    from edgelab.models.export import export, register

    _url, engine, _opts = deploy_lab
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    onnx_ex, mnn_ex = export("action-head", "onnx"), export("action-head", "mnn")
    with session_scope(engine) as s:
        register(s, onnx_ex)
        register(s, mnn_ex)
        pi0 = register(s, mnn_ex, "pi0")
        assert pi0.name == "pi0.action-head.random-s0.mnn" and pi0.meta["pipeline"] == "pi0"
    for runtime, ex in (("onnxruntime", onnx_ex), ("mnn", mnn_ex)):
        plan = planning.plan(engine, DeployRequest("orin-agx", "internvla-a1", runtime=runtime)).plan
        proc = plan.processes[0]
        assert proc.template == f"{runtime}:vla:S3" and "{blob:" + ex.sha256 + "}" in proc.argv
        head = next(st for st in plan.stages if st.name == "action_head")
        assert head.artifacts == ["action_head.model"]  # the artifact belongs to the head, not the encoder
    plan = planning.plan(engine, DeployRequest("orin-agx", "pi0", runtime="mnn")).plan
    assert "{blob:" + mnn_ex.sha256 + "}" in plan.processes[0].argv
