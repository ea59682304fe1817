"""The four shipped playbooks pass on the virtual lab after the README's set-up (`./scripts/demo`:
the lab up, every device probed, qwen3-tts deployed on s25 and left running), on real processes:
a phone, a Jetson and a Windows-on-Arm PC, every job's run real; a device's jobs run one after
another, so nightly-matrix's two pipelines on one device never refuse each other's memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy.test_deploy_helpers import probed_lab
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.deploy import control, launch
from edgelab.deploy.options import Options
from edgelab.deploy.planning import DeployRequest
from edgelab.store import db as dbmod

pytestmark = [pytest.mark.slow]  # about two minutes of real workloads (each playbook on three devices)
runner = CliRunner()
PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
LIMIT = "s25,orin-agx,xelite-pc"


@pytest.fixture(scope="module")
def demo_lab(tmp_path_factory, ssh_lab, adb_lab):
    """The README's set-up: registered, probed, and the demo's deployment left running on s25."""
    url, engine = probed_lab(tmp_path_factory, ssh_lab, adb_lab, LIMIT.split(","), "shipped")
    opts = Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 30})
    demo = launch.deploy(engine, DeployRequest("s25", "qwen3-tts"), opts=opts)
    mp = pytest.MonkeyPatch()
    mp.setenv("EDGELAB_DB", url)
    mp.setenv("EDGELAB_SIM_DIR", str(ssh_lab.state_dir))
    try:
        yield url, engine
    finally:
        mp.undo()
        control.stop(engine, demo.run_id, opts=opts)
        dbmod.dispose_engines()


@pytest.mark.parametrize("playbook", ["smoke", "qwen3-tts-qualification", "nightly-matrix", "vla-deadline"])
def test_a_shipped_playbook_passes_on_the_virtual_lab(demo_lab, playbook):
    limit = "s25,orin-agx" if playbook == "qwen3-tts-qualification" else LIMIT  # it selects phones, Jetsons
    res = runner.invoke(app, ["play", str(PLAYBOOKS / f"{playbook}.yaml"), "--limit", limit, "--json"])
    assert res.stdout, res.output
    out = json.loads(res.stdout)
    failed = [
        f"{j['device']}/{j['pipeline']}: {s['name']}: {s.get('message')}"
        for j in out["jobs"]
        for s in j["steps"]
        if s["status"] not in ("passed", "skipped")
    ]
    assert res.exit_code == 0 and out["ok"], failed
    for job in out["jobs"]:  # every gate judged a run: none passed for want of one
        gates = [s for s in job["steps"] if s["kind"] == "gate"]
        assert all(s["status"] == "passed" and s["run_id"] for s in gates), (job["device"], gates)
    if playbook == "nightly-matrix":  # s25 ran both pipelines, one after the other, beside the demo
        s25 = [j for j in out["jobs"] if j["device"] == "s25"]
        assert {j["pipeline"] for j in s25} == {"qwen3-tts-0.6b", "internvla-a1"}
