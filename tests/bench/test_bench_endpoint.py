"""`edgelab bench PIPELINE --endpoint URL`: servers edgelab did not launch, measured and labelled as such.

The OpenPI case runs the real ``openpi-server`` package (``WebsocketPolicyServer``) with a small
policy of the test's own behind it; the speech case runs edgelab's lab-side vLLM-Omni protocol
server (which says in its audio.start that it is the reference runtime on random weights).
"""

from __future__ import annotations

import json
import socket
import time

import numpy as np
import pytest
from openpi_client.base_policy import BasePolicy
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.protocols.openpi import OpenPIServer
from edgelab.protocols.speech_ws import ServerOptions, SpeechServer

runner = CliRunner()


class TinyDroidPolicy(BasePolicy):
    """A linear map from a DROID observation to a 10 x 8 action chunk (7 joints + gripper)."""

    def __init__(self) -> None:
        self.w = np.random.default_rng(1).standard_normal((8, 80)).astype(np.float32)
        self.calls = 0

    def infer(self, obs: dict) -> dict:
        self.calls += 1
        state = np.concatenate([obs["observation/joint_position"], obs["observation/gripper_position"]])
        assert obs["observation/exterior_image_1_left"].shape == (224, 224, 3)
        time.sleep(0.002)
        return {"actions": (state @ self.w).reshape(10, 8)}


@pytest.fixture
def openpi_server():
    """openpi-server's WebsocketPolicyServer (edgelab's OpenPIServer runs it on a free loopback port)."""
    policy = TinyDroidPolicy()
    meta = {"model": "tiny-droid-linear", "action_dim": 8, "action_horizon": 10}
    with OpenPIServer(policy, metadata=meta) as srv:
        yield srv.port, policy


