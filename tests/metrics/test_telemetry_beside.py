# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Telemetry beside every run: a reference deploy on the virtual orin-agx (tegrastats) and s25
(thermal zones + dumpsys battery) stores samples with the run, marked virtual, visible in
``runs show --json``, ``watch`` and ``/metrics``, and summarised in the run's results."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.deploy import control, launch
from edgelab.deploy.follow import ensure_follower
from edgelab.deploy.planning import DeployRequest
from edgelab.metrics.prometheus import exposition
from edgelab.store.db import session_scope
from edgelab.store.runs import get_summary, telemetry_of

runner = CliRunner()
pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]


def wait_for_samples(engine, run_id: str, n: int, timeout: float = 60.0) -> list:
    deadline = time.monotonic() + timeout
    while True:
        with session_scope(engine, write=False) as s:
            rows = telemetry_of(s, run_id=run_id, limit=100)
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("device", "pipeline", "source", "sensor"),
    [
        ("orin-agx", "qwen3-tts-1.7b", "tegrastats", "CPU"),
        ("s25", "qwen3-tts", "android-thermal+battery", "battery"),
    ],
)
def test_a_reference_deploy_stores_telemetry_beside_the_run(
    deploy_lab, ssh_lab, device, pipeline, source, sensor
):
    url, engine, opts = deploy_lab
    dep = launch.deploy(engine, DeployRequest(device, pipeline), opts=opts)
    follower = None
    try:
        follower = ensure_follower(engine, dep.run_id, transport=opts.transport)
        burn = subprocess.Popen(
            [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<4: pass"]
        )
        try:  # load on the lab host, where the virtual device's processes run
            rows = wait_for_samples(engine, dep.run_id, 3)
        finally:
            burn.kill()
            burn.wait()
        assert len(rows) >= 2, "no telemetry beside the deployment"
        assert {r.source for r in rows} == {source} and all(r.virtual for r in rows)
        assert all(sensor in r.temps_c for r in rows)
        if device == "orin-agx":  # the persona's tegrastats gives rails, RAM and the full field set
            assert rows[-1].power_w["VDD_GPU_SOC"] > 0 and rows[-1].mem_available_bytes > 0
            assert rows[-1].raw["swap_total_mb"] == 31400 and rows[-1].raw["lfb_blocks"] == 1759
            # the shim's values move with the host's load after its first line (a virtual figure)
            assert any(r.cpu_pct > 0 and r.temps_c["CPU"] > 44.562 for r in rows[1:])
        else:
            assert rows[-1].raw["battery"] and rows[-1].mem_available_bytes

        shown = runner.invoke(
            app, ["--db", url, "runs", "show", dep.run_id, "--json"], env=cli_env(url, ssh_lab)
        )
        tel = json.loads(shown.stdout)["telemetry"]
        assert tel["samples"] >= 2 and tel["sampler"]["source"] == (
            "tegrastats" if device == "orin-agx" else "android"
        )
        assert tel["sampler"]["virtual"] is True
        assert tel["latest"][-1]["virtual"] is True and sensor in tel["latest"][-1]["temps_c"]

        watched = runner.invoke(app, ["--db", url, "watch", dep.run_id, "--once"], env=cli_env(url, ssh_lab))
        assert watched.exit_code == 0, watched.output
        assert (
            "temperature -" not in watched.stdout
            and sensor in watched.stdout
            and "virtual shim" in watched.stdout
        )

        text = exposition(engine)
        assert (
            f'edgelab_device_temperature_celsius{{device="{device}",source="{source}",virtual="true",'
            f'sensor="{sensor}"}}' in text
        )
    finally:
        control.stop(engine, dep.run_id, opts=opts)
        if follower is not None:
            follower.join(60)
    with session_scope(engine, write=False) as s:
        final = get_summary(s, dep.run_id, "final")
    res = final.metrics["resources"]
    assert res["samples"] >= 2 and sensor in res["max_temp_c"]  # peak temperature kept in the results


def test_the_nvidia_smi_sampler_on_the_virtual_wsl_host(tmp_path, ssh_lab, adb_lab):
    """wsl-hx370 (RTX 5090 through WSL): the plan is nvidia-smi + /proc; its shim refuses the full
    field list (an older driver's answer), the short one is used; every queried field kept raw."""
    from edgelab.inventory.probe import probe_devices
    from edgelab.metrics.sampler import TelemetrySampler, plan_for
    from edgelab.sim.lab import LabStatus, register
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine
    from edgelab.store.devices import get_device
    from edgelab.store.snapshots import latest_snapshot
    from edgelab.transport import open_transport

    url = f"sqlite:///{tmp_path / 'wsl.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    engine = get_engine(url)
    try:
        (o,) = probe_devices(engine, ["wsl-hx370"], timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
        assert o.ok, o.error
        with session_scope(engine, write=False) as s:
            facts = latest_snapshot(s, "wsl-hx370").facts
            endpoint = get_device(s, "wsl-hx370").endpoint()
        plan = plan_for(facts, interval_s=0.2)
        assert plan is not None and plan.source == "nvidia-smi"
        got = []
        sampler = TelemetrySampler(
            lambda: open_transport(endpoint, ssh_config=str(ssh_lab.ssh_config_path)),
            plan,
            device="wsl-hx370",
            virtual=True,
            sink=got.append,
        )
        sampler.start()
        deadline = time.monotonic() + 30
        while len([g for g in got if g.source == "proc"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        sampler.stop()
        assert sampler.error is None, sampler.error
        gpu = [g for g in got if g.source.startswith("nvidia-smi")]
        proc = [g for g in got if g.source == "proc"]
        assert gpu and proc and all(g.virtual for g in got)
        assert gpu[0].temps_c and gpu[0].power_w and gpu[0].raw["memory.total"]
        assert proc[-1].mem_available_bytes and proc[-1].cpu_pct is not None  # the second reading has a CPU %
    finally:
        dbmod.dispose_engines()


def test_the_windows_sampler_beside_a_run_on_the_virtual_windows_host(tmp_path, ssh_lab, adb_lab):
    """win-hx370-rtx5090: CIM counters and nvidia-smi through PowerShell (edgelab.metrics.wintelemetry),
    host and GPU samples, the fields edgelab does not model kept raw."""
    pytest.importorskip("edgelab.metrics.wintelemetry")
    from edgelab.inventory.probe import probe_devices
    from edgelab.metrics.sampler import TelemetrySampler, plan_for
    from edgelab.sim.lab import LabStatus, register
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine
    from edgelab.store.devices import get_device
    from edgelab.store.snapshots import latest_snapshot
    from edgelab.transport import open_transport

    url = f"sqlite:///{tmp_path / 'win.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    engine = get_engine(url)
    try:
        (o,) = probe_devices(
            engine, ["win-hx370-rtx5090"], timeout=60, ssh_config=str(ssh_lab.ssh_config_path)
        )
        assert o.ok, o.error
        with session_scope(engine, write=False) as s:
            facts = latest_snapshot(s, "win-hx370-rtx5090").facts
            endpoint = get_device(s, "win-hx370-rtx5090").endpoint()
        plan = plan_for(facts, interval_s=0.3)
        assert plan is not None and plan.source == "windows-cim"
        got = []
        sampler = TelemetrySampler(
            lambda: open_transport(endpoint, ssh_config=str(ssh_lab.ssh_config_path)),
            plan,
            device="win-hx370-rtx5090",
            virtual=True,
            sink=got.append,
        )
        sampler.start()
        deadline = time.monotonic() + 60
        while len([g for g in got if g.source == "windows-cim"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        sampler.stop()
        assert sampler.error is None, sampler.error
        host = [g for g in got if g.source == "windows-cim"]
        assert len(host) >= 2 and host[0].cpu_pct is not None and host[0].raw["memory"]["commit_limit_bytes"]
        assert any(g.source.startswith("nvidia-smi") for g in got) and all(g.virtual for g in got)
    finally:
        dbmod.dispose_engines()
