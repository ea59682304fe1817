"""`edgelab play` end to end on the virtual lab: real sshd and adb server, real workload processes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod

runner = CliRunner()
PLAYBOOKS = __import__("pathlib").Path(__file__).resolve().parents[2] / "playbooks"


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory, ssh_lab, adb_lab):
    url = f"sqlite:///{tmp_path_factory.mktemp('play') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    mp = pytest.MonkeyPatch()
    mp.setenv("EDGELAB_DB", url)
    mp.setenv("EDGELAB_SIM_DIR", str(ssh_lab.state_dir))  # the lab's ssh_config, key, known_hosts
    try:
        yield url
    finally:
        mp.undo()
        dbmod.dispose_engines()


def test_smoke_runs_green_on_the_virtual_lab_and_writes_junit(lab_env, tmp_path):
    out = tmp_path / "smoke.xml"
    res = runner.invoke(
        app,
        [
            "play",
            str(PLAYBOOKS / "smoke.yaml"),
            "--limit",
            "s25,orin-agx",
            "--junit",
            str(out),
            "--json",
            "--var",
            "vla_requests=5",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["ok"] and {j["device"] for j in data["jobs"]} == {"s25", "orin-agx"}
    for job in data["jobs"]:
        assert job["virtual"] is True and job["facts_hash"]
        kinds = [s["kind"] for s in job["steps"]]
        assert kinds == ["probe", "bench", "gate", "bench", "gate", "stop"]
        assert all(s["status"] == "passed" for s in job["steps"]), job["steps"]
        assert len(job["runs"]) == 2  # the TTS and the VLA run, stored
    root = ET.parse(out).getroot()
    assert root.get("failures") == "0" and root.get("errors") == "0" and int(root.get("tests")) == 12
    suite = root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert len(props["facts_hash"]) == 64 and props["virtual"] == "true" and props["edgelab_version"]
    # the runs are in the store, marked virtual, with real audio/action figures
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.runs import get_run, get_summary

    with session_scope(get_engine(lab_env), write=False) as s:
        for job in data["jobs"]:
            tts, vla = job["runs"]
            assert get_run(s, tts).virtual and get_run(s, tts).state == "finished"
            assert get_summary(s, tts).metrics["audio"]["ttfa_ms"]["count"] == 2
            assert get_summary(s, vla).metrics["action"]["chunks"] >= 5


def test_a_failing_gate_exits_1_with_a_failing_junit_case(lab_env, tmp_path):
    pb = tmp_path / "strict.yaml"
    pb.write_text(
        "name: strict\ndevices: [s24]\nsteps:\n"
        "  - probe: {}\n"
        "  - bench: {workload: tts, requests: 1, frames: 12, frames_per_s: 0}\n"
        "  - gate: ['ttfa.p95 < 0.001ms']\n"
        "  - {probe: {}, name: after}\n"
        "cleanup:\n  - stop: {}\n"
    )
    out = tmp_path / "strict.xml"
    res = runner.invoke(app, ["play", str(pb), "--junit", str(out)])
    assert res.exit_code == 1, res.output
    assert "test 1" in res.stdout
    root = ET.parse(out).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failure = cases["gate"].find("failure")
    assert failure is not None and failure.get("type") == "test" and "ttfa.p95" in failure.get("message")
    assert (
        cases["probe"].find("skipped") is None and cases["after"].find("skipped") is not None
    )  # steps after a failure are skipped
    assert cases["cleanup: stop"].find("failure") is None  # cleanup still ran


def test_unreachable_device_is_an_infra_error_not_a_test_failure(lab_env, tmp_path):
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import add_device
    from edgelab.store.models import Device

    with session_scope(get_engine(lab_env)) as s:
        add_device(
            s,
            Device(
                name="gone",
                transport="adb",
                adb_serial="127.0.0.1:1",
                adb_server="127.0.0.1:1",
                shell="toybox",
                virtual=True,
            ),
        )
    pb = tmp_path / "one.yaml"
    pb.write_text("name: one\ndevices: [gone]\nsteps:\n  - bench: {workload: vla, requests: 2}\n")
    out = tmp_path / "one.xml"
    res = runner.invoke(app, ["play", str(pb), "--junit", str(out)])
    assert res.exit_code == 1, res.output
    err = next(ET.parse(out).getroot().iter("error"))
    assert err.get("type") in ("infra", "device")


def test_malformed_playbook_exits_2_naming_file_and_line(lab_env, tmp_path):
    pb = tmp_path / "bad.yaml"
    pb.write_text("name: bad\ndevices: [all]\nsteps:\n  - probe: {}\n  - bench:\n      wrkload: tts\n")
    res = runner.invoke(app, ["play", str(pb)])
    assert res.exit_code == 2
    first = res.stderr.strip().splitlines()[0]
    assert f"{pb}:6:" in first and "wrkload" in first


def test_dry_run_lists_jobs_and_limit_must_name_selected_devices(lab_env):
    res = runner.invoke(app, ["play", str(PLAYBOOKS / "qwen3-tts-qualification.yaml"), "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    jobs = json.loads(res.stdout)["jobs"]
    assert {j["device"] for j in jobs} == {
        "s25",
        "s24",
        "s24-locked",
        "rb3g2",
        "sa8775p",
        "orin-agx",
        "orin-nano",
        "thor",
    }
    assert all(j["pipeline"] == "qwen3-tts-0.6b" for j in jobs)
    res = runner.invoke(
        app, ["play", str(PLAYBOOKS / "qwen3-tts-qualification.yaml"), "--limit", "xelite-pc"]
    )
    assert res.exit_code == 2 and "does not select" in res.stderr


def test_bench_step_goes_through_the_protocol_and_records_its_provenance(lab_env, tmp_path):
    """The step is edgelab.bench's single_request_batch1_v1: warm-up + measured requests, VLA ticks."""
    pb = tmp_path / "proto.yaml"
    pb.write_text(
        "name: proto\ndevices: [orin-nano]\nsteps:\n  - probe: {}\n"
        "  - bench: {workload: tts, warmup: 1, requests: 2, band: short, frames: 6, frames_per_s: 0}\n"
        "    id: t\n"
        "  - bench: {workload: vla, warmup: 1, requests: 4, control_hz: 20, slow_every: 2, slow_ms: 80}\n"
        "    id: v\n"
        "  - gate: {run: v, checks: ['deadline_misses >= 1', 'action_chunks == 4']}\n"
    )
    res = runner.invoke(app, ["play", str(pb), "--json"])
    assert res.exit_code == 0, res.output
    job = json.loads(res.stdout)["jobs"][0]
    tts, vla = job["steps"][1], job["steps"][2]
    assert tts["details"]["protocol"] == "single_request_batch1_v1"
    prov = tts["details"]["provenance"]
    assert (
        prov["virtual"] is True and prov["runtime"] == "reference" and prov["facts_hash"] == job["facts_hash"]
    )
    assert "--warmup 1 --requests 2" in prov["command"]
    assert tts["details"]["summary"]["requests"]["by_phase"] == {"warmup": 1, "measured": 2}
    assert (
        "--control-hz 20 --steps 5 --warmup 1 --slow-every 2 --slow-ms 80"
        in vla["details"]["provenance"]["command"]
    )
    # every chunk the bench announced is a request: 1 warm-up + 4 measured (the gate counts the measured)
    assert vla["details"]["summary"]["requests"]["by_phase"] == {"warmup": 1, "measured": 4}
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.runs import get_run

    with session_scope(get_engine(lab_env), write=False) as s:
        assert get_run(s, tts["run_id"]).kind == "bench" and get_run(s, tts["run_id"]).meta["clock"]


