# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""S4 honesty: a deploy whose server does not answer is refused before anything is reserved or
started, naming the address and the remedy; stage lines say placement in words, "fallback" only
when the runtime fell back."""

from __future__ import annotations

import socket

import pytest
from sqlmodel import select

from deploy.test_deploy_helpers import deploy_lab  # noqa: F401 - fixture
from edgelab.deploy import launch, placement
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec, StagePlan
from edgelab.deploy.planning import DeployRequest
from edgelab.errors import Refusal, TransportError
from edgelab.labels import placement_line
from edgelab.protocols.check import check_server
from edgelab.protocols.speech_ws import ServerOptions, SpeechServer
from edgelab.store.db import session_scope
from edgelab.store.deployments import Deployment, list_attempts


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # bound, never listened, closed: nothing answers there


def test_s4_with_nothing_listening_is_refused_with_the_address_and_the_remedy(deploy_lab):
    _url, engine, opts = deploy_lab
    url = f"ws://127.0.0.1:{_closed_port()}"
    with pytest.raises(Refusal) as got:
        launch.deploy(engine, DeployRequest("s25", "qwen3-tts", strategy="S4", endpoint=url), opts=opts)
    r = got.value
    assert r.code == "endpoint_unreachable" and url in r.detail
    assert "python -m edgelab.protocols serve speech" in r.remedy
    with session_scope(engine, write=False) as s:
        assert list_attempts(s, "s25")[0].code == "endpoint_unreachable"
        assert not s.exec(select(Deployment).where(Deployment.strategy == "S4")).all()  # nothing started


def test_the_check_takes_a_speech_server_and_refuses_a_non_speech_one():
    srv = SpeechServer(ServerOptions(frames_per_s=None), port=0).start()
    try:
        assert "session.config taken" in check_server(srv.url, kind="tts")
    finally:
        srv.stop()
    with socket.socket() as listener:  # a TCP server that is no WebSocket
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(TransportError):
            check_server(f"ws://127.0.0.1:{port}", kind="tts", timeout=1.0)


def _plan(planned: str) -> ExecutionPlan:
    return ExecutionPlan(
        pipeline="internvla-a1",
        device="d",
        strategy="S3",
        runtime="mnn",
        reason="",
        stages=[StagePlan("action_head", "action_head", "mnn", "opencl", planned, [], "controller")],
        processes=[ProcessSpec("controller", [], placement="events")],
        memory={},
    )


@pytest.mark.parametrize(
    ("planned", "report", "line"),
    [
        ("cpu", {"observed": "cpu", "fallback": False}, "action_head: planned cpu, ran on cpu"),
        ("gpu", {"observed": "cpu", "fallback": True}, "action_head: planned gpu, ran on cpu FALLBACK"),
    ],
)
def test_stage_lines_are_words_and_fallback_only_when_true(planned, report, line):
    import json

    event = json.dumps(
        {"kind": "run.start", "meta": {"placement": {"action_head": {"runtime": "mnn", **report}}}}
    )
    (pl,) = placement.observe(_plan(planned), {"controller": [event]})
    assert pl["observed"] == report["observed"] and pl["fallback"] is report["fallback"]
    assert placement_line(pl) == line
