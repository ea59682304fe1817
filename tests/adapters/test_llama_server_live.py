"""The llama-server adapter against the real llama-server of the lab's build (127.0.0.1)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading

import httpx
import pytest

from edgelab.adapters.llama_server import record_to_events, scrape_metrics, stream_completion, wait_ready
from edgelab.errors import ReadyCancelled, ServerNotReady
from edgelab.metrics import events as ev

pytestmark = pytest.mark.slow


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(build, model, *extra):
    port = _port()
    proc = subprocess.Popen(
        [
            str(build.products["llama-server"]),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-t",
            "1",
            "-c",
            "512",
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_WAIT_POLICY": "passive"},
    )
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def server(llama_build, tiny_gguf):
    proc, url = _start(llama_build, tiny_gguf, "--metrics")
    try:
        yield proc, url
    finally:
        _stop(proc)


def test_ready_then_streams_measured_on_the_lab_clock(server):
    proc, url = server
    ready = wait_ready(url, 60, alive=lambda: proc.poll() is None, interval=0.005)
    assert ready.states[-1].state == "ok" and ready.waited_s >= 0
    assert {s.state for s in ready.states} <= {"refused", "loading", "ok"}
    with httpx.Client(timeout=60) as client:
        rec = stream_completion(client, url, "hello world", 24)
        assert rec.ok, rec.error
        assert rec.tokens == 24 == rec.timings["predicted_n"] and rec.stop_type == "limit"
        assert rec.timings["cache_n"] == 0  # cache_prompt false: the whole prompt every time
        again = stream_completion(client, url, "hello world", 24)
        assert again.timings["cache_n"] == 0 and again.timings["prompt_n"] == rec.timings["prompt_n"]
        m = rec.metrics()
        # the lab sees the first token after the server processed the prompt
        assert m["ttft_ms"] >= rec.timings["prompt_ms"] * 0.9
        assert m["decode_tok_s"] > 0 and len(m["itl_all_ms"]) == 23
        assert all(c.t >= rec.submitted for c in rec.chunks) and rec.finished >= rec.chunks[-1].t
        chat = stream_completion(client, url, "hello", 12, chat=True)
        assert chat.ok, chat.error
        assert chat.tokens == chat.timings["predicted_n"] == 12 and chat.stop_type == "length"
        metrics = scrape_metrics(client, url)
        assert metrics["llamacpp:tokens_predicted_total"] == 24 + 24 + 12
    evs = record_to_events(rec, "run-x", "r1", "measured")
    assert [type(e) for e in (evs[0], evs[-1])] == [ev.RequestStart, ev.RequestEnd]
    assert sum(e.n for e in evs if isinstance(e, ev.TextToken)) == 24


def test_metrics_absent_without_the_flag_and_errors_recorded(llama_build, tiny_gguf):
    proc, url = _start(llama_build, tiny_gguf)
    try:
        wait_ready(url, 60, alive=lambda: proc.poll() is None)
        with httpx.Client(timeout=30) as client:
            assert scrape_metrics(client, url) is None
            bad = stream_completion(client, url, "x", 4, extra={"n_probs": "not a number"})
            assert not bad.ok and bad.error
    finally:
        _stop(proc)
    with httpx.Client(timeout=5) as client:
        gone = stream_completion(client, url, "x", 4)
    assert not gone.ok and "ConnectError" in gone.error


def test_wait_ready_gives_up_says_why_and_can_be_cancelled(llama_build, tmp_path):
    url = f"http://127.0.0.1:{_port()}"
    with pytest.raises(ServerNotReady, match="not ready after 0 s .last: refused"):
        wait_ready(url, 0.2)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF not really")
    proc, url = _start(llama_build, bad)
    try:
        with pytest.raises(ServerNotReady, match="exited before it was ready"):
            wait_ready(url, 60, alive=lambda: proc.poll() is None)
    finally:
        _stop(proc)
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(ReadyCancelled):
        wait_ready(f"http://127.0.0.1:{_port()}", 60, cancel)


def test_server_closes_after_a_stream_so_the_client_asks_for_it(server):
    """Upstream fact behind ``Connection: close``: llama-server ends a streamed response with the
    chunked terminator and then drops the kept-alive connection (the CI flake this fixes was a
    GET /metrics sent on that dying connection)."""
    proc, url = server
    wait_ready(url, 60, alive=lambda: proc.poll() is None)
    host, port = url.removeprefix("http://").split(":")
    body = b'{"prompt": "hi", "n_predict": 2, "stream": true}'
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(
            b"POST /completion HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        f = s.makefile("rb")
        head = b"".join(iter(f.readline, b"\r\n"))
        assert b"keep-alive" in head.lower() and b"chunked" in head.lower()  # it promised to keep it open
        while (size := int(f.readline().strip(), 16)) > 0:  # read the body chunk by chunk
            f.read(size + 2)
        assert f.readline() == b"\r\n"  # the terminator: a complete response
        assert f.read(1) == b""  # and then it closed the connection anyway
    sent = []
    with httpx.Client(timeout=60, event_hooks={"request": [sent.append]}) as client:
        for _ in range(3):
            assert stream_completion(client, url, "hi", 2, chat=True).ok
            assert scrape_metrics(client, url) is not None
    assert [r.headers.get("connection") for r in sent if r.method == "POST"] == ["close"] * 3
