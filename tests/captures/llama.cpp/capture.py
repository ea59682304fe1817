"""Re-make the captures in this folder from a real llama.cpp build (see SOURCES.md).

    python tests/captures/llama.cpp/capture.py BIN_DIR TINY.gguf BIG.gguf

Starts llama-server on 127.0.0.1 (a free port), records /health from the first refused
connection to 200, the raw SSE bytes of /completion and /v1/chat/completions, /metrics, and
runs llama-completion and llama-bench; stops the server by its PID.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(bin_dir: str, model: str, big: str) -> int:
    b = Path(bin_dir)
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    res = subprocess.run(
        [
            str(b / "llama-completion"),
            "-m",
            model,
            "-n",
            "8",
            "-p",
            "hi",
            "-t",
            "1",
            "-no-cnv",
            "--temp",
            "0",
            "-lv",
            "4",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    (HERE / "completion.stderr").write_text(res.stderr)
    res = subprocess.run(
        [
            str(b / "llama-completion"),
            "-m",
            model,
            "-n",
            "8",
            "-p",
            "hi",
            "-t",
            "1",
            "-no-cnv",
            "--temp",
            "0",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    (HERE / "completion_default.stderr").write_text(res.stderr)
    for fmt in ("json", "jsonl"):
        res = subprocess.run(
            [str(b / "llama-bench"), "-m", model, "-p", "16", "-n", "8", "-r", "2", "-t", "1", "-o", fmt],
            capture_output=True,
            text=True,
            env=env,
        )
        (HERE / f"bench.{fmt}").write_text(res.stdout)
    for metrics in (True, False):
        port = free_port()
        # the big model loads slowly enough to see /health answer 503 first; -lv 4 logs the buffers
        argv = [
            str(b / "llama-server"),
            "-m",
            big if metrics else model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-t",
            "1",
            "-c",
            "512",
        ] + (["--metrics", "-lv", "4"] if metrics else [])
        log = open(HERE / ("server.stderr" if metrics else "server_nometrics.stderr"), "w")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            seen: list[dict] = []
            deadline = time.time() + 60
            with httpx.Client(timeout=5) as c:
                while time.time() < deadline:
                    try:
                        r = c.get(base + "/health")
                        item = {"status": r.status_code, "body": r.text}
                    except httpx.TransportError as err:
                        item = {"status": None, "error": type(err).__name__}
                    if not seen or seen[-1] != item:
                        seen.append(item)
                    if item["status"] == 200:
                        break
                    time.sleep(0.002)
                if not metrics:
                    r = c.get(base + "/metrics")
                    (HERE / "metrics_disabled.txt").write_text(f"{r.status_code}\n{r.text}\n")
                    continue
                (HERE / "health.json").write_text(json.dumps(seen, indent=1) + "\n")
                body = {
                    "prompt": "hello world",
                    "n_predict": 16,
                    "stream": True,
                    "cache_prompt": False,
                    "temperature": 0,
                    "ignore_eos": True,
                }
                with c.stream("POST", base + "/completion", json=body) as r:
                    (HERE / "completion_stream.sse").write_bytes(r.read())
                chat = {
                    "messages": [{"role": "user", "content": "hello"}],
                    "max_tokens": 16,
                    "stream": True,
                    "cache_prompt": False,
                    "temperature": 0,
                }
                with c.stream("POST", base + "/v1/chat/completions", json=chat) as r:
                    (HERE / "chat_stream.sse").write_bytes(r.read())
                r = c.get(base + "/metrics")
                (HERE / "metrics.txt").write_text(r.text)
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
