"""Bad files and bad values at every door: one ``file:line`` line and exit 2, never a traceback.

YAML files (device catalog, pipeline specs, runtimes, playbooks), captured outputs for
``facts parse``, ssh configs with Match blocks, adb serials carrying a password, a mistyped
``--db``; and on the device side, cut pushes leave no hidden partial file and ``gc`` collects the
stale partials while it keeps one still being written.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from edgelab.catalog.devices import load_devices
from edgelab.catalog.pipelines import load_pipelines
from edgelab.catalog.yamlsrc import load_text
from edgelab.cli import app
from edgelab.errors import CatalogError
from edgelab.playbook.schema import load_playbook
from edgelab.runtimes.spec import load_runtimes

runner = CliRunner()

BAD_YAML = {
    "binary": b"\x00\x01\x02\xff\xfe" * 200,
    "latin-1": "id: caf\xe9\n".encode("latin-1"),
    "utf-16": "id: x\n".encode("utf-16"),
    "flow-deep": b"a: " + b"[" * 20000 + b"]" * 20000 + b"\n",
    "block-deep": "".join("  " * i + f"k{i}:\n" for i in range(300)).encode() + b"  " * 300 + b"x: 1\n",
    "control-char": b"id: \x07bell\n",
    "syntax": b"id: [unclosed\n",
    "huge": b"# " + b"x" * (17 << 20) + b"\n",
}
LOADERS = {
    "devices": load_devices,
    "pipelines": load_pipelines,
    "runtimes": load_runtimes,
    "playbook": load_playbook,
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_every_yaml_loader_names_file_and_line_for_bad_files(tmp_path, loader, fault_figures):
    failures = []
    for name, data in BAD_YAML.items():
        d = tmp_path / name
        d.mkdir()
        f = d / "bad.yaml"
        f.write_bytes(data)
        try:
            LOADERS[loader](f if loader == "playbook" else d)
        except CatalogError as err:
            line = str(err).splitlines()[0]
            if not line.startswith(f"{f}:") or err.exit_code != 2 or len(str(err).splitlines()) != 1:
                failures.append((name, str(err)[:200]))
        except Exception as err:  # noqa: BLE001 - what this test hunts
            failures.append((name, f"{type(err).__name__}: {err}"[:200]))
        else:
            failures.append((name, "accepted"))
    fault_figures["bad YAML files"].add(trials=len(BAD_YAML), failures=len(failures))
    assert not failures, failures


def test_a_bad_playbook_exits_2_from_the_cli(tmp_path):
    f = tmp_path / "nightly.yaml"
    f.write_bytes(BAD_YAML["latin-1"])
    res = runner.invoke(app, ["--db", str(tmp_path / "x.db"), "play", str(f)])
    assert res.exit_code == 2, res.output
    assert f"{f}:1" in res.output and "UTF-8" in res.output and "Traceback" not in res.output


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_any_text_is_yaml_or_one_catalog_error(text):
    try:
        load_text(text, "f.yaml")
    except CatalogError as err:
        assert str(err).startswith("f.yaml:")


BAD_CAPTURES = {
    "binary": os.urandom(3000).replace(b"\xff\xfe", b"..") + b"\x00",
    "latin-1": "model name\t: caf\xe9\nMemTotal: 12 kB\n".encode("latin-1"),
    "deep-json": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "deep-list": b"[" * 5000 + b"]" * 5000,
}


def test_facts_parse_refuses_what_is_no_capture_with_exit_2(tmp_path, fault_figures):
    failures = []
    for name, data in BAD_CAPTURES.items():
        f = tmp_path / name
        f.write_bytes(data)
        for extra in ([], ["--as", "getprop"], ["--json"]):
            res = runner.invoke(app, ["facts", "parse", *extra, str(f)])
            if (
                res.exit_code != 2
                or f"{f}:" not in res.stderr
                or res.exception not in (None,)
                and not isinstance(res.exception, SystemExit)
            ):
                failures.append((name, extra, res.exit_code, res.output[-200:]))
    # a PowerShell UTF-16 redirect is a capture, not binary
    f = tmp_path / "meminfo-utf16.txt"
    f.write_bytes(
        "MemTotal:       16318480 kB\nMemFree:         1234 kB\nMemAvailable:   8000000 kB\n".encode("utf-16")
    )
    res = runner.invoke(app, ["facts", "parse", "--as", "meminfo", "--json", str(f)])
    assert res.exit_code in (0, 1) and "binary" not in res.output, res.output
    fault_figures["bad facts captures"].add(trials=len(BAD_CAPTURES) * 3, failures=len(failures))
    assert not failures, failures


@pytest.mark.slow  # 100 CLI runs on random bytes: ~60 s here
@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_facts_parse_never_tracebacks_on_random_bytes(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("cap") / "capture.txt"
    f.write_bytes(data)
    res = runner.invoke(app, ["facts", "parse", str(f)])
    assert res.exit_code in (0, 1, 2) and (res.exception is None or isinstance(res.exception, SystemExit))
    assert "Traceback" not in res.output


def test_ssh_config_match_blocks_are_skipped_with_a_note_and_never_run(tmp_path):
    ran = tmp_path / "match-ran"
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"""Host alpha
  HostName 127.0.0.5
  User bob