def test_bench_step_timeout_stops_the_run_as_an_infra_failure(lab_env, tmp_path):
    pb = tmp_path / "slow.yaml"
    pb.write_text(
        "name: slow\ndevices: [orin-agx]\nsteps:\n  - probe: {}\n"
        "  - bench: {workload: vla, warmup: 0, requests: 10000, control_hz: 10}\n    timeout: 3\n"
    )
    res = runner.invoke(app, ["play", str(pb), "--json"])
    assert res.exit_code == 1, res.output
    step = json.loads(res.stdout)["jobs"][0]["steps"][1]
    assert step["status"] == "failed" and step["category"] == "infra" and "timeout" in step["message"]
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.runs import get_run

    with session_scope(get_engine(lab_env), write=False) as s:
        assert get_run(s, step["run_id"]).state == "stopped"


def test_bench_without_a_probe_snapshot_says_to_probe_first(lab_env, tmp_path):
    pb = tmp_path / "noprobe.yaml"
    pb.write_text("name: noprobe\ndevices: [sa8775p]\nsteps:\n  - bench: {workload: tts, requests: 1}\n")
    res = runner.invoke(app, ["play", str(pb), "--json"])
    assert res.exit_code == 1, res.output
    step = json.loads(res.stdout)["jobs"][0]["steps"][0]
    assert step["category"] == "infra" and "probe" in step["message"]


def test_a_device_without_the_interpreter_is_a_device_failure_with_the_reason(lab_env, tmp_path, monkeypatch):
    """The reference plan names the lab's interpreter; a device lacking it (here: a path that exists
    nowhere) cannot start the workload: a `device` failure that says so, POSIX and PowerShell alike."""
    import sys

    pb = tmp_path / "nopy.yaml"
    pb.write_text(
        "name: nopy\ndevices: [orin-agx, xelite-pc]\nsteps:\n  - probe: {}\n"
        "  - bench: {workload: vla, requests: 2}\n"
    )
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python3"))
    res = runner.invoke(app, ["play", str(pb), "--json"])
    assert res.exit_code == 1, res.output
    for job in json.loads(res.stdout)["jobs"]:
        step = job["steps"][1]
        assert step["status"] == "failed" and step["category"] == "device", step
        assert (
            "could not start" in step["message"] and "no-such-python3" in step["message"] and step["run_id"]
        )
