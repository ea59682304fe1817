"""Output is safe: one sanitizer for the terminal, one for JUnit, URL credentials masked everywhere.

A tag, a step name or a device's message may carry terminal control sequences (someone else's
``device add``, a playbook, a program's ANSI-coloured error); printed raw they would drive the
operator's terminal, written raw into JUnit they make a file no XML parser reads.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.credentials import SecretURL, from_device_env, mask_text, mask_url, split_url
from edgelab.errors import ConfigError
from edgelab.playbook.junit import to_junit
from edgelab.playbook.results import JobResult, PlayResult, StepResult
from edgelab.safetext import has_control, printable, xml_text
from edgelab.store.db import get_engine, session_scope
from edgelab.store.models import Device

runner = CliRunner()
ESC_TAG = "\x1b[31mred\x1b]0;pwned\x07"
EVIL = "\x1b[2J\x1b]8;;http://x\x07click\x1b]8;;\x07\u202etxt.exe\x00\x7f\x9b"


def cli(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


# --- the sanitizers --------------------------------------------------------------------------


def test_printable_escapes_every_control_character_and_keeps_plain_text():
    assert printable("orin-agx 64 GB, ok") == "orin-agx 64 GB, ok"
    out = printable(EVIL)
    assert not has_control(out) and "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out and "\\u202e" in out and "\\x00" in out and "\\x9b" in out
    assert printable("a\nb\tc") == "a\\x0ab\\x09c"  # a name is one line


def test_printable_multiline_keeps_lines_and_drops_colour():
    msg = "\x1b[1;31merror:\x1b[0m /data/\x1b[4mx\x1b[0m\n  at line 3\tcol 2\x1b[H"
    assert printable(msg, multiline=True) == "error: /data/x\n  at line 3\tcol 2\\x1b[H"


def test_xml_text_is_what_xml_1_0_accepts():
    text = xml_text("step \x1b[31mred\x1b[0m \x07bell\x00 \ufffe ok\t\n")
    ET.fromstring(f"<a b='{text}'>{text}</a>".replace("\ufffe", ""))  # parses
    assert "\\x07" in text and "\\x00" in text and "red" in text and "\x1b" not in text


# --- JUnit -----------------------------------------------------------------------------------


def test_junit_with_control_characters_everywhere_is_well_formed_xml():
    bad = "boot \x1b[1;31m/dev/ttyS0\x1b[0m: \x07\x08 failed \x00 <&> ]]>"
    job = JobResult(device=f"s25{ESC_TAG}", pipeline="qwen3-tts\x0b", facts_hash="\x01")
    job.steps = [
        StepResult(name=f"probe {ESC_TAG}", kind="probe", status="failed", category="device", message=bad),
        StepResult(name="bench\x1b", kind="bench", status="interrupted", message=bad),
        StepResult(name="gate", kind="gate", status="skipped", message=f"skipped {ESC_TAG}"),
        StepResult(name="push", kind="push", status="passed", message="ws://u:hunter2@h:1 ok"),
    ]
    res = PlayResult(playbook=f"smoke{ESC_TAG}", file="x.yaml", jobs=[job], edgelab_version="0")
    xml = to_junit(res)
    root = ET.fromstring(xml)  # a parser that rejected the whole file was the bug
    cases = list(root.iter("testcase"))
    assert [c.get("name") for c in cases][0] == "probe red\\x1b]0;pwned\\x07"
    err = cases[0].find("error")
    assert err is not None and "/dev/ttyS0" in err.text and "\\x07" in err.text and "<&>" in err.text
    assert "hunter2" not in xml and "u:***@h:1" in xml
    assert not any(has_control(c) for c in xml if c not in "\n\t")


# --- device add refuses, listings escape --------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--tag", ESC_TAG],
        ["--tag", "ok\nnext"],
        ["--jump", "ops@lab\x1b[2J"],
        ["--notes", "n\x1b]52;c;AAAA\x07"],
    ],
)
def test_device_add_refuses_control_characters(dbpath, args):
    res = cli(dbpath, "device", "add", "box", "--ssh", "u@10.0.0.9", *args)
    assert res.exit_code == 2, res.output  # bad input from the operator: a usage error
    assert ("control character" in res.output or "bad host" in res.output) and "\x1b" not in res.output
    assert json.loads(cli(dbpath, "device", "ls", "--json").output) == []


def test_listings_escape_what_an_older_database_holds_and_json_keeps_it_raw(dbpath):
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:  # written before the refusal existed: straight into the table
        s.add(Device(name="old", transport="ssh", ssh_host="10.0.0.1", tags=[ESC_TAG, "[link=http://x]y"]))
    for args in (["device", "ls"], ["device", "show", "old"]):
        res = cli(dbpath, *args)
        assert res.exit_code == 0, res.output
        assert "\x1b" not in res.output and "\x07" not in res.output, repr(res.output)
        assert "\\x1b[31mred" in res.output
    raw = json.loads(cli(dbpath, "device", "show", "old", "--json").output)
    assert ESC_TAG in raw["tags"]


# --- URL credentials --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("ws://u:pw@h:1/x", "ws://u:***@h:1/x"),
        ("http://h:8080/path", "http://h:8080/path"),
        ("ws://u@h", "ws://u@h"),
        ("https://h/v1?token=abc&x=1&api_key=k", "https://h/v1?token=***&x=1&api_key=***"),
        ("postgresql+psycopg://bob:s3cr%40t@db/lab", "postgresql+psycopg://bob:***@db/lab"),
    ],
)
def test_one_url_masked(url, shown):
    assert mask_url(url) == shown
    s = split_url(url)
    assert str(s) == shown and repr(s) == f"SecretURL({shown!r})" and s.reveal() == url
    assert s.has_secret == (shown != url)


def test_mask_text_finds_urls_in_free_text_and_is_idempotent():
    text = "cannot open ws://u:p/a@ss@h:1/v1?token=T&sig=S: refused; db postgresql://x:y@db"
    once = mask_text(text)
    assert (
        "p/a" not in once
        and "ss@" not in once
        and "=T" not in once
        and "=S" not in once
        and ":y@" not in once
    )
    assert mask_text(once) == once


def test_a_secret_url_never_prints_its_secret_by_accident():
    s = SecretURL("ws://u:hunter2@h:1")
    assert "hunter2" not in f"{s} {s!r} {[s]} {json.dumps({'u': s}, default=str)}"
    with pytest.raises(TypeError):
        json.dumps({"u": s})  # never stored by mistake: only its str() is JSON


def test_a_device_process_gets_the_password_by_environment_and_puts_it_back():
    s = SecretURL("ws://u:p%40ss w@h:1/v1/audio/speech/stream?token=T0K&x=2")
    env = s.device_env()
    assert "p@ss" not in str(s) and "T0K" not in str(s)
    back = from_device_env(str(s), env)
    assert split_url(back).password == "p@ss w" and "token=T0K" in back and "x=2" in back
    assert from_device_env("ws://h:1", {}) == "ws://h:1"


def test_every_runs_provenance_masks_its_endpoint_and_command():
    """run_provenance is the one builder of a run's provenance (deploy, bench, endpoint, import):
    whatever a caller passes, a URL's password and a secret query value are stored masked."""
    from edgelab.metrics.provenance import run_provenance

    prov = run_provenance(
        None,
        source="bench:edgelab-bench/1:endpoint",
        command=["client", "--server", "ws://u:hunter2@h:1/v1?token=T0K"],
        endpoint={"url": "ws://u:hunter2@h:1/v1?token=T0K", "protocol": "speech-ws"},
    )
    blob = json.dumps(prov)
    assert "hunter2" not in blob and "T0K" not in blob, blob
    assert prov["endpoint"]["url"] == "ws://u:***@h:1/v1?token=***"
    assert "u:***@h:1" in prov["command"] and prov["endpoint"]["protocol"] == "speech-ws"


def test_a_url_with_a_malformed_password_is_refused_without_showing_it():
    with pytest.raises(ConfigError) as err:
        split_url("ws://u:p/ss@h:1")
    assert "p/ss" not in str(err.value) and "u:***@" in str(err.value)


def test_the_tuis_tables_and_log_show_control_characters_escaped():
    """The TUI renders the same database words: its fleet cells, info panels and the remote log
    get the one sanitizer too (the log keeps lines, drops a program's colour)."""
    from datetime import UTC, datetime

    from rich.text import Text

    from edgelab.tui.widgets.fleet_table import FleetTable
    from edgelab.views.fleet import FleetRow

    row = FleetRow("old", "jetson\x1b[2J", "ssh", "10.0.0.1", "online", False, None, None, None)
    cells = FleetTable(clock=lambda: datetime.now(UTC)).cells(row, datetime.now(UTC))
    shown = " ".join(c.plain if isinstance(c, Text) else str(c) for c in cells)
    assert "\x1b" not in shown and "jetson\\x1b[2J" in shown
    assert printable("\x1b[31mERROR\x1b[0m at \x1b]0;t\x07", multiline=True) == "ERROR at \\x1b]0;t\\x07"
