# ruff: noqa: F811 - pytest fixtures are parameters by design
"""Windows end to end on both virtual Windows devices (real sshd, the PowerShell/cmd.exe shims):
the transport contract, a 64 MiB push cut and resumed, deploy + watch metrics + stop, stream cancel.

win-hx370-rtx5090 runs OpenSSH with DefaultShell = powershell.exe, xelite-pc with OpenSSH's
default cmd.exe, so both command-line paths are exercised. Remote processes are real processes on
the lab host; their fate is checked in its process table.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from fixtures.ssh_lab import lab_endpoint
from typer.testing import CliRunner

from deploy.test_deploy_helpers import alive_on_host
from edgelab.artifacts.devstore import WindowsStore, open_store
from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.push import BlobSpec, push_blob
from edgelab.errors import RemoteTimeout
from edgelab.sim.sshd import persona_drive
from edgelab.transport.ssh import SSHTransport

pytestmark = pytest.mark.ssh
WINDOWS = ["win-hx370-rtx5090", "xelite-pc"]
SHELLS = {"win-hx370-rtx5090": "powershell", "xelite-pc": "cmd"}
PY = sys.executable  # a virtual device's programs are the lab host's


@pytest.fixture(params=WINDOWS)
def win(request, ssh_lab):
    t = SSHTransport.connect(lab_endpoint(ssh_lab, request.param), timeout=30)
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def scratch(win, ssh_lab):
    """(Windows path, host path) of a fresh folder on the device's drive C."""
    name = f"edgelab-test-{uuid.uuid4().hex[:8]}"
    host = persona_drive(ssh_lab.state_dir, win.name) / "Users" / "edgelab" / name
    host.mkdir(parents=True)
    yield f"C:\\Users\\edgelab\\{name}", host


def _gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive_on_host(pid):
            return True
        time.sleep(0.05)
    return False


def _read_pid(path: Path, seconds: float = 10.0) -> int:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip().isdigit():
            return int(path.read_text().strip())
        time.sleep(0.05)
    raise AssertionError(f"no pid file at {path}")


# ------------------------------------------------------------------ the transport contract


def test_default_shell_is_detected(win):
    assert win.windows_shell() == SHELLS[win.name]


def test_run_keeps_stdout_stderr_and_exit_code_apart(win):
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)"
    r = win.run([PY, "-c", code], timeout=30)
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")


def test_missing_command_fails_the_powershell_way(win):
    r = win.run(["edgelab-no-such-command-xyz"], timeout=30)
    assert r.exit_code == 1
    assert "The term 'edgelab-no-such-command-xyz' is not recognized as the name of a cmdlet" in r.stderr


def test_unknown_cmdlet_fails_like_powershell(win):
    r = win.run_ps("Get-Frobnicator -Now", timeout=30)
    assert r.exit_code == 1 and "CommandNotFoundException" in r.stderr
    r = win.run_ps("'a'; exit 5", timeout=30)
    assert (r.exit_code, r.stdout) == (5, "a\n")


NASTY = [
    "a b",
    "it's",
    "\u2018curly\u2019",
    '"q"',
    "$(id)",
    "`n",
    "a;b",
    "*",
    "x\ny",
    "\\",
    "$env:PATH",
    "-n",
    "%OS%",
    "a & b",
    "^",
    "  two  spaces ",
    "",
]


def test_nasty_arguments_reach_the_device_exactly(win):
    r = win.run([PY, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *NASTY], timeout=30)
    assert r.ok, r.stderr
    assert json.loads(r.stdout) == NASTY


def test_run_timeout_kills_the_remote_process(win, scratch):
    wpath, host = scratch
    code = f"import os, time; open({str(host / 'pid')!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    with pytest.raises(RemoteTimeout):
        win.run([PY, "-c", code], timeout=2)
    assert _gone(_read_pid(host / "pid")), "the timed-out process survived"


