# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Deploy -> push: a plan's artifacts come from the registry by role and target; missing ones refuse
before launch; the registered reference zipapp is pushed once (a second deploy finds it in the store)
and the workload runs from the device store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deploy.test_deploy_helpers import deploy_lab, group_members  # noqa: F401 - fixture
from edgelab.artifacts.registry import add_artifact
from edgelab.deploy import control, launch, planning
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.store.db import session_scope
from edgelab.store.deployments import get_deployment, open_reservations, processes
from edgelab.store.devices import get_device

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


def _pushed(engine, run_id) -> dict:
    with session_scope(engine, write=False) as s:
        return next(p for p in get_deployment(s, run_id).phases if p["phase"] == "pushed")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(x.decode().split("=", 1) for x in raw if b"=" in x)


def test_missing_artifacts_refuse_before_anything_is_reserved(deploy_lab):
    url, engine, opts = deploy_lab
    try:
        launch.deploy(engine, DeployRequest("s25", "qwen3-tts", runtime="llama.cpp"), opts=opts)
        raise AssertionError("a llama.cpp deploy without its artifacts was launched")
    except Refusal as r:
        assert r.code == "no_exported_graph" and "not registered" in r.detail
    with session_scope(engine, write=False) as s:
        assert open_reservations(s, get_device(s, "s25").id) == []


def test_registered_reference_zipapp_is_pushed_once_and_runs_from_the_store(deploy_lab, tmp_path):
    url, engine, opts = deploy_lab
    pyz = tmp_path / "edgelab-reference.pyz"
    subprocess.run(
        [sys.executable, "-m", "edgelab.runtimes.pack", str(pyz), "--main", "edgelab.reference", *PACK],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    target = planning.plan(engine, DeployRequest("orin-agx", "qwen3-tts")).profile.runtime_targets[0]
    with session_scope(engine) as s:
        add_artifact(s, "reference-test", [pyz], kind="runtime", target=target, component="reference")
    planned = planning.plan(engine, DeployRequest("orin-agx", "qwen3-tts"))
    art = next(a for a in planned.plan.present_artifacts() if a.role == "runtime.reference")
    assert art.present and art.name == "reference-test" and art.sha256
    first = launch.deploy(engine, DeployRequest("orin-agx", "qwen3-tts"), opts=opts)
    try:
        # uploaded, or verified when an earlier session left the same (reproducible) bytes in the store
        assert _pushed(engine, first.run_id)["blobs"] in ({"uploaded": 1}, {"resumed": 1}, {"verified": 1})
        with session_scope(engine, write=False) as s:
            (proc,) = processes(s, first.id)
        envs = [_environ(m) for m in group_members(proc.pid)]
        paths = [e["PYTHONPATH"] for e in envs if "PYTHONPATH" in e]
        assert paths and all(p.endswith(art.sha256) or art.sha256 in p for p in paths)
        assert Path(paths[0]).is_file()  # the blob the workload imports is in the (virtual) device store
    finally:
        control.stop(engine, first.run_id, opts=opts)
    second = launch.deploy(engine, DeployRequest("orin-agx", "qwen3-tts"), opts=opts)
    try:
        assert _pushed(engine, second.run_id)["blobs"] == {"present": 1}  # already there: skipped
        assert second.state == "running"
    finally:
        control.stop(engine, second.run_id, opts=opts)
