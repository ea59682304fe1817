# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""A follower that dies is noticed and replaced, and ``stop`` loses no chunk the device wrote.

The reference TTS runs on s25 (ADB) and orin-agx (SSH) with the detached follower ``deploy``
starts. The follower is killed (SIGKILL, then SIGINT of its replacement): the next ``ps`` finds it
gone by its pid, host and start time and starts one that resumes from the stored log offset. Then
the follower is killed once more and the run stopped while nobody follows it: ``stop`` reads the
device's log to its end, so the audio chunks stored equal the ``audio.chunk`` lines on the device,
request by request, none twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from deploy.test_deploy_helpers import alive_on_host, cli_env, deploy_lab  # noqa: F401 - fixture

from edgelab.deploy import remote
from edgelab.metrics import events as ev
from edgelab.store.db import session_scope
from edgelab.store.deployments import get_deployment, processes
from edgelab.store.devices import get_device
from edgelab.store.runs import get_run, samples_of
from edgelab.transport import open_transport

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]
CLI = [sys.executable, "-c", "from edgelab.cli import main; main()"]


def _cli(env, *args, timeout=240):
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _lease(engine, run) -> dict:
    with session_scope(engine, write=False) as s:
        return dict(get_run(s, run).meta.get("follower") or {})


def _wait(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout  # a hang guard, not a figure
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return bool(pred())


def _following(engine, run, not_pid: int | None = None) -> int | None:
    """The pid of a live follower holding the lease and moving the offset (not ``not_pid``)."""
    f = _lease(engine, run)
    pid = f.get("pid")
    if pid and pid != not_pid and alive_on_host(pid) and f.get("offset") and not f.get("done"):
        return pid
    return None


def _device_chunks(engine, opts, run) -> Counter:
    """(request, idx) of every audio.chunk line the device's process wrote to its stdout.log."""
    with session_scope(engine, write=False) as s:
        dep = get_deployment(s, run)
        rows = processes(s, dep.pk)
        endpoint = get_device(s, dep.device_name).endpoint()
    t = open_transport(endpoint, **opts.transport)
    try:
        text = "".join(remote.read_from(t, f"{r.workdir}/stdout.log", 0, 256 << 20) for r in rows)
    finally:
        t.close()
    return Counter(
        (e.request, e.idx) for e in ev.decode_lines(text.splitlines()) if isinstance(e, ev.AudioChunk)
    )


def _stored_chunks(engine, run) -> Counter:
    with session_scope(engine, write=False) as s:
        return Counter((x.request, x.idx) for x in samples_of(s, run, kind="audio"))


@pytest.mark.parametrize("device", ["s25", "orin-agx"])
def test_a_dead_follower_is_replaced_and_stop_stores_every_chunk(deploy_lab, ssh_lab, device, fault_figures):
    url, engine, opts = deploy_lab
    env = {**cli_env(url, ssh_lab), "COLUMNS": "300"}
    failures: list[str] = []
    res = _cli(env, "deploy", "qwen3-tts", "--device", device, "--json")
    assert res.returncode == 0, res.stderr
    run = json.loads(res.stdout)["run"]
    try:
        assert _wait(lambda: _following(engine, run), 60), _lease(engine, run)
        for sig in (signal.SIGKILL, signal.SIGINT):
            dead = _following(engine, run)
            os.kill(dead, sig)
            assert _wait(lambda d=dead: not alive_on_host(d), 30)
            offset = _lease(engine, run).get("offset", 0)
            time.sleep(1.5)  # the device writes on while nobody follows
            ps = _cli(env, "ps")
            if "started a new one" not in ps.stderr:
                failures.append(f"ps after {sig.name}: no new follower: {ps.stderr[-300:]}")
            new = _wait(
                lambda d=dead, o=offset: _following(engine, run, d) and _lease(engine, run)["offset"] > o, 60
            )
            if not new:
                failures.append(f"no follower resumed after {sig.name}: {_lease(engine, run)}")
        # once more, and the run stopped while nobody follows it
        dead = _following(engine, run)
        os.kill(dead, signal.SIGKILL)
        assert _wait(lambda: not alive_on_host(dead), 30)
        time.sleep(1.5)
    finally:
        stop = _cli(env, "stop", run, "--json")
    assert stop.returncode == 0, stop.stderr
    device_chunks, stored = _device_chunks(engine, opts, run), _stored_chunks(engine, run)
    lost = sum((device_chunks - stored).values())
    twice = sum(n - 1 for n in stored.values() if n > 1)
    lease = _lease(engine, run)
    if not lease.get("done"):
        failures.append(f"the run's log was not read to its end: {lease}")
    with session_scope(engine, write=False) as s:
        final = get_run(s, run).state
    fault_figures["dead followers"].add(trials=3, failures=len(failures), rows_lost=lost + twice)
    print(
        f"dead followers on {device}: {sum(device_chunks.values())} chunks on the device, "
        f"{sum(stored.values())} stored, {lost} lost, {twice} twice; run {final}"
    )
    assert not failures, failures
    assert sum(device_chunks.values()) > 0 and lost == 0 and twice == 0 and final == "stopped", (
        device_chunks - stored,
        lease,
    )
    assert sum(device_chunks.values()) > 0 and lost == 0 and twice == 0 and final == "stopped"
