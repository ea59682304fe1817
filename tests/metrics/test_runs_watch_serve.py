"""`edgelab watch` follows a run driven by another process; `edgelab metrics serve` answers on loopback."""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import urllib.request

import pytest

from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import create_run

CLI = [sys.executable, "-c", "from edgelab.cli import main; main()"]


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "lab.db")), tmp_path / "lab.db"
    dbmod.dispose_engines()


def _readline(proc: subprocess.Popen, limit_s: float = 60.0) -> str:
    """One stdout line, or '' if the process prints nothing for limit_s (hang guard, not a perf bound)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        return proc.stdout.readline() if sel.select(limit_s) else ""
    finally:
        sel.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_watch_in_another_process_ends_with_the_run(engine):
    eng, path = engine
    with session_scope(eng) as s:
        rid = create_run(s, pipeline="qwen3-tts", device_name="virt").id
    proc = subprocess.Popen(
        [*CLI, "--db", str(path), "watch", rid, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Ingestor(eng, rid) as ing:
            ing.feed_all(
                [
                    ev.RunStart(t=100.0),
                    ev.RequestStart(t=100.0, request="a"),
                    ev.AudioChunk(t=100.3, request="a", samples=1920),
                    ev.AudioChunk(t=100.5, request="a", samples=1920),
                    ev.RequestEnd(t=100.6, request="a"),
                ]
            )
        out, err = proc.communicate(timeout=120)  # the watcher leaves once the run is finished
    finally:
        _stop(proc)
    assert proc.returncode == 0, err
    assert "finished" in out and "p50 300.0 ms" in out  # TTFA read from the database
    assert "underruns" in out


def test_metrics_serve_on_loopback(engine):
    eng, path = engine
    with session_scope(eng) as s:
        rid = create_run(s, pipeline="internvla-a1", device_name="virt", state="running").id
    proc = subprocess.Popen(
        [*CLI, "--db", str(path), "metrics", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = _readline(proc)
        m = re.search(r"http://(127\.0\.0\.1):(\d+)/metrics", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        with urllib.request.urlopen(f"http://127.0.0.1:{m[2]}/metrics", timeout=30) as resp:
            body = resp.read().decode()
        assert f'run="{rid}"' in body and "edgelab_run_up" in body
    finally:
        _stop(proc)
    refused = subprocess.run(
        [*CLI, "--db", str(path), "metrics", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "--allow-remote" in refused.stderr
