"""One logging setup for the ``edgelab`` CLI and every ``python -m edgelab...`` entry point.

The level comes from ``--log-level`` (the CLI's global option, or the entry point's own flag),
else ``EDGELAB_LOG``, else the entry point's default (``warning``). One stderr handler, one
format, and every record it writes has its secrets masked first (:func:`redact`: passwords,
tokens, keys, URL credentials), whatever logger or library the record came from.

Records of edgelab's own modules (``edgelab.*``) are shown at the chosen level; the libraries
under them (paramiko, adbutils, websockets, alembic) only at ``debug``, so their own warnings do
not break the CLI's one-line errors. SQLAlchemy's engine log is never attached: its INFO is the
SQL echo with bound parameters.

Modules log with ``log = logging.getLogger(__name__)`` and never configure logging themselves.
The virtual devices' session wrapper (``edgelab.sim._enter``) is the one entry point without it:
it runs as a device's shell, and its stderr is the remote command's.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import IO, TYPE_CHECKING

from edgelab.credentials import MASK, mask_text

if TYPE_CHECKING:  # argparse only for entry points that have their own parser (``add_argument``)
    import argparse

ENV = "EDGELAB_LOG"
LEVELS = ("debug", "info", "warning", "error", "critical")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
OURS = "edgelab"
DEBUG_ALSO = ("paramiko", "adbutils", "websockets", "alembic")

# "token" but not "tokens"/"tokenizer" (decode figures are logged as tokens/s)
_SECRET_WORD = (
    r"[\w.-]*(?:password|passwd|passphrase|secret|token(?!s|izer)|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key)[\w.-]*"
)


@cache
def _patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """The masks, compiled on the first record logged (most commands log none)."""
    return (
        # Authorization headers and bare bearer/basic credentials
        (re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]+", re.I), rf"\1 {MASK}"),
        # --password VALUE, --api-key=VALUE
        (re.compile(rf"(--?{_SECRET_WORD})(\s+|=)(?!-)([^\s\"']+)", re.I), rf"\1\2{MASK}"),
        # password=VALUE, "token": "VALUE", secret: VALUE
        (re.compile(rf"(\b{_SECRET_WORD}[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&}}]+)", re.I), rf"\1{MASK}"),
    )


def redact(text: str) -> str:
    """``text`` with every password, token, key and URL credential replaced by ``***`` (URLs by
    :func:`edgelab.credentials.mask_text`, the one masking of URLs)."""
    text = mask_text(text)
    for pattern, repl in _patterns():
        text = pattern.sub(repl, text)
    return text


class MaskSecrets(logging.Filter):
    """Rewrites a record before any handler formats it: message (with its arguments), traceback
    and stack text all pass through :func:`redact`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class _Handler(logging.StreamHandler):
    """The one handler (its class is how a later :func:`setup` finds and replaces it)."""


class _Stderr(_Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes: test runners and CliRunner swap it,
    and under ``edgelab tui`` Textual captures it, so records never draw over the screen."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:
        pass


def parse_level(value: str | int) -> int:
    """A level name (any case; ``warn`` too) or number; ``ValueError`` names the valid ones."""
    if isinstance(value, int) or str(value).strip().isdigit():
        return int(value)
    name = str(value).strip().lower()
    name = {"warn": "warning", "fatal": "critical"}.get(name, name)
    if name not in LEVELS:
        raise ValueError(f"{value!r} is not a log level (one of {', '.join(LEVELS)})")
    return logging.getLevelNamesMapping()[name.upper()]


def setup(level: str | int | None = None, *, default: str = "warning", stream: IO[str] | None = None) -> int:
    """Install the one handler (again: a second call replaces the first, e.g. per CLI invocation)
    and return the level in force. ``level`` None reads ``EDGELAB_LOG``; a bad value there falls
    back to ``default`` with a warning (a bad ``level`` argument raises ``ValueError``)."""
    bad_env = None
    if level is None and os.environ.get(ENV, "").strip():
        try:
            chosen = parse_level(os.environ[ENV])
        except ValueError as err:
            bad_env, chosen = str(err), parse_level(default)
    else:
        chosen = parse_level(default if level is None else level)
    handler = _Handler(stream) if stream is not None else _Stderr()
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(MaskSecrets())
    for name in (OURS, *DEBUG_ALSO):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if isinstance(h, _Handler)]:
            logger.removeHandler(old)
            old.close()
    ours = logging.getLogger(OURS)
    ours.setLevel(chosen)
    ours.addHandler(handler)
    if chosen <= logging.DEBUG:
        for name in DEBUG_ALSO:
            logging.getLogger(name).setLevel(logging.DEBUG)
            logging.getLogger(name).addHandler(handler)
    if bad_env:
        ours.warning("%s: %s; using %s", ENV, bad_env, default)
    return chosen


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` for an entry point's own parser (default: ``EDGELAB_LOG``, then warning)."""
    parser.add_argument(
        "--log-level",
        default=None,
        type=_argparse_level,
        metavar="LEVEL",
        help=f"{', '.join(LEVELS)} (default: ${ENV}, else warning); secrets are masked",
    )


def _argparse_level(value: str) -> str:
    import argparse

    try:
        parse_level(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


@contextmanager
def swallowed(log: logging.Logger, what: str) -> Iterator[None]:
    """Cleanup that must not mask what is being handled (closing a connection in a ``finally``):
    an exception from the block is logged at debug with its traceback, not raised."""
    try:
        yield
    except Exception:  # noqa: BLE001 - the point: kept out of the caller's way, but not silent
        log.debug("%s failed (ignored)", what, exc_info=True)


class Phases:
    """One log line (info) per phase of a long operation, with the seconds since the phase before:
    ``deploy qwen3-tts on s25 r1a2b3c4d5e6: pushed in 1.84s (blobs=3)``."""

    def __init__(self, log: logging.Logger, what: str):
        self.log, self.what = log, what
        self.t0 = self.last = time.monotonic()

    def __call__(self, name: str, **info: object) -> float:
        now = time.monotonic()
        took, self.last = now - self.last, now
        fields = " ".join(f"{k}={v}" for k, v in info.items() if v not in (None, {}, []))
        self.log.info("%s: %s in %.2fs%s", self.what, name, took, f" ({fields})" if fields else "")
        return took

    def total(self) -> float:
        return time.monotonic() - self.t0
