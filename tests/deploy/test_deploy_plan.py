# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Dry runs and refusals on the virtual lab: strategy choice with reasons, early refusal, store untouched."""

from __future__ import annotations

import json

from sqlmodel import select
from typer.testing import CliRunner

from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture
from edgelab.cli import app
from edgelab.deploy.launch import deploy
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal
from edgelab.sim.adb_lab import AdbLabInfo
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, Reservation, list_attempts
from edgelab.store.runs import Run
from edgelab.transport import open_transport

runner = CliRunner()


def _cli(url, ssh_lab, *args):
    return runner.invoke(app, ["--db", url, *args], env=cli_env(url, ssh_lab))


def test_dry_run_phone_and_jetson_choose_different_strategies_and_say_why(deploy_lab, ssh_lab):
    url, _engine, _opts = deploy_lab
    phone = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--dry-run", "--json")
    orin = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "orin-agx", "--dry-run", "--json")
    assert phone.exit_code == 0, phone.output
    assert orin.exit_code == 0, orin.output
    p, o = json.loads(phone.stdout), json.loads(orin.stdout)
    assert p["plan"]["pipeline"] == o["plan"]["pipeline"] == "qwen3-tts-0.6b"
    assert p["plan"]["strategy"] == "S3" and o["plan"]["strategy"] == "S1"
    assert "android-arm64" in p["plan"]["reason"] and "S1 refused (class npu_phone" in p["plan"]["reason"]
    assert "Jetson-class CUDA" in o["plan"]["reason"]
    # Virtual devices run the reference runtime, honestly labelled.
    assert {s["placement"] for s in p["plan"]["stages"]} == {"cpu (reference, random weights)"}
    assert p["plan"]["processes"][0]["argv"][1:4] == ["-m", "edgelab.reference", "tts"]
    assert p["admission"][0]["pool"] == "ram" and p["admission"][0]["fits"]
    # The phone gets the class's ramp with a 4-frame floor; the Jetson server schedule starts at 1 frame.
    assert "4,8,16,25" in p["plan"]["processes"][0]["argv"]
    assert "server" in o["plan"]["processes"][0]["argv"]
    human = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--dry-run")
    assert "strategy S3" in human.stdout and "admission: ram:" in human.stdout


def test_s1_on_the_phone_is_refused_with_its_reason(deploy_lab, ssh_lab):
    url, _engine, _opts = deploy_lab
    res = _cli(
        url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--strategy", "S1", "--dry-run", "--json"
    )
    assert res.exit_code == 1
    refusal = json.loads(res.stdout)["refusal"]
    assert refusal["strategy"] == "S1"
    assert "class npu_phone: S1 needs vLLM-Omni on the device" in refusal["message"]
    assert json.loads(res.stdout)["plan"]["processes"][0]["argv"][1:4] == [
        "serve",
        "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
        "--omni",
    ]
    assert "eligible here: S3, S5" in refusal["remedy"]
    s2 = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "orin-agx", "--strategy", "S2", "--dry-run")
    assert s2.exit_code == 1 and "does not recommend" in s2.stderr
    s4 = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--strategy", "S4", "--dry-run")
    assert s4.exit_code == 1 and "--endpoint" in s4.stderr


def test_s4_with_an_endpoint_runs_only_the_decoder_on_the_device(deploy_lab, ssh_lab):
    url, _engine, _opts = deploy_lab
    res = _cli(
        url,
        ssh_lab,
        "deploy",
        "qwen3-tts",
        "--device",
        "s25",
        "--endpoint",
        "ws://127.0.0.1:9",
        "--dry-run",
        "--json",
    )
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)["plan"]
    assert plan["strategy"] == "S4"
    where = {s["name"]: s["placement"] for s in plan["stages"]}
    assert where["code2wav"] != "server" and where["talker"] == "server"
    s3 = json.loads(
        _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", "s25", "--dry-run", "--json").stdout
    )
    assert 0 < next(iter(plan["memory"].values())) < next(iter(s3["plan"]["memory"].values()))


def _listing(adb_lab: AdbLabInfo) -> str:
    from edgelab.transport.base import Endpoint
    from edgelab.transport.quoting import Shell

    dev = adb_lab.device("rb3g2")
    ep = Endpoint(
        name="rb3g2", kind="adb", adb_serial=dev.serial, adb_server=adb_lab.adb_server, shell=Shell.TOYBOX
    )
    with open_transport(ep) as t:
        return t.run(["sh", "-c", "ls -laR /data/local/tmp 2>&1; true"]).stdout


def test_a_plan_that_does_not_fit_is_refused_before_anything_is_pushed(deploy_lab, ssh_lab, adb_lab):
    url, engine, opts = deploy_lab
    before = _listing(adb_lab)
    try:
        deploy(engine, DeployRequest("rb3g2", "qwen3.8-27b"), opts=opts)
        raise AssertionError("a 27B model was admitted on a 6 GB board")
    except Refusal as r:
        assert r.code == "budget_exceeds_device" and r.pool == "ram"
        assert "GiB reserved +" in r.detail and "GiB requested > " in r.detail and "capacity" in r.detail
        assert r.remedy
    assert _listing(adb_lab) == before  # the device store is untouched
    with session_scope(engine, write=False) as s:
        att = list_attempts(s, "rb3g2")[0]
        assert (att.outcome, att.code, att.pool) == ("refused", "budget_exceeds_device", "ram")
        assert att.numbers["requested"] > att.numbers["capacity"]
        assert not s.exec(select(Deployment).where(Deployment.device_name == "rb3g2")).all()
        assert not s.exec(select(Run).where(Run.device_name == "rb3g2")).all()
        assert not s.exec(select(Reservation)).all() or all(
            r.released_at for r in s.exec(select(Reservation)).all()
        )
    res = _cli(url, ssh_lab, "deploy", "qwen3.8-27b", "--device", "rb3g2")
    assert res.exit_code == 1 and "budget_exceeds_device" in res.stderr and "ram:" in res.stderr