def test_stream_yields_lines_first_before_the_end_and_cancel_kills_the_tree(win, scratch):
    _wpath, host = scratch
    proc = win.stream([PY, "-c", "print('one'); print('two'); raise SystemExit(3)"])
    assert list(proc.lines()) == ["one", "two"]
    assert proc.wait(timeout=30) == 3
    code = (
        f"import os, subprocess, time; c = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(300)']); "
        f"open({str(host / 'pids')!r}, 'w').write(f'{{os.getpid()}} {{c.pid}}'); print('started', flush=True); "
        "time.sleep(300)"
    )
    proc = win.stream([PY, "-c", code])
    assert next(proc.lines()) == "started"
    end = time.monotonic() + 10
    while not (host / "pids").exists() and time.monotonic() < end:
        time.sleep(0.05)
    leader, child = (int(x) for x in (host / "pids").read_text().split())
    assert alive_on_host(leader) and alive_on_host(child)
    proc.cancel()
    proc.cancel()  # twice is harmless
    assert _gone(leader), "the streamed process survived cancel"
    assert _gone(child), "its child survived cancel (taskkill /T kills the tree)"


def test_put_get_round_trip_over_sftp_paths(win, scratch, tmp_path):
    wpath, host = scratch
    data = os.urandom(5 * 1024 * 1024 + 17)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    remote = "/" + (wpath + "\\sub dir\\it's a blob.bin").replace(
        "\\", "/"
    )  # /C:/Users/... as OpenSSH names it
    assert win.put(src, remote) == hashlib.sha256(data).hexdigest()
    assert (host / "sub dir" / "it's a blob.bin").read_bytes() == data
    r = win.run_ps(f"(Get-FileHash -Algorithm SHA256 -LiteralPath '{wpath}\\sub dir\\it''s a blob.bin').Hash")
    assert r.stdout.strip() == hashlib.sha256(data).hexdigest().upper()
    back = tmp_path / "back.bin"
    assert win.get(remote, back) == hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ push


class MemStamps:
    def __init__(self):
        self.d = {}

    def get(self, sha):
        return self.d.get(sha)

    def put(self, sha, size, stamp):
        self.d[sha] = (size, stamp)

    def drop(self, sha):
        self.d.pop(sha, None)


def test_store_root_is_localappdata(win):
    store = open_store(win)
    assert isinstance(store, WindowsStore)
    assert store.root == "C:\\Users\\edgelab\\AppData\\Local\\edgelab\\store"


def test_push_64mib_cut_resumed_verified_and_unchanged_repush_sends_nothing(win, tmp_path, ssh_lab):
    p = tmp_path / "model.bin"
    p.write_bytes(os.urandom(64 << 20))
    blob = BlobSpec(p, sha256_path(p), 64 << 20)
    store = open_store(win)
    killed = []

    def progress(sha, done, total):
        if not killed and done >= total // 2:
            killed.append(done)
            win.paramiko_transport.close()  # the TCP connection goes away mid-upload

    stamps = MemStamps()
    t0 = time.monotonic()
    res = push_blob(store, blob, progress=progress, stamps=stamps)
    seconds = time.monotonic() - t0
    assert killed, "the upload never reached the cut"
    assert res.status == "resumed" and res.attempts == 2 and 0 < res.resumed_from <= killed[0]
    assert res.sent < blob.size + killed[0]  # the verified prefix was not sent again
    on_drive = (
        persona_drive(ssh_lab.state_dir, win.name) / "Users/edgelab/AppData/Local/edgelab/store" / blob.sha256
    )
    assert sha256_path(on_drive) == blob.sha256
    assert not on_drive.with_name(blob.sha256 + ".part").exists()
    print(f"virtual {win.name}: 64 MiB push with a cut: {64 / seconds:.1f} MiB/s (labelled virtual)")
    again = push_blob(store, blob, stamps=stamps)
    assert again.status == "present" and again.sent == 0
    fresh = push_blob(store, blob, stamps=MemStamps())  # no record: Get-FileHash on the device, nothing sent
    assert fresh.status == "verified" and fresh.sent == 0
    assert blob.sha256 in [e.name for e in store.list()]
    store.remove([store.blob(blob.sha256)])


