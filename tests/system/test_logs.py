"""Logging: one handler for the CLI and every ``python -m edgelab...``, level from ``--log-level`` or
``EDGELAB_LOG``, and no password or token in what it writes."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import pytest

from edgelab import logs

SECRET = "s3cret-Pw"
PG_URL = f"postgresql+psycopg://lab:{SECRET}@127.0.0.1:1/edgelab"  # port 1 on loopback: refused at once
EDGELAB = [sys.executable, "-c", "from edgelab.cli import main; main()"]


def _run(cmd: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != logs.ENV} | env
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=full)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("password=hunter2 next", "password=*** next"),
        ('{"token": "abc123", "n": 1}', '{"token": "***", "n": 1}'),
        ("Authorization: Bearer eyJhbGc.x-y_z", "Authorization: Bearer ***"),
        (
            "open postgresql+psycopg://bob:pw@db.lab/edgelab",
            "open postgresql+psycopg://bob:***@db.lab/edgelab",
        ),
        ("sshpass --password pw2 -- ssh host", "sshpass --password *** -- ssh host"),
        ("--api-key=k1 --verbose", "--api-key=*** --verbose"),
        ("EDGELAB_TOKEN=zz; secret: s1", "EDGELAB_TOKEN=***; secret: ***"),
        # figures are not secrets
        (
            "decode 12.5 tokens/s, max_tokens=64, tokenizer=bpe",
            "decode 12.5 tokens/s, max_tokens=64, tokenizer=bpe",
        ),
        ("ssh://lab@host:22/", "ssh://lab@host:22/"),
    ],
)
def test_redact(text, shown):
    assert logs.redact(text) == shown


def test_one_handler_masks_message_args_and_traceback():
    out = io.StringIO()
    assert logs.setup("info", stream=out) == logging.INFO
    logs.setup("debug", stream=out)  # a second setup replaces the first: no line twice
    log = logging.getLogger("edgelab.test_logs")
    try:
        raise RuntimeError(f"login failed for password={SECRET}")
    except RuntimeError:
        log.exception("connecting to %s", PG_URL)
    log.debug("token=%s", SECRET)
    logging.getLogger("paramiko.transport").debug("paramiko at debug too")
    text = out.getvalue()
    assert SECRET not in text, text
    assert (
        text.count(
            "ERROR edgelab.test_logs: connecting to postgresql+psycopg://lab:***@127.0.0.1:1/edgelab\n"
        )
        == 1
    )
    assert "RuntimeError: login failed for password=***" in text
    assert "DEBUG edgelab.test_logs: token=***\n" in text
    assert "DEBUG paramiko.transport: paramiko at debug too\n" in text

    out2 = io.StringIO()
    logs.setup("warning", stream=out2)
    log.info("not shown")
    logging.getLogger("paramiko.transport").error("a library's record: only at debug")
    log.warning("shown")
    assert (
        out2.getvalue().endswith("WARNING edgelab.test_logs: shown\n") and "not shown" not in out2.getvalue()
    )
    assert "library" not in out2.getvalue()
    with pytest.raises(ValueError, match="not a log level"):
        logs.parse_level("loud")
    logs.setup("warning")  # leave the default behind for the other tests of this worker


def test_cli_log_level_option_and_env_mask_the_database_password():
    quiet = _run([*EDGELAB, "--db", PG_URL, "device", "ls"])
    assert quiet.returncode == 2 and len(quiet.stderr.splitlines()) == 2, (
        quiet.stderr
    )  # the error, its remedy
    assert quiet.stderr.startswith(
        "error: cannot open database postgresql+psycopg://lab:***@127.0.0.1:1/edgelab"
    )
    for res in (
        _run([*EDGELAB, "--log-level", "debug", "--db", PG_URL, "device", "ls"]),
        _run([*EDGELAB, "--db", PG_URL, "device", "ls"], EDGELAB_LOG="DEBUG"),
    ):
        assert res.returncode == 2, res.stderr
        assert (
            " DEBUG edgelab.store.db: opening database postgresql+psycopg://lab:***@127.0.0.1:1/edgelab\n"
            in res.stderr
        ), res.stderr
        assert SECRET not in res.stderr + res.stdout
        assert res.stderr.splitlines()[-2].startswith("error: cannot open database")
    bad = _run([*EDGELAB, "--log-level", "loud", "device", "ls"])
    assert bad.returncode == 2 and "'loud' is not a log level" in bad.stderr
    assert _run([*EDGELAB, "device", "ls"], EDGELAB_LOG="loud").returncode == 2


def test_entry_points_share_the_handler():
    """A ``python -m edgelab...`` entry point: the same format and masking, from EDGELAB_LOG or its flag."""
    res = _run([sys.executable, "-m", "edgelab.deploy.follow", "r1"], EDGELAB_LOG="debug", EDGELAB_DB=PG_URL)
    assert res.returncode != 0
    assert (
        " DEBUG edgelab.store.db: opening database postgresql+psycopg://lab:***@127.0.0.1:1/edgelab\n"
        in res.stderr
    ), res.stderr
    assert SECRET not in res.stderr + res.stdout
    res = _run(
        [sys.executable, "-m", "edgelab.deploy.follow", "--log-level", "loud", "r1"], EDGELAB_DB=PG_URL
    )
    assert res.returncode == 2 and "'loud' is not a log level" in res.stderr
    helps = [
        _run([sys.executable, "-m", mod, "--help"]).stdout
        for mod in (
            "edgelab.reference",
            "edgelab.controller",
            "edgelab.protocols",
            "edgelab.runtimes.pack",
            "edgelab.sim.adb_emulator",
            "edgelab.models.parity",
        )
    ]
    assert all("--log-level LEVEL" in h for h in helps), helps


def test_a_swallowed_cleanup_failure_is_logged_at_debug_not_raised(caplog) -> None:
    log = logging.getLogger("edgelab.test.swallowed")
    with caplog.at_level(logging.DEBUG, logger="edgelab.test.swallowed"):
        with logs.swallowed(log, "closing the device connection"):
            raise OSError("socket already closed")
    (rec,) = caplog.records
    assert rec.levelno == logging.DEBUG and "closing the device connection failed" in rec.getMessage()
    assert rec.exc_info and isinstance(rec.exc_info[1], OSError)
    with pytest.raises(KeyboardInterrupt):  # only exceptions: an interrupt still goes through
        with logs.swallowed(log, "x"):
            raise KeyboardInterrupt


def test_phases_log_one_line_each_with_its_duration(caplog) -> None:
    log = logging.getLogger("edgelab.test.phases")
    with caplog.at_level(logging.INFO, logger="edgelab.test.phases"):
        phases = logs.Phases(log, "deploy qwen3-tts on s25 r1")
        took = phases("pushed", blobs=3, empty=None)
        phases("ready")
    assert took >= 0 and phases.total() >= took
    first, second = (r.getMessage() for r in caplog.records)
    assert first.startswith("deploy qwen3-tts on s25 r1: pushed in ") and first.endswith("s (blobs=3)")
    assert second.startswith("deploy qwen3-tts on s25 r1: ready in ") and "(" not in second