Match exec "touch {ran}" host beta
  User evil
  Port 2200
Host beta
  HostName 127.0.0.6
Match all
  Port 2222
""")
    db = tmp_path / "lab.db"
    res = runner.invoke(app, ["--db", str(db), "device", "import", "ssh-config", "--file", str(cfg)])
    assert res.exit_code == 0, res.output
    assert (
        f"{cfg}:4: skipped the Match block" in res.stderr
        and f"{cfg}:9: skipped the Match block" in res.stderr
    )
    assert not ran.exists()  # a Match exec is never evaluated
    res = runner.invoke(app, ["--db", str(db), "device", "ls", "--json"])
    import json

    rows = {d["name"]: d for d in json.loads(res.stdout)}
    assert set(rows) == {"alpha", "beta"}
    assert "evil" not in res.stdout and "2200" not in res.stdout


@pytest.mark.parametrize("serial", ["admin:hunter2@10.0.0.5:5555", "bob@10.0.0.5:5555"])
def test_an_adb_serial_with_a_user_or_password_is_refused_and_never_stored(tmp_path, serial):
    db = tmp_path / "lab.db"
    res = runner.invoke(app, ["--db", str(db), "device", "add", "ph", "--adb", serial])
    assert res.exit_code == 2, res.output
    secret = serial.rpartition("@")[0]
    assert secret not in res.output and "never stores secrets" in res.output
    for f in tmp_path.glob("lab.db*"):
        assert secret.encode() not in f.read_bytes()


def test_a_missing_db_path_is_created_only_with_create(tmp_path, monkeypatch):
    monkeypatch.delenv("EDGELAB_DB_CREATE", raising=False)
    monkeypatch.delenv("EDGELAB_DB", raising=False)
    typo = tmp_path / "labb.db"
    res = runner.invoke(app, ["--db", str(typo), "runs", "ls"])
    assert res.exit_code == 2 and "no database at" in res.output and "--create" in res.output
    assert not typo.exists()
    res = runner.invoke(app, ["--db", f"sqlite:///{typo}", "device", "ls"])
    assert res.exit_code == 2 and not typo.exists()
    res = runner.invoke(app, ["--db", str(typo), "--create", "runs", "ls"])
    assert res.exit_code == 0, res.output
    assert typo.exists()
    assert runner.invoke(app, ["--db", str(typo), "runs", "ls"]).exit_code == 0  # now it exists
    # EDGELAB_DB is held to the same rule: the same error, naming where the path came from
    env_db = tmp_path / "env.db"
    res = runner.invoke(app, ["runs", "ls"], env={"EDGELAB_DB": str(env_db)})
    assert res.exit_code == 2 and f"no database at {env_db} (named by EDGELAB_DB)" in res.output
    assert not env_db.exists()
    res = runner.invoke(app, ["--create", "runs", "ls"], env={"EDGELAB_DB": str(env_db)})
    assert res.exit_code == 0 and env_db.exists()


# --- device side: cut pushes and stale partials --------------------------------------------------


def _sync_socket(adb_lab, serial):
    from edgelab.transport.adb.server import open_transport

    return open_transport(adb_lab.adb_server, serial, "sync:", timeout=10)


@pytest.mark.adb
def test_cut_pushes_leave_no_hidden_partial_on_the_emulator(adb_lab, fault_figures):
    serial = adb_lab.device("s25").serial
    root = Path(adb_lab.state_dir)
    trials = 12
    for i in range(trials):
        sock = _sync_socket(adb_lab, serial)
        target = f"/data/local/tmp/edgelab-cut-{os.getpid()}-{i}.bin".encode() + b",33188"
        sock.sendall(b"SEND" + struct.pack("<I", len(target)) + target)
        block = os.urandom(65536)
        for _ in range(1 + i % 4):
            sock.sendall(b"DATA" + struct.pack("<I", len(block)) + block)
        if i % 2:
            sock.sendall(b"DATA" + struct.pack("<I", len(block)) + block[:1000])  # cut inside a packet
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    deadline = time.monotonic() + 20
    left = []
    while time.monotonic() < deadline:
        left = [p for p in root.rglob(".edgelab-cut-*.adb-part")]
        if not left:
            break
        time.sleep(0.2)
    fault_figures["cut adb pushes"].add(trials=trials, orphans=len(left))
    assert left == []
    assert not list(root.rglob(f"edgelab-cut-{os.getpid()}-*.bin"))  # nothing half-written under the name


@pytest.mark.adb
def test_gc_removes_stale_partials_and_keeps_one_being_written(adb_lab, tmp_path):
    from fixtures.adb_lab import adb_endpoint

    from edgelab.artifacts.devstore import open_store
    from edgelab.artifacts.service import STALE_PART_S, gc_device
    from edgelab.sim.lab import LabStatus, register
    from edgelab.store import db as dbmod
    from edgelab.store.db import get_engine
    from edgelab.transport.adb import ADBTransport

    url = f"sqlite:///{tmp_path / 'gc.db'}"
    register(url, LabStatus(adb_lab.state_dir, ssh=None, adb=adb_lab), check=False)
    engine = get_engine(url)
    t = ADBTransport.connect(adb_endpoint(adb_lab, "s25"))
    try:
        store = open_store(t)
        old, fresh, hidden = "a" * 64 + ".part", "b" * 64 + ".part", ".c.adb-part"
        digest, fresh_digest = f".{'d' * 64}.sha256", f".{'b' * 64}.sha256"  # a receive's, cut for good
        t.run(["mkdir", "-p", store.root])
        for name in (old, fresh, hidden, digest, fresh_digest):
            t.run(["sh", "-c", 'echo partial > "$1"', "x", f"{store.root}/{name}"])
        stamp = time.strftime("%Y%m%d%H%M", time.localtime(time.time() - STALE_PART_S - 600))
        for name in (old, hidden, digest):
            t.run(["touch", "-t", stamp, f"{store.root}/{name}"])
        names = {e.name: e for e in store.list()}
        assert {old, fresh, hidden, digest} <= set(names) and names[old].age_s > STALE_PART_S > names[
            fresh
        ].age_s
        gone = {r.name for r in gc_device(engine, "s25")}
        assert {old, hidden, digest} <= gone and not {fresh, fresh_digest} & gone
        left = {e.name for e in store.list()} & {old, fresh, hidden, digest, fresh_digest}
        assert left == {fresh, fresh_digest}
        store.remove([f"{store.root}/{fresh}", f"{store.root}/{fresh_digest}"])
    finally:
        t.close()
        dbmod.dispose_engines()