def test_corrupt_part_restarts_from_zero(win, tmp_path, ssh_lab):
    p = tmp_path / "small.bin"
    p.write_bytes(os.urandom(3 << 20))
    blob = BlobSpec(p, sha256_path(p), 3 << 20)
    store = open_store(win)
    store.ensure()
    drive = persona_drive(ssh_lab.state_dir, win.name) / "Users/edgelab/AppData/Local/edgelab/store"
    (drive / (blob.sha256 + ".part")).write_bytes(os.urandom(1 << 20))  # a foreign prefix
    res = push_blob(store, blob)
    assert res.status == "uploaded" and res.sent == blob.size
    assert any("did not match" in n for n in res.notes)
    assert sha256_path(drive / blob.sha256) == blob.sha256
    store.remove([store.blob(blob.sha256)])


# ------------------------------------------------------------------ deploy, watch, stop


@pytest.fixture(scope="module")
def win_lab(tmp_path_factory, ssh_lab):
    from edgelab.deploy.options import Options
    from edgelab.inventory.probe import probe_devices
    from edgelab.sim.lab import LabStatus, register
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine

    url = f"sqlite:///{tmp_path_factory.mktemp('windeploy') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=None), check=False)
    engine = get_engine(url)
    outcomes = probe_devices(engine, WINDOWS, timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    yield url, engine, Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 30})
    dbmod.dispose_engines()


def _cli(url, ssh_lab, *args):
    from edgelab.cli import app

    env = {"EDGELAB_DB": url, "EDGELAB_SIM_DIR": str(ssh_lab.state_dir)}
    return CliRunner().invoke(app, list(args), env=env)


def _run_procs(ssh_lab, name: str, run: str) -> list[str]:
    """Processes inside this Windows persona that belong to the run (started in its run dir, or naming it)."""
    marker = f"EDGELAB_PERSONA_DIR={Path(ssh_lab.state_dir).resolve() / 'ssh' / 'personas' / name}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker not in env or not alive_on_host(int(entry)):
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if run in cwd or run in cmd:
            out.append(f"{entry}: {cmd[:120]} (in {cwd})")
    return out


@pytest.mark.parametrize("name", WINDOWS)
def test_deploy_watch_stop_leaves_no_process(win_lab, ssh_lab, name):
    from edgelab.store.db import session_scope
    from edgelab.store.deployments import get_deployment, processes
    from edgelab.store.runs import get_summary, samples_of

    url, engine, opts = win_lab
    res = _cli(url, ssh_lab, "deploy", "qwen3-tts", "--device", name, "--runtime", "reference", "--json")
    assert res.exit_code == 0, res.output
    dep = json.loads(res.stdout)
    run = dep["run"]
    try:
        assert dep["state"] == "running" and dep["runtime"] == "reference"
        assert dep["remote_dir"].startswith("C:\\Users\\edgelab\\.edgelab\\runs")
        with session_scope(engine, write=False) as s:
            (row,) = processes(s, get_deployment(s, run).id)
            pid = row.pid
        assert alive_on_host(pid)
        assert len(_run_procs(ssh_lab, name, run)) >= 2  # the Start-Process'd runner and the workload
        # watch: the deploy's detached follower reads stdout.log (over SFTP) into the store, live
        end = time.monotonic() + 90
        while time.monotonic() < end:
            with session_scope(engine, write=False) as s:
                audio = samples_of(s, run, kind="audio")
                live = get_summary(s, run, "live")
            if len(audio) >= 2 and live is not None:
                break
            time.sleep(0.5)
        assert len(audio) >= 2 and live is not None, "no live metrics arrived from the Windows run"
        assert live.metrics["audio"]["ttfa_ms"]["count"] >= 1
        from edgelab.deploy import control

        seen = []  # logs -f: Get-Content -Wait streams the run's stdout.log
        for line in control.log_lines(engine, run, follow=True, opts=opts):
            seen.append(json.loads(line)["kind"])
            if seen.count("audio.chunk") >= 2:
                break
        assert seen[0] == "run.start" and "audio.chunk" in seen
        frame = _cli(url, ssh_lab, "watch", run, "--once")
        assert frame.exit_code == 0, frame.output
        assert "TTFA" in frame.stdout or "ttfa" in frame.stdout.lower(), frame.stdout
    finally:
        stop = _cli(url, ssh_lab, "stop", run, "--json")
    assert stop.exit_code == 0, stop.output
    assert json.loads(stop.stdout)["state"] == "stopped"
    assert _gone(pid)
    assert _run_procs(ssh_lab, name, run) == [], "a process of the run survived the stop"
    with session_scope(engine, write=False) as s:
        logs = get_deployment(s, run).logs
    assert any(k.endswith("stdout.log") and "run.start" in v for k, v in logs.items())


