# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""`edgelab stop` of a run under someone else's lease is refused, naming whose it is; --force stops
it and says so (recorded on the run); one's own run stops as before."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from edgelab.cli import app
from edgelab.deploy import launch
from edgelab.deploy.planning import DeployRequest
from edgelab.store.db import session_scope
from edgelab.store.runs import get_run

runner = CliRunner()


def test_stopping_someone_elses_run_needs_force_and_names_them(deploy_lab, ssh_lab, monkeypatch):
    url, engine, opts = deploy_lab
    monkeypatch.setenv("EDGELAB_OWNER", "alice@lab-a")
    dep = launch.deploy(engine, DeployRequest("rb3g2", "qwen3-tts"), opts=opts)
    env = cli_env(url, ssh_lab) | {"EDGELAB_OWNER": "bob@lab-b"}
    refused = runner.invoke(app, ["--db", url, "stop", dep.run_id], env=env)
    assert refused.exit_code == 1, refused.output
    assert f"run {dep.run_id} is not yours: it runs under alice@lab-a" in refused.stderr
    assert f"edgelab stop {dep.run_id} --force" in refused.stderr
    forced = runner.invoke(app, ["--db", url, "stop", dep.run_id, "--force", "--json"], env=env)
    assert forced.exit_code == 0, forced.output
    out = json.loads(forced.stdout)
    assert out["state"] == "stopped" and out["stopped_for"].startswith("alice@lab-a, lease ")
    with session_scope(engine, write=False) as s:
        assert get_run(s, dep.run_id).meta["stopped_by"]["by"] == "bob@lab-b"

    mine = launch.deploy(engine, DeployRequest("rb3g2", "qwen3-tts"), opts=opts)  # alice's again
    own = runner.invoke(
        app, ["--db", url, "stop", mine.run_id], env=cli_env(url, ssh_lab) | {"EDGELAB_OWNER": "alice@lab-a"}
    )
    assert (
        own.exit_code == 0 and f"run {mine.run_id} is stopped" in own.stdout and "--force" not in own.stdout
    )
