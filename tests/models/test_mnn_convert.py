"""MNN conversion never goes near MNN's telemetry: no pip start, no outside socket, no MNN.tools import.

The conversion runs in a child process under a *recording* audit hook (installed before anything
of MNN is imported) that writes every socket connect, subprocess start and os.system call to a
file; the test fails on any non-loopback connect, any pip start or any import of MNN.tools."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from edgelab.models import mnn_convert

pytest.importorskip("MNN")
pytest.importorskip("onnx")

RECORDER = textwrap.dedent("""
    import json, sys
    log = open(sys.argv[1], "w")
    def hook(event, args):
        if event in ("socket.connect", "socket.sendto", "socket.getaddrinfo", "subprocess.Popen", "os.system",
                     "os.exec", "os.posix_spawn"):
            log.write(json.dumps({"event": event, "args": repr(args)[:300]}) + "\\n"); log.flush()
    sys.addaudithook(hook)
    from edgelab.models.mnn_convert import main
    rc = main(sys.argv[2:])
    log.write(json.dumps({"event": "modules", "args": sorted(m for m in sys.modules if m.startswith(("MNN", "aliyun")))}) + "\\n")
    sys.exit(rc)
""")


def test_conversion_starts_no_pip_and_opens_no_outside_socket(tmp_path):
    import onnx

    from edgelab.models.stages import build

    src = tmp_path / "head.onnx"
    onnx.save(build("action-head", 0), str(src))
    log = tmp_path / "audit.jsonl"
    p = subprocess.run(
        [sys.executable, "-c", RECORDER, str(log), str(src), str(tmp_path / "head.mnn")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-800:]
    assert (tmp_path / "head.mnn").stat().st_size > 1000
    events = [json.loads(line) for line in log.read_text().splitlines()]
    for e in events:
        if e["event"] in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"):
            assert "pip" not in e["args"], e
        if e["event"] in ("socket.connect", "socket.sendto"):
            assert "127." in e["args"] or "::1" in e["args"] or "'/" in e["args"], e
        assert e["event"] != "socket.getaddrinfo", e  # no name lookups at all
    modules = next(e["args"] for e in events if e["event"] == "modules")
    assert not [m for m in modules if m.startswith(("MNN.tools", "aliyun"))], modules


def test_guard_refuses_outside_connect_pip_and_the_telemetry_import():
    class S:
        pass

    with pytest.raises(PermissionError):
        mnn_convert.guard("socket.connect", (S(), ("203.0.113.7", 443)))
    with pytest.raises(PermissionError):
        mnn_convert.guard("socket.connect", (S(), ("telemetry.example", 443)))
    mnn_convert.guard("socket.connect", (S(), ("127.0.0.1", 5000)))  # loopback is fine
    mnn_convert.guard("socket.connect", (S(), ("::1", 5000, 0, 0)))
    with pytest.raises(PermissionError):
        mnn_convert.guard(
            "subprocess.Popen",
            ("/usr/bin/pip", ["pip", "install", "-U", "aliyun-log-python-sdk"], None, None),
        )
    with pytest.raises(PermissionError):
        mnn_convert.guard("os.system", ("pip install -U aliyun-log-python-sdk",))
    with pytest.raises(PermissionError):
        mnn_convert.guard(
            "subprocess.Popen", (sys.executable, [sys.executable, "-m", "pip", "install", "x"], None, None)
        )
    with pytest.raises(PermissionError):
        mnn_convert.guard("import", ("MNN.tools.utils.log", None, [], [], []))
    mnn_convert.guard("subprocess.Popen", ("/bin/true", ["true"], None, None))


def test_the_guarded_child_fails_on_an_outside_connect(tmp_path):
    """With the guard installed, a connect to an outside address raises before any packet leaves."""
    code = (
        "import sys, socket; from edgelab.models.mnn_convert import guard; sys.addaudithook(guard)\n"
        "s = socket.socket()\n"
        "try:\n    s.connect(('203.0.113.7', 9))\nexcept PermissionError as e:\n    print('blocked', e)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "blocked" in p.stdout and "203.0.113.7" in p.stdout


def test_a_failed_conversion_is_an_edgelab_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(mnn_convert.ConvertError):
        mnn_convert.convert(bad, tmp_path / "bad.mnn")
    assert not (tmp_path / "bad.mnn").exists()
