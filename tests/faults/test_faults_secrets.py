# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""Planted secrets: a password (and a query token) in every input that takes a URL, then a grep.

The lab-side speech server here demands HTTP Basic credentials (``EDGELAB_SERVE_AUTH``), so a run
that measures anything proves the secret reached the client that connects; a refused run without
them proves the server checks (S4's lab-side server check before a deploy, too). Every command is the real CLI at ``--log-level debug``. Afterwards
the password, the token and their Basic-auth encoding must appear nowhere: not in the database
(its file and WAL), not in any command's stdout or stderr (errors, logs, ``runs show``, ``runs
export``, ``logs``, ``play --json``), not in the JUnit file, not in the devices' run directories,
and not on any process's command line while the S4 deployments run on the devices.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from deploy.test_deploy_helpers import cli_env, deploy_lab  # noqa: F401 - fixture

pytestmark = [pytest.mark.ssh, pytest.mark.adb, pytest.mark.slow]

CLI = [sys.executable, "-c", "from edgelab.cli import main; main()"]
SECRET = f"Pw-{uuid.uuid4().hex[:12]}"
TOKEN = f"Tk-{uuid.uuid4().hex[:12]}"
USER = "planter"
NEEDLES = (SECRET, TOKEN, base64.b64encode(f"{USER}:{SECRET}".encode()).decode())