# ------------------------------------------------------------------ telemetry


def test_windows_sampler_streams_samples_and_cancel_stops_it(win):
    from edgelab.metrics.wintelemetry import sample_windows

    got = list(sample_windows(win, interval_s=0.2, count=2, device=win.name))
    assert len(got) == 2
    s = got[0]
    assert s.resource.source == "windows-cim" and s.resource.device == win.name
    assert s.resource.cpu_pct is not None and s.memory["commit_limit_bytes"]
    assert s.npus and s.adapters
    assert (len(s.gpus) == 1) == (win.name == "win-hx370-rtx5090")  # nvidia-smi only where the driver is
    endless = sample_windows(win, interval_s=0.2, device=win.name)
    assert next(endless).resource.cpu_pct is not None
    endless.close()  # closes the stream: its PowerShell tree is killed (checked by the contract suite)


def test_session_job_kills_start_process_children_but_not_the_launched_run(win, scratch):
    """OpenSSH for Windows kills a session's job when its shell exits: a bare Start-Process child dies
    with the session, the launch (Win32_Process.Create outside the job) survives until stopped."""
    from edgelab.deploy import remote
    from edgelab.transport import winscripts

    line = winscripts.join_windows_args(["-c", "import time; time.sleep(300)"])
    r = win.run_ps(
        f"$p = Start-Process -FilePath {winscripts.q(PY)} -ArgumentList {winscripts.q(line)} -PassThru\n"
        "$p.Id",
        timeout=30,
    )
    assert r.ok, r.stderr
    assert _gone(int(r.stdout.strip())), "a Start-Process child outlived its SSH session's job"
    wpath, _host = scratch
    pid = remote.launch(win, wpath + "\\run", [PY, "-c", "import time; time.sleep(300)"])
    time.sleep(1.0)
    assert alive_on_host(pid) and remote.alive(win, pid)
    from edgelab.deploy import procstat

    rss, peak = procstat.memory(win, pid)  # the tree: runner PowerShell + the program
    assert rss and peak and peak >= 1 << 20
    assert remote.stop(win, pid) == 0
    assert _gone(pid)


def test_run_dir_links_runtime_files_from_the_store(win, tmp_path, ssh_lab):
    """A runtime build's files appear under their own names in the run's bin dir (hard links into the store)."""
    from edgelab.deploy.start import layout

    p = tmp_path / "llama-server.exe"
    p.write_bytes(os.urandom(1 << 16))
    blob = BlobSpec(p, sha256_path(p), 1 << 16)
    store = open_store(win)
    res = push_blob(store, blob)
    run = f"C:\\Users\\edgelab\\.edgelab\\runs\\t-{uuid.uuid4().hex[:6]}\\bin"
    layout(win, run, {"llama-server.exe": blob.sha256}, {blob.sha256: res.remote_path})
    layout(win, run, {"llama-server.exe": blob.sha256}, {blob.sha256: res.remote_path})  # again: replaced
    linked = persona_drive(ssh_lab.state_dir, win.name) / run[3:].replace("\\", "/") / "llama-server.exe"
    assert linked.read_bytes() == p.read_bytes() and linked.stat().st_nlink >= 2
    r = win.run_ps(winscripts_layout_missing(run), timeout=30)
    assert r.exit_code == 98 and "missing blob" in r.stdout


def winscripts_layout_missing(run: str) -> str:
    from edgelab.transport import winscripts

    return winscripts.layout(run, [("x.dll", "C:\\nowhere\\" + "0" * 64)])
