"""``python -m edgelab.protocols serve``: a real server process, reached by the clients, stopped by its PID."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np

from edgelab.protocols.openpi import OpenPIClient
from edgelab.protocols.speech_ws import SpeechStreamClient
from edgelab.reference.vla import synthetic_observation


def _serve(*args: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgelab.protocols", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"server did not start: {proc.stderr.read()}")
    return proc, json.loads(line)


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_speech_server_process():
    proc, info = _serve("speech", "--frames-per-s", "0")
    try:
        assert info["url"].startswith("ws://127.0.0.1:") and info["weights"] == "random"
        assert info["vllm_omni"] == "0131cb5 (0131cb5560450800b800e889fb849ea2c851bd3f)"
        res = SpeechStreamClient(info["url"]).synthesize("Hello from a server process.")
        assert res.ok and len(res.pcm) > 0
    finally:
        assert _stop(proc) == 0


def test_speech_server_process_follows_the_pinned_vllm_omni_version():
    proc, info = _serve("speech", "--frames-per-s", "0", "--vllm-omni-compat", "6a96e66")
    try:
        assert info["vllm_omni"] == "6a96e66 (6a96e66ea6f85ea42d3d514cf3feb1ed1a1a1ca2)"
        res = SpeechStreamClient(info["url"], compat="6a96e66").synthesize("One here. Two here.")
        assert res.ok and res.total_sentences == 2 and res.protocol == "vLLM-Omni 6a96e66"
    finally:
        assert _stop(proc) == 0


def test_openpi_server_process():
    proc, info = _serve("openpi")
    try:
        host, port = info["url"][len("ws://") :].rsplit(":", 1)
        with OpenPIClient(host, int(port)) as client:
            out = client.infer(synthetic_observation(np.random.default_rng(0)))
            assert out["actions"].shape == (50, 32)
    finally:
        assert _stop(proc) == 0


def test_refuses_a_non_loopback_address():
    r = subprocess.run(
        [sys.executable, "-m", "edgelab.protocols", "serve", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "loopback" in r.stderr
