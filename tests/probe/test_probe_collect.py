"""Collectors without a lab: section splitting, the real sh scripts on this host, and timeouts."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from collectors import capture as fixtures  # tests/collectors/capture.py: tests/ is on sys.path
from hypothesis import given, settings
from hypothesis import strategies as st

from edgelab.probe.collectors import COLLECTORS, family_for, parse_sections, run_collector, split_sections
from edgelab.probe.collectors.base import Source
from edgelab.probe.collectors.posix import script
from edgelab.probe.collectors.sections import begin_marker, new_nonce
from edgelab.transport.base import Endpoint
from edgelab.transport.local import LocalTransport
from edgelab.transport.quoting import Shell


def test_split_sections_exact_and_robust():
    n = "abc123"
    out = (
        "noise before\n"
        f"@@edgelab-section {n} one@@\nline1\nline2\n\n@@edgelab-end {n} one 0@@\n"
        f"@@edgelab-section {n} two@@\nno newline at end\n@@edgelab-end {n} two 3@@\r\n"
        f"@@edgelab-section other one@@\n"  # another nonce: plain content
        f"@@edgelab-section {n} three@@\npartial"
    )
    secs, warnings = split_sections(out, n)
    assert secs["one"].output == "line1\nline2\n" and secs["one"].exit_code == 0
    assert secs["two"].output == "no newline at end" and secs["two"].exit_code == 3
    assert secs["three"].output == "partial" and secs["three"].exit_code is None
    assert any("three" in w for w in warnings)
    assert split_sections("", n) == ({}, [])


def test_a_file_cannot_forge_a_marker_of_another_nonce():
    forged = f"{begin_marker('deadbeef0000', 'getprop')}\nfake\n"
    secs, _ = split_sections(
        f"@@edgelab-section n1 cpuinfo@@\n{forged}\n@@edgelab-end n1 cpuinfo 0@@\n", "n1"
    )
    assert list(secs) == ["cpuinfo"] and secs["cpuinfo"].output == forged


@settings(max_examples=25, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"), max_size=300)
)
def test_any_file_content_comes_back_exactly_through_real_sh(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("src") / "file"
    path.write_text(content, encoding="utf-8")
    nonce = new_nonce()
    body = script(
        [
            Source("src", f"cat '{path}'", None, f"cat '{path}'", f"[ -r '{path}' ]"),
            Source("gone", "cat /nonexistent", None, "cat /nonexistent", "[ -r /nonexistent ]"),
        ],
        nonce,
        5,
    )
    res = LocalTransport().run(["sh", "-c", body], timeout=30)
    secs, warnings = split_sections(res.stdout, nonce)
    assert warnings == [] and list(secs) == ["src"]
    assert secs["src"].output == content and secs["src"].exit_code == 0


def test_family_follows_transport_and_shell():
    assert family_for(Endpoint("a", "adb", adb_serial="x", shell=Shell.TOYBOX)) == "android"
    assert family_for(Endpoint("w", "ssh", ssh_host="h", shell=Shell.POWERSHELL)) == "windows"
    assert family_for(Endpoint("j", "ssh", ssh_host="h")) == "linux"
    assert family_for(Endpoint("l", "local")) == "linux"


def test_linux_collector_on_this_host_matches_proc():
    col = run_collector(COLLECTORS["linux"], LocalTransport(), timeout=60)
    assert col.exit_code == 0 and {"uname", "cpuinfo", "meminfo"} <= set(col.sections)
    with open("/proc/meminfo") as f:
        assert col.sections["meminfo"].output.split("\n")[0] == f.readline().rstrip("\n")
    facts = parse_sections(COLLECTORS["linux"], col.sections)
    assert (
        facts.os.family == "linux"
        and facts.os.arch == {"x86_64": "x86_64", "aarch64": "aarch64"}[os.uname().machine]
    )
    ram = facts.pools("ram")[0].total_bytes
    assert ram == int(open("/proc/meminfo").readline().split()[1]) * 1024
    assert facts.provenance["os.kernel"] in ("uname -a", "cat /proc/version")


def test_one_hung_source_costs_its_own_timeout_only(tmp_path, monkeypatch):
    """A tool that never returns (lscpu on a dead mount) is cut by its per-source timeout."""
    shim = tmp_path / "lscpu"
    shim.write_text("#!/bin/sh\nexec sleep 60\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    start = time.monotonic()
    col = run_collector(COLLECTORS["linux"], LocalTransport(), timeout=60, per_source_timeout=1)
    assert time.monotonic() - start < 30  # far below the 60 s the tool would take
    assert col.sections["lscpu"].exit_code == 124  # timeout's status
    assert col.sections["meminfo"].ok  # later sources still ran


def test_probe_that_hangs_is_killed_at_the_timeout(tmp_path, monkeypatch):
    """A source that ignores TERM outlives its own timeout; the probe's timeout kills the whole group."""
    from edgelab.inventory.probe import gather

    pidfile = tmp_path / "pid"
    shim = tmp_path / "nvpmodel"
    shim.write_text(f"#!/bin/sh\ntrap '' TERM\nsleep 120 &\necho $! > {pidfile}\nwait\nwait\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    got = gather(Endpoint("host", "local"), timeout=2.0)
    assert got.error is not None and "ran past" in str(got.error)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_windows_script_is_flat_statements():
    windows = COLLECTORS["windows"]
    body = windows.build_script(windows.sources, "n0", 3)
    assert "function" not in body and "@{" not in body
    assert body.count("@@edgelab-section n0 ") == body.count("@@edgelab-end n0 ") == 9


# ---------------------------------------------------------------- each source's fixtures, pyinfra style
# tests/collectors/FAMILY/SOURCE.CASE.json: the source's command and script body, an output it
# printed, and the exact facts the collector makes of it (re-made by tests/collectors/capture.py).
FIXTURES = sorted(Path(fixtures.HERE).glob("*/*.json"))
# Sources without a fixture of their own family, and why.
UNCOVERED = {
    (
        "linux",
        "cpufreq",
    ): "posix.CPUFREQ, the same source as android's (s25 fixture); no Linux persona has cpufreq",
    (
        "linux",
        "thermal",
    ): "posix.THERMAL, the same source as android's (s25 fixture); no Linux persona has zones",
    (
        "linux",
        "vllm_venvs",
    ): "no persona has a vLLM-Omni venv until `edgelab runtime install`; tests/deploy/test_s1_vllm_omni.py reads a real stamp",
}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_collector_source_fixture(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    collector = COLLECTORS[path.parent.name]
    src = collector.source(path.stem.split(".")[0])
    assert src is not None, f"{path.name}: the {collector.family} collector has no such source"
    assert (src.command, src.body) == (doc["command"], doc["body"])
    assert fixtures.fact(collector, src.name, "\n".join(doc["output"])) == doc["fact"]


def test_every_parsed_source_has_a_fixture():
    have = {(p.parent.name, p.stem.split(".")[0]) for p in FIXTURES}
    want = {(fam, s.name) for fam, c in COLLECTORS.items() for s in c.sources}
    assert want - have == set(UNCOVERED), sorted(want - have)
    assert all(
        d["fact"]
        for d in (json.loads(p.read_text(encoding="utf-8")) for p in FIXTURES)
        if d.get("persona") or d.get("corpus")
    )
