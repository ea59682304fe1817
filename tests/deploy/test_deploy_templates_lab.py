# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Templates on the virtual lab: S4's device stage takes the server endpoint it is given; S1 renders what
vLLM-Omni documents with a memory fraction equal to its reservation; bench runs on a device registered
as a plain (non-virtual) one, from the pushed zipapp."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from deploy.test_deploy_helpers import deploy_lab  # noqa: F401 - fixture
from edgelab.artifacts.registry import add_artifact
from edgelab.bench import BenchRequest, run_bench
from edgelab.deploy import control, follow, launch, planning
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.inventory.probe import probe_devices
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.store.models import Device

pytestmark = [pytest.mark.ssh, pytest.mark.adb]
ROOT = Path(__file__).resolve().parents[2]
PACK = [
    "edgelab/__init__.py",
    "edgelab/errors.py",
    "edgelab/logs.py",
    "edgelab/credentials.py",
    "edgelab/metrics/__init__.py",
    "edgelab/metrics/events.py",
    "edgelab/reference",
]


@pytest.fixture
def speech_server():
    """The lab-side reference codec-token server (what S4's talker is), on a free loopback port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgelab.protocols", "serve", "speech", "--frames-per-s", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()
        yield json.loads(line)["url"]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_s4_device_stage_streams_codec_tokens_from_the_given_server(deploy_lab, speech_server):
    _url, engine, opts = deploy_lab
    req = DeployRequest("s25", "qwen3-tts", endpoint=speech_server)
    planned = planning.plan(engine, req)
    proc = planned.plan.processes[0]
    assert planned.plan.strategy == "S4" and proc.template == "reference:tts:S4"
    assert proc.argv[proc.argv.index("--server") + 1] == speech_server
    dep = launch.deploy(engine, req, opts=opts)
    th = follow.ensure_follower(engine, dep.run_id, transport=opts.transport)
    try:
        assert dep.state == "running"
        end, summ = time.monotonic() + 60, None
        while time.monotonic() < end:
            summ = _summary(engine, dep.run_id)
            if summ and (summ.get("codec") or {}).get("first_frame_ms", {}).get("count"):
                break
            time.sleep(0.5)
        assert summ and summ["codec"]["first_frame_ms"]["count"] >= 1  # frames came from the server
        assert summ["audio"]["ttfa_ms"]["count"] >= 1  # and were decoded on the device
    finally:
        control.stop(engine, dep.run_id, opts=opts)
        if th is not None:
            th.join(30)


@pytest.fixture(scope="module")
def plain_orin(deploy_lab):
    """orin-agx's sshd registered again as an ordinary device: not virtual, so nothing is lab-provided."""
    url, engine, opts = deploy_lab
    with session_scope(engine) as s:
        src = get_device(s, "orin-agx")
        data = src.model_dump(exclude={"id", "name", "virtual", "created_at", "updated_at"})
        if not any(d.name == "orin-plain" for d in s.exec(__import__("sqlmodel").select(Device)).all()):
            s.add(Device(name="orin-plain", virtual=False, **data))
    outcomes = probe_devices(engine, ["orin-plain"], timeout=60, ssh_config=opts.transport.get("ssh_config"))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    return url, engine, opts


def test_s1_renders_vllm_omni_with_the_reserved_memory_fraction(plain_orin):
    """On a real Jetson without vLLM-Omni installed the plan still shows the exact command, the deploy
    config and its fractions; the refusal names the missing venv and the command that installs it."""
    _url, engine, _opts = plain_orin
    planned = planning.plan(engine, DeployRequest("orin-plain", "qwen3-tts", strategy="S1"))
    p, proc = planned.plan, planned.plan.processes[0]
    assert p.runtime == "vllm-omni" and proc.template == "vllm-omni:qwen3-tts-0.6b:S1" and not p.virtual
    assert proc.argv[0] == "~/.edgelab/venvs/vllm-omni-0.30.0/bin/vllm"
    assert proc.argv[1:4] == [
        "serve",
        "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
        "--omni",
    ]  # no checkpoint: the id
    assert proc.argv[proc.argv.index("--deploy-config") + 1] == "vllm-omni-deploy.yaml"
    assert proc.ready == {"kind": "http", "path": "/health", "port": 8091}
    assert "VLLM_CPU_OMP_THREADS_BIND" not in proc.env and "HF_HUB_OFFLINE" not in proc.env  # CUDA, online
    config = yaml.safe_load(proc.files["vllm-omni-deploy.yaml"])
    fracs = [st["gpu_memory_utilization"] for st in config["stages"]]
    assert p.memory_detail["gpu_memory_utilization"] == {"talker": fracs[0], "code2wav": fracs[1]}
    assert config["model_runner"] == "v2" and all(st["devices"] == "0" for st in config["stages"])
    pool = planned.profile.budget_pool
    assert p.memory_detail["budget_request"] == {pool.name: int(sum(fracs) * pool.total_bytes)}
    assert (
        p.memory_detail["deploy_config"]["sha256"]
        == hashlib.sha256(proc.files["vllm-omni-deploy.yaml"].encode()).hexdigest()
    )
    assert p.ready_timeout_s >= 300  # vLLM-Omni's own stage-init limit at least; --ready-timeout overrides it
    assert p.endpoints == ["ws://127.0.0.1:8091/v1/audio/speech/stream"]
    assert "vLLM-Omni is not installed on orin-plain" in (proc.unavailable or "")
    assert planned.refusal is not None and "edgelab runtime install vllm-omni" in planned.refusal.remedy


def test_a_plain_device_without_the_reference_zipapp_is_refused_with_the_remedy(plain_orin):
    _url, engine, opts = plain_orin
    try:
        run_bench(
            engine, BenchRequest("orin-plain", "internvla-a1", runtime="reference", requests=2), opts=opts
        )
        raise AssertionError("a real device ran the reference without its zipapp")
    except Refusal as r:
        assert "edgelab runtime build reference --target" in r.remedy


def test_bench_on_a_plain_device_runs_the_pushed_zipapp(plain_orin, tmp_path):
    _url, engine, opts = plain_orin
    pyz = tmp_path / "edgelab-reference.pyz"
    subprocess.run(
        [sys.executable, "-m", "edgelab.runtimes.pack", str(pyz), "--main", "edgelab.reference", *PACK],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    target = planning.plan(engine, DeployRequest("orin-plain", "internvla-a1")).profile.runtime_targets[0]
    with session_scope(engine) as s:
        add_artifact(
            s, "reference-plain", [pyz], kind="runtime", target=target, component="reference", replace=True
        )
    res = run_bench(
        engine,
        BenchRequest("orin-plain", "internvla-a1", runtime="reference", warmup=1, requests=5, control_hz=50),
        opts=opts,
    )
    assert res.state == "finished", res.summary
    assert res.provenance["virtual"] is False and "PYTHONPATH=" in res.provenance["command"]
    assert (
        "/.edgelab/store/" in res.provenance["command"]
        and " python3 -m edgelab.reference" in res.provenance["command"]
    )
    assert res.summary["action"]["chunks"] >= 5


def _summary(engine, run_id):
    from edgelab.store.runs import get_summary

    with session_scope(engine, write=False) as s:
        summ = get_summary(s, run_id, "live") or get_summary(s, run_id, "final")
        return summ.metrics if summ else None
