"""`refresh` of a run whose process row never got a pid (its start failed half-way): the run ends as
failed with the process's exit code unknown, instead of refresh crashing on ``int(None)``.
Real parts: a SQLite store and the local transport (the lab host itself is the device)."""

from __future__ import annotations

from edgelab.deploy import control
from edgelab.store.db import get_engine, session_scope
from edgelab.store.deployments import Deployment, DeploymentProcess, get_deployment, processes
from edgelab.store.devices import add_device
from edgelab.store.models import Device
from edgelab.store.runs import create_run, get_run


def test_refresh_ends_a_run_whose_process_has_no_pid(dbpath, tmp_path):
    engine = get_engine(str(dbpath))
    workdir = tmp_path / "run" / "server"
    workdir.mkdir(parents=True)
    with session_scope(engine) as s:
        device = add_device(s, Device(name="here", transport="local"))
        create_run(
            s,
            id="rnopid",
            pipeline="qwen3-tts",
            device_name="here",
            runtime="reference",
            strategy="S3",
            kind="deploy",
            state="running",
        )
        dep = Deployment(
            run_id="rnopid",
            device_id=device.pk,
            device_name="here",
            pipeline="qwen3-tts",
            strategy="S3",
            runtime="reference",
            state="running",
            remote_dir=str(workdir.parent),
        )
        s.add(dep)
        s.flush()
        s.add(
            DeploymentProcess(
                deployment_id=dep.pk,
                name="server",
                argv=["true"],
                workdir=str(workdir),
                pid=None,
                state="running",
            )
        )
    dep = control.refresh(engine, "rnopid")
    assert dep.state == "failed" and dep.error == "exit codes {'server': None}", (dep.state, dep.error)
    with session_scope(engine, write=False) as s:
        assert get_run(s, "rnopid").state == "failed"
        (row,) = processes(s, get_deployment(s, "rnopid").pk)
        assert row.state == "exited" and row.exit_code is None
