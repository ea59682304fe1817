"""The device-side SHA-256 tool choice (``transport.hashers``) against the real tools of this host:
the probe picks the fastest one that works, every tool's real output parses, anything else is
refused. The tools run in ``sh`` with PATH narrowed to the ones a test names."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from edgelab.artifacts.devstore import open_store
from edgelab.errors import ConfigError
from edgelab.transport import hashers
from edgelab.transport.local import LocalTransport

BASE_TOOLS = ("sh", "printf", "cat", "head")


def _bin(tmp_path: Path, tools: list[str], scripts: dict[str, str] | None = None) -> str:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for tool in [*BASE_TOOLS, *tools]:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"no {tool} on this host")
        (d / tool).symlink_to(found)
    for name, body in (scripts or {}).items():
        (d / name).write_text("#!/bin/sh\n" + body)
        (d / name).chmod(0o755)
    return str(d)


def _sh(script: str, path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/sh", "-c", script, "x", *args], env={"PATH": path}, capture_output=True, text=True
    )


@pytest.mark.parametrize("hasher", [hashers.OPENSSL, hashers.SHA256SUM, hashers.SHASUM], ids=lambda h: h.name)
def test_real_outputs_parse_for_files_and_pipes(hasher, tmp_path):
    tool = hasher.command.split()[0]
    path = _bin(tmp_path, [tool, "perl"] if tool == "shasum" else [tool])
    f = tmp_path / "weights with space.bin"
    f.write_bytes(os.urandom(100_003))
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    of_file = _sh(hasher.fn + 'h "$1"', path, str(f))
    assert of_file.returncode == 0, of_file.stderr
    assert hashers.parse_digest(of_file.stdout) == want
    of_pipe = _sh(hasher.fn + 'cat "$1" | h', path, str(f))
    assert hashers.parse_digest(of_pipe.stdout) == want


@pytest.mark.parametrize(
    "tools, scripts, expected",
    [
        (["openssl", "sha256sum"], {}, "openssl"),
        (["sha256sum"], {}, "sha256sum"),
        # an openssl that prints a wrong digest (a broken build, a FIPS stub) is passed over
        (
            ["sha256sum"],
            {"openssl": "echo 0000000000000000000000000000000000000000000000000000000000000000 *stdin\n"},
            "sha256sum",
        ),
        (["shasum", "perl"], {}, "shasum"),
        ([], {}, None),
    ],
    ids=["openssl-first", "sha256sum-only", "broken-openssl", "shasum-only", "none"],
)
def test_probe_picks_the_fastest_working_tool(tmp_path, tools, scripts, expected):
    res = _sh(hashers.PROBE, _bin(tmp_path, tools, scripts))
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 1
    got = hashers.parse_probe(res.stdout)
    assert (got.name if got else None) == expected


def test_an_operator_pin_is_the_only_tool_asked_for(tmp_path, monkeypatch):
    path = _bin(tmp_path, ["openssl", "sha256sum"], {})
    monkeypatch.setenv(hashers.ENV, "sha256sum")
    assert hashers.parse_probe(_sh(hashers.probe(), path).stdout) == hashers.SHA256SUM  # openssl is there
    assert hashers.fallback_fn() == hashers.fallback_fn(toybox=True) == hashers.SHA256SUM.fn
    monkeypatch.setenv(hashers.ENV, "busybox sha256sum, shasum")
    assert [h.name for h in hashers.candidates()] == ["busybox sha256sum", "shasum"]
    assert hashers.parse_probe(_sh(hashers.probe(), path).stdout) is None  # neither is there: none
    monkeypatch.setenv(hashers.ENV, "md5sum")
    with pytest.raises(ConfigError, match="'md5sum' is not a hasher") as err:
        hashers.candidates()
    assert "openssl" in err.value.remedy
    monkeypatch.delenv(hashers.ENV)
    assert hashers.probe() == hashers.PROBE and hashers.candidates() == hashers.CANDIDATES


def test_probe_rides_with_other_output():
    assert hashers.parse_probe("/home/lab\nedgelab-hasher=busybox+sha256sum\n") == hashers.BUSYBOX
    assert hashers.parse_probe("edgelab-hasher=none\n") is None
    assert hashers.parse_probe("edgelab-hasher=md5sum\n") is None  # not a candidate: never trusted
    assert hashers.parse_probe("no probe here") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "(stdin)= " + "a" * 64 + "\n",  # openssl without -r
        "A" * 64 + "  f\n",  # upper case
        "a" * 63 + "  f\n",
        "a" * 64 + "  f\n" + "b" * 64 + "  g\n",  # two files
        "sha256sum: f: No such file or directory\n",
        "a" * 64 + "\tf\n",
    ],
)
def test_anything_but_one_digest_line_is_refused(text):
    assert hashers.parse_digest(text) is None


def test_store_hashes_with_the_probed_tool(tmp_path, monkeypatch):
    store = open_store(LocalTransport(), root=str(tmp_path / "store"))
    assert store.hasher is None and "not probed" in store.hasher_name
    monkeypatch.setenv("PATH", _bin(tmp_path, ["sha256sum", "openssl"]))
    assert store.probe_hasher() == hashers.OPENSSL and store.hasher_name == "openssl"
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(70_000))
    assert store.sha256(str(f), 70_000) == hashlib.sha256(f.read_bytes()).hexdigest()
