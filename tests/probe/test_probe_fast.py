"""What makes a probe cheap must not make it wrong: the shared read group, tegrastats taken at
once, and the POSIX sh shims of the virtual Jetson (same output as the tools they stand for)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time

from edgelab.probe.collectors import COLLECTORS, run_collector, split_sections
from edgelab.probe.collectors.base import Source
from edgelab.probe.collectors.posix import script
from edgelab.probe.collectors.sections import new_nonce
from edgelab.sim.persona_exec import persona_argv
from edgelab.sim.personas import PERSONAS_DIR
from edgelab.transport.local import LocalTransport


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_reads_share_one_group_and_a_hung_read_cuts_only_the_group(tmp_path):
    """A read that never returns (a FIFO with no writer) is cut by the group's timeout; the
    reads before it are whole, and the tools after the group still run."""
    fifo = tmp_path / "stuck"
    os.mkfifo(fifo)
    ok = tmp_path / "ok"
    ok.write_text("first\n")
    nonce = new_nonce()
    body = script(
        [
            Source("tool", "echo tool ran", None, "echo tool ran"),
            Source("ok", f"cat '{ok}'", None, f"cat '{ok}'", f"[ -r '{ok}' ]", reads=True),
            Source("stuck", f"cat '{fifo}'", None, f"cat '{fifo}'", f"[ -r '{fifo}' ]", reads=True),
            Source("never", "echo unreachable", None, "echo unreachable", reads=True),
        ],
        nonce,
        1,
    )
    assert body.count("timeout $F") == 1  # the prelude's t(); the group uses it once below
    assert body.count("t $TO sh -c") == 1
    res = LocalTransport().run(["sh", "-c", body], timeout=60)
    secs, warnings = split_sections(res.stdout, nonce)
    assert secs["ok"].output == "first\n" and secs["ok"].exit_code == 0
    assert secs["stuck"].exit_code is None  # cut off: kept, and said so
    assert "never" not in secs
    assert secs["tool"].output == "tool ran\n" and secs["tool"].exit_code == 0
    assert any("stuck" in w for w in warnings)


def test_tegrastats_first_line_is_taken_and_the_tool_killed(tmp_path, monkeypatch):
    """A tegrastats that prints once and then never exits: its line comes back with status 0
    (not the per-source timeout's 124) and the process is gone when the probe returns."""
    pidfile = tmp_path / "pid"
    shim = tmp_path / "tegrastats"
    shim.write_text(f"#!/bin/sh\necho $$ > {pidfile}\necho 'RAM 1/2MB CPU [1%@100]'\nexec sleep 600\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    try:
        col = run_collector(COLLECTORS["linux"], LocalTransport(), timeout=120, per_source_timeout=60)
        sec = col.sections["tegrastats"]
        assert sec.output == "RAM 1/2MB CPU [1%@100]\n" and sec.exit_code == 0
        assert _gone(int(pidfile.read_text()))
    finally:  # the shim's sleep is ours: never leave it behind, even when the probe failed
        if pidfile.exists() and pidfile.read_text().strip():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _in_persona(persona: str, command: str, **env: str) -> subprocess.CompletedProcess:
    argv = persona_argv(PERSONAS_DIR / persona, ["sh", "-c", command])
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def test_uname_shim_answers_every_flag_from_the_persona_data():
    u = json.loads((PERSONAS_DIR / "orin-agx/data/uname.json").read_text())
    host = "orin-agx"
    f = {
        "s": "Linux",
        "n": host,
        "r": u["release"],
        "v": u["version"],
        "m": u["machine"],
        "p": u["machine"],
        "i": u["machine"],
        "o": "GNU/Linux",
    }
    cases = {
        "": "s",
        "-a": "snrvmpio",
        "--all": "snrvmpio",
        "-r": "r",
        "-m": "m",
        "-snrm": "snrm",
        "-mrs": "srm",
        "--kernel-release --machine": "rm",
        "-n": "n",
        "-v": "v",
        "-o": "o",
        "-p -i": "pi",
    }
    script_ = "; ".join(f"uname {flags}" for flags in cases)
    r = _in_persona(host, script_)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [" ".join(f[k] for k in order) for order in cases.values()]
    bad = _in_persona(host, "uname -x")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == "uname: invalid option -- 'x'\nTry 'uname --help' for more information.\n"


def test_jetson_shims_print_their_data_files_exactly():
    data = PERSONAS_DIR / "orin-agx/data"
    r = _in_persona("orin-agx", "jetson_release -v; echo @; nvpmodel -q; echo @; lscpu")
    assert r.returncode == 0, r.stderr
    want = "@\n".join((data / n).read_text() for n in ("jetson_release.txt", "nvpmodel-q.txt", "lscpu.txt"))
    assert r.stdout == want
    refused = _in_persona("orin-agx", "nvpmodel -m 0")
    assert refused.returncode == 1 and "not emulated" in refused.stderr


def test_lscpu_shim_follows_the_locale():
    data = PERSONAS_DIR / "wsl-hx370/data"
    fr = _in_persona("wsl-hx370", "lscpu", LC_ALL="fr_FR.UTF-8")
    c = _in_persona("wsl-hx370", "lscpu", LC_ALL="C")
    assert fr.stdout == (data / "lscpu.fr.txt").read_text()
    assert c.stdout == (data / "lscpu.txt").read_text()


def test_tegrastats_shim_writes_fresh_stamped_lines_to_a_logfile(tmp_path):
    log = tmp_path / "teg.log"
    argv = persona_argv(PERSONAS_DIR / "orin-agx", ["tegrastats", "--interval", "50", "--logfile", str(log)])
    proc = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not log.exists() or log.read_text().count("\n") < 2):
            time.sleep(0.05)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    template = (PERSONAS_DIR / "orin-agx/data/tegrastats.txt").read_text().strip().split(" ", 2)[2]
    lines = log.read_text().splitlines()
    assert len(lines) >= 2
    for line in lines:
        date, clock, rest = line.split(" ", 2)
        time.strptime(f"{date} {clock}", "%m-%d-%Y %H:%M:%S")
        assert rest == template
