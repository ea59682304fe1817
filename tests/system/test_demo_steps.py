"""`./scripts/demo`'s command sequence on the test lab: probe, deploy qwen3-tts on s25, a bounded
live view, and the mission's own commands right after it (deploy again, profile --explain).

The script itself runs the fixed-port lab (`edgelab sim up`); here the same CLI steps run on the
tests' lab (free ports), from a database that holds the registered lab and nothing else.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _demo_commands() -> list[str]:
    text = (ROOT / "scripts" / "demo").read_text()
    return [m.group(1) for m in re.finditer(r"^\s*(?:\S+=\"\$\()?(edgelab [^\n|)]*)", text, re.M)]


def test_demo_script_runs_these_steps():
    cmds = " ; ".join(_demo_commands())
    for step in (
        "edgelab sim up",
        "edgelab probe --all",
        "edgelab deploy qwen3-tts --device s25",
        'edgelab watch "$run" --for',
    ):
        assert step in cmds, (step, cmds)


def test_demo_sequence_then_the_mission_commands(tmp_path, ssh_lab, adb_lab, monkeypatch):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    monkeypatch.setenv("EDGELAB_DB", url)
    monkeypatch.setenv("EDGELAB_SIM_DIR", str(ssh_lab.state_dir))
    dbmod.dispose_engines()
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    runs: list[str] = []

    def cli(*args: str):
        return runner.invoke(app, list(args))

    try:
        before = cli("deploy", "qwen3-tts", "--device", "s25", "--dry-run")
        assert (
            before.exit_code == 1 and "no successful probe snapshot" in before.output
        )  # why the demo probes
        res = cli("probe", "--all", "--json")  # the test lab has a locked phone: exit 1, the others recorded
        outcomes = {o["name"]: o for o in json.loads(res.stdout)}
        assert outcomes["s25"]["ok"], outcomes["s25"]
        assert res.exit_code == (0 if all(o["ok"] for o in outcomes.values()) else 1)

        res = cli("deploy", "qwen3-tts", "--device", "s25", "--json")
        assert res.exit_code == 0, res.output
        dep = json.loads(res.stdout)
        runs.append(dep["run"])
        assert dep["state"] == "running" and dep["virtual"] and dep["runtime"] == "reference"
        assert dep["pipeline"] == "qwen3-tts-0.6b"

        res = cli("watch", dep["run"], "--for", "2s", "--interval", "0.2")
        assert res.exit_code == 0, res.output
        assert (
            "(virtual)" in res.stdout and "[running]" in res.stdout and "qwen3-tts-0.6b on s25" in res.stdout
        )
        bad = cli("watch", dep["run"], "--for", "soon")
        assert bad.exit_code == 2 and "not a duration" in bad.stderr

        res = cli("ps", "--json")
        assert res.exit_code == 0 and dep["run"] in [d["run"] for d in json.loads(res.stdout)], res.output

        # the mission's own commands, right after the demo
        res = cli("deploy", "qwen3-tts", "--device", "s25")
        assert res.exit_code == 0, res.output
        runs.append(re.search(r"run (\S+): ", res.stdout).group(1))
        assert "is running" in res.stdout
        res = cli("profile", "s25", "--pipeline", "qwen3-tts", "--explain")
        assert res.exit_code == 0 and "rules that fired" in " ".join(res.stdout.split()), res.output
    finally:
        for run in runs:
            stopped = cli("stop", run)
            assert stopped.exit_code == 0, stopped.output
        dbmod.dispose_engines()