@pytest.fixture(scope="module")
def guarded_server():
    """The reference speech (codec-token) server requiring ``planter:SECRET``; yields host:port."""
    env = {**os.environ, "EDGELAB_SERVE_AUTH": f"{USER}:{SECRET}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgelab.protocols", "serve", "speech", "--frames-per-s", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        yield url.split("//", 1)[1].split("/", 1)[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _found(blob: bytes | str) -> list[str]:
    data = blob.encode() if isinstance(blob, str) else blob
    return [n for n in NEEDLES if n.encode() in data]


def _cmdlines_with_secrets() -> list[str]:
    """Every process on the lab host (virtual devices run here) whose command line holds a needle."""
    out = []
    for p in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            raw = p.read_bytes()
        except OSError:
            continue
        if _found(raw):
            shown = raw.replace(bytes(1), b" ")[:200]
            out.append(f"{p.parent.name}: {shown!r}")
    return out


def test_no_planted_secret_leaves_the_operator(
    deploy_lab, ssh_lab, adb_lab, guarded_server, tmp_path, fault_figures
):
    url, engine, _opts = deploy_lab
    env = {**cli_env(url, ssh_lab), "EDGELAB_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    good = f"ws://{USER}:{SECRET}@{guarded_server}/v1/audio/speech/stream?token={TOKEN}"
    outputs: list[tuple[str, str]] = []  # (what, text) of every command
    failures: list[str] = []

    def cli(*args: str, expect: int | None = 0, timeout: float = 240) -> subprocess.CompletedProcess:
        res = subprocess.run(
            [*CLI, "--log-level", "debug", *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        outputs.append((" ".join(args), res.stdout + res.stderr))
        if expect is not None and res.returncode != expect:
            failures.append(f"{args}: exit {res.returncode} (wanted {expect}): {res.stderr[-600:]}")
        # a crash is edgelab's own "internal error"; at debug level a library's log record may
        # carry a traceback of an expected failure (websockets' "error while receiving data")
        if "this is a bug in edgelab" in res.stderr:
            failures.append(f"{args}: internal error: {res.stderr[-600:]}")
        return res

    # the server checks: without the credentials nothing is measured
    cli(
        "bench",
        "qwen3-tts",
        "--endpoint",
        f"ws://{guarded_server}",
        "--warmup",
        "0",
        "--requests",
        "1",
        expect=1,
    )
    # 1. bench --endpoint with a password and a token: measured, so the secret reached the client
    res = cli(
        "bench",
        "qwen3-tts",
        "--endpoint",
        good,
        "--device",
        "s25",
        "--warmup",
        "0",
        "--requests",
        "2",
        "--json",
    )
    bench_run = json.loads(res.stdout)["run"] if res.returncode == 0 else None
    if bench_run:
        rep = json.loads(res.stdout)
        assert rep["requests"]["failed"] == 0, rep["requests"]
        assert f"{USER}:***@" in rep["endpoint"]["url"] and "token=***" in rep["endpoint"]["url"]
    # 2. error paths: nothing listens there / the wrong protocol; the URL is in the error, masked
    res = cli(
        "bench", "qwen3-tts", "--endpoint", f"ws://{USER}:{SECRET}@127.0.0.1:9/?token={TOKEN}", expect=1
    )
    assert f"{USER}:***@127.0.0.1:9" in res.stderr, res.stderr
    cli("bench", "spark-x2.5", "--endpoint", f"http://{USER}:{SECRET}@127.0.0.1:9", expect=1)
    debug = subprocess.run(  # --debug: the traceback itself, masked
        [*CLI, "--debug", "bench", "qwen3-tts", "--endpoint", f"ws://{USER}:{SECRET}@127.0.0.1:9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outputs.append(("--debug bench", debug.stdout + debug.stderr))
    assert "Traceback" in debug.stderr and f"{USER}:***@" in debug.stderr
    cli("bench", "qwen3-tts", "--endpoint", f"ws://{USER}:{SECRET}@[::1", expect=2)  # not a URL
    cli("--db", f"postgresql+psycopg://{USER}:{SECRET}@127.0.0.1:9/lab", "ps", expect=None)
    # 3. deploy S4 on an ADB and an SSH device: the device stage connects with the secret
    cli(
        "deploy",
        "qwen3-tts",
        "--device",
        "s25",
        "--strategy",
        "S4",
        "--endpoint",
        good,
        "--dry-run",
        "--json",
    )
    # S4's lab-side server check (before anything is reserved) connects with the credentials: it
    # is refused without them, and where nothing listens its refusal names the address masked
    res = cli(
        "deploy",
        "qwen3-tts",
        "--device",
        "s25",
        "--strategy",
        "S4",
        "--endpoint",
        f"ws://{guarded_server}",
        expect=1,
    )
    assert "does not answer" in res.stderr, res.stderr
    res = cli(
        "deploy",
        "qwen3-tts",
        "--device",
        "orin-agx",
        "--strategy",
        "S4",
        "--endpoint",
        f"ws://{USER}:{SECRET}@127.0.0.1:9/?token={TOKEN}",
        expect=1,
    )
    assert f"{USER}:***@127.0.0.1:9" in res.stderr and "does not answer" in res.stderr, res.stderr
    runs = {}
    for device in ("s25", "orin-agx"):
        res = cli("deploy", "qwen3-tts", "--device", device, "--strategy", "S4", "--endpoint", good, "--json")
        if res.returncode == 0:
            runs[device] = json.loads(res.stdout)["run"]
    on_cmdlines = _cmdlines_with_secrets()
    try:
        for device, run in runs.items():  # frames decoded on the device: its client had the secret
            deadline, decoded = time.monotonic() + 90, False
            while time.monotonic() < deadline and not decoded:
                show = subprocess.run(
                    [*CLI, "runs", "show", run, "--json"], env=env, capture_output=True, text=True, timeout=60
                )
                summary = json.loads(show.stdout).get("live") or json.loads(show.stdout).get("summary") or {}
                decoded = bool(((summary.get("audio") or {}).get("ttfa_ms") or {}).get("count"))
                time.sleep(0.5)
            if not decoded:
                failures.append(f"S4 on {device}: no audio decoded (did the device stage get the secret?)")
            on_cmdlines += _cmdlines_with_secrets()
            cli("ps", "--json")
            cli("runs", "show", run)
            cli("logs", run)
            cli("logs", run, "--stderr")
    finally:
        for run in runs.values():
            cli("stop", run, "--json")
    for run in runs.values():
        cli("runs", "show", run)
        cli("runs", "show", run, "--json")
        cli("runs", "export", run, "--samples")
        cli("logs", run)
    if bench_run:
        cli("runs", "show", bench_run)
        cli("runs", "export", bench_run)
    cli("runs", "ls", "--json")
    # 4. a playbook's endpoint: the play's output, its --json and its JUnit file
    book = tmp_path / "secret.yaml"
    book.write_text(
        "name: secrets\ndevices: [s25]\nsteps:\n"
        f"  - name: external server\n    bench:\n      workload: tts\n      endpoint: {good}\n"
        "      warmup: 0\n      requests: 1\n"
        f"  - name: unreachable server\n    bench:\n      workload: tts\n"
        f"      endpoint: ws://{USER}:{SECRET}@127.0.0.1:9\n      warmup: 0\n      requests: 1\n"
    )
    junit = tmp_path / "secret.xml"
    cli("play", str(book), "--dry-run", "--json")
    res = cli("play", str(book), "--junit", str(junit), "--json", expect=1)  # the second step fails
    if res.returncode == 1:
        steps = [s for j in json.loads(res.stdout)["jobs"] for s in j["steps"]]
        assert [s["status"] for s in steps] == ["passed", "failed"], steps
    # the grep: every output, the database, the JUnit file, the devices' run directories
    places: dict[str, list[str]] = {}
    for what, text in outputs:
        if hits := _found(text):
            places[f"output of {what}"] = hits
    db_file = Path(url.removeprefix("sqlite:///"))
    for f in [db_file, *db_file.parent.glob(db_file.name + "-*"), junit]:
        if f.is_file() and (hits := _found(f.read_bytes())):
            places[str(f)] = hits
    for root in (Path(ssh_lab.state_dir), Path(adb_lab.state_dir), tmp_path):
        for f in root.rglob("*"):
            try:
                if f.is_file() and not f.is_symlink() and f.stat().st_size < (64 << 20):
                    if (hits := _found(f.read_bytes())) and f != book:
                        places[str(f)] = hits
            except OSError:
                continue
    for line in on_cmdlines:
        places[f"process command line {line}"] = ["cmdline"]
    secrets = len(places)
    fault_figures["planted secrets"].add(trials=len(outputs), failures=len(failures), secrets=secrets)
    print(f"planted secrets: trials {len(outputs)}, failures {len(failures)}, secrets found {secrets}")
    assert not failures, failures
    assert not places, places