def cli(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


def test_bench_pi0_against_a_real_openpi_server_records_latency_labelled_with_the_endpoint(
    dbpath, openpi_server
):
    port, policy = openpi_server
    url = f"ws://127.0.0.1:{port}"
    res = cli(
        dbpath,
        "bench",
        "pi0",
        "--endpoint",
        url,
        "--warmup",
        "1",
        "--requests",
        "20",
        "--control-hz",
        "50",
        "--json",
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["state"] == "finished"
    lat = rep["action"]["latency_ms"]
    assert lat["count"] == 20 and 0 < lat["p50"] <= lat["p95"]  # warm-up kept out of the figures
    assert policy.calls == 21
    assert rep["endpoint"]["url"] == url and rep["endpoint"]["protocol"] == "openpi"
    assert rep["endpoint"]["reported"]["metadata"]["model"] == "tiny-droid-linear"
    assert rep["runtime"] == "external" and rep["weights"] == "unknown"  # never "reference"

    shown = json.loads(cli(dbpath, "runs", "show", rep["run"], "--json").output)
    text = json.dumps(shown)
    assert url in text and "tiny-droid-linear" in text and '"reference"' not in text


@pytest.mark.slow  # a paced speech server and a whole bench: ~14 s here
def test_bench_tts_against_a_speech_stream_endpoint_takes_the_servers_own_labels(dbpath):
    with SpeechServer(ServerOptions(frames_per_s=None)) as srv:
        res = cli(
            dbpath,
            "bench",
            "qwen3-tts-0.6b",
            "--endpoint",
            srv.url,
            "--warmup",
            "1",
            "--requests",
            "3",
            "--band",
            "medium",
            "-o",
            "split_granularity=clause",
            "--json",
        )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["requests"]["total"] == 4 and rep["requests"]["failed"] == 0
    assert rep["audio"]["ttfa_ms"]["count"] == 3
    # the lab-side server says what it is in audio.start: reference runtime, random weights
    assert rep["runtime"] == "reference" and rep["weights"] == "random"
    assert rep["endpoint"]["protocol"] == "speech-ws"
    shown = json.loads(cli(dbpath, "runs", "show", rep["run"], "--json").output)
    stages = shown["summary"]["stages_ms"]  # the medium text is two clauses: one gap per request
    assert stages["sentence_gap"]["count"] == 4 and stages["sentence0"]["count"] == 4


def test_bench_endpoint_usage_errors(dbpath):
    assert cli(dbpath, "bench", "pi0").exit_code == 2  # neither --device nor --endpoint
    res = cli(dbpath, "bench", "pi0", "--endpoint", "ftp://x")
    assert res.exit_code == 2 and "ws://" in res.output
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = cli(dbpath, "bench", "pi0", "--endpoint", f"ws://127.0.0.1:{port}")
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_a_playbook_bench_step_measures_an_endpoint(dbpath, openpi_server):
    from edgelab.playbook.runner import run_playbook
    from edgelab.playbook.schema import parse_playbook
    from edgelab.store.db import get_engine, session_scope
    from edgelab.store.devices import add_device
    from edgelab.store.models import Device
    from edgelab.store.runs import get_run

    port, _policy = openpi_server
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:
        add_device(s, Device(name="robot-pc", transport="ssh", ssh_host="127.0.0.1", ssh_port=22))
    pb = parse_playbook(
        {
            "name": "endpoint",
            "devices": ["robot-pc"],
            "steps": [
                {
                    "id": "b",
                    "bench": {
                        "pipeline": "pi0",
                        "endpoint": f"ws://127.0.0.1:{port}",
                        "requests": 20,
                        "control_hz": 50,
                        "endpoint_options": {"observation": "droid"},
                    },
                },
                {"gate": {"run": "b", "checks": ["action_latency.p95 < 5s"]}},
            ],
        },
        "test.yaml",
    )
    res = run_playbook(engine, pb)
    (job,) = res.jobs
    assert job.ok, [(st.name, st.message) for st in job.steps]
    with session_scope(engine, write=False) as s:
        run = get_run(s, job.steps[0].run_id)
        assert run.provenance["endpoint"]["url"] == f"ws://127.0.0.1:{port}" and run.device_name == "robot-pc"
        assert run.runtime == "external"


def _vllm_omni_robot_handler():
    """A server speaking vLLM-Omni's robot endpoint (realtime/robot/openpi_connection.py): metadata
    first, a bare msgpack action array per observation, text "reset successful" for a reset."""
    from openpi_client import msgpack_numpy

    seen = []

    async def handler(ws) -> None:
        await ws.send(
            msgpack_numpy.packb(
                {
                    "image_resolution": (180, 320),
                    "n_external_cameras": 2,
                    "needs_wrist_camera": True,
                    "needs_stereo_camera": False,
                    "needs_session_id": True,
                    "action_space": "joint_position",
                }
            )
        )
        async for raw in ws:
            obs = msgpack_numpy.unpackb(raw)
            if obs.pop("endpoint", "infer") == "reset":
                await ws.send("reset successful")
                continue
            seen.append(obs)
            state = np.concatenate([obs["observation/joint_position"], obs["observation/gripper_position"]])
            await ws.send(msgpack_numpy.packb(np.tile(state, (24, 1)).astype(np.float32)))

    return handler, seen


def test_bench_pi0_against_a_vllm_omni_shaped_robot_endpoint(dbpath):
    from edgelab.protocols.openpi import OpenPIClient
    from edgelab.protocols.serving import BackgroundServer

    handler, seen = _vllm_omni_robot_handler()
    with BackgroundServer(handler) as srv:
        with OpenPIClient(srv.url) as c:  # the reset answer is text, not msgpack: accepted
            c.reset()
        res = cli(
            dbpath,
            "bench",
            "pi0",
            "--endpoint",
            srv.url,
            "--warmup",
            "1",
            "--requests",
            "20",
            "--control-hz",
            "50",
            "--json",
        )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["action"]["latency_ms"]["count"] == 20 and rep["action"]["chunks"] == 20
    assert rep["endpoint"]["reported"]["metadata"]["action_space"] == "joint_position"
    obs = seen[0]  # the observation follows what the server's metadata asked for
    assert obs["observation/exterior_image_1_left"].shape == (180, 320, 3) and obs["session_id"]
    assert "observation/exterior_image_2_left" in obs and "observation/wrist_image_left" in obs


@pytest.mark.slow
def test_bench_a_text_lm_against_a_real_llama_server(dbpath, tmp_path, llama_build):
    """llama-server (the llama.cpp build from edgelab's build cache) with a 4M random GGUF on a free
    loopback port: TTFT / decode tokens/s measured, labelled with the endpoint and its own word."""
    import subprocess

    from edgelab.models.synth import synth_files

    built = (
        llama_build  # the shared build fixture (tests/fixtures/llama_build.py): the cache, built when missing
    )
    model = synth_files("endpoint-test", "4M", out_dir=tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen(
        [
            str(built.products["llama-server"]),
            "-m",
            str(model.path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-c",
            "512",
            "-t",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert srv.poll() is None and time.monotonic() < deadline, "llama-server did not come up"
            time.sleep(0.2)
        res = cli(
            dbpath,
            "bench",
            "spark-x2.5",
            "--endpoint",
            f"http://127.0.0.1:{port}",
            "--warmup",
            "1",
            "--requests",
            "3",
            "--json",
        )
    finally:
        srv.terminate()
        srv.wait(30)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["requests"]["by_phase"] == {"warmup": 1, "measured": 3} and rep["requests"]["failed"] == 0
    assert rep["endpoint"]["protocol"] == "llama-server" and rep["runtime"] == "llama.cpp"
    assert rep["endpoint"]["reported"]["model"].endswith(".gguf") and rep["endpoint"]["reported"]["build"]
    shown = json.loads(cli(dbpath, "runs", "show", rep["run"], "--json").output)
    text = shown["summary"]["text"]
    assert text["ttft_ms"]["count"] == 3 and text["decode_tok_s"]["p50"] > 0
    assert shown["provenance"]["runtime_build"] == rep["endpoint"]["reported"]["build"]
