"""Shared CLI plumbing: the database option, JSON output, and one-line errors with a remedy."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer

from edgelab.credentials import mask_text
from edgelab.errors import ConfigError, EdgelabError
from edgelab.safetext import printable


def _pipe_width(stream) -> int | None:
    """A pipe has no width to respect: give tables room so grep and awk see whole lines.

    ``COLUMNS`` still wins, as Rich honours it; on a terminal Rich measures the terminal.
    """
    if stream.isatty() or os.environ.get("COLUMNS"):
        return None
    return 160


def _safe_console_class():
    """A Rich console whose every piece of printed text (not Rich's own cursor controls) passes
    through :func:`edgelab.safetext.printable` last: whatever a command forgot to escape, no
    control sequence from a device, a playbook or the database reaches the terminal raw."""
    from rich.console import Console
    from rich.segment import Segment

    def safe(seg: Segment) -> Segment:
        if seg.control or not seg.text:
            return seg
        style = seg.style
        if style is not None and style.link:  # edgelab prints no links: one is markup from data (OSC 8)
            style = style.update_link(None)
        return Segment(printable(seg.text, multiline=True), style, seg.control)

    class SafeConsole(Console):
        def _render_buffer(self, buffer):
            return super()._render_buffer(safe(seg) for seg in buffer)

    return SafeConsole


class _LazyConsole:
    """A Rich console made on first use in each command: Rich is not imported by commands that
    print nothing through it (``--help``, ``--json``), and each command sees its own ``COLUMNS``
    and streams (the root callback resets it)."""

    def __init__(self, stderr: bool = False):
        self._stderr = stderr
        self._real = None

    def _get(self):
        if self._real is None:
            self._real = _safe_console_class()(
                stderr=self._stderr, width=_pipe_width(sys.stderr if self._stderr else sys.stdout)
            )
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __enter__(self):
        return self._get().__enter__()

    def __exit__(self, *exc) -> None:
        self._get().__exit__(*exc)

    def reset(self) -> None:
        self._real = None


console: Any = _LazyConsole()
err_console: Any = _LazyConsole(stderr=True)


def reset_consoles() -> None:
    console.reset()
    err_console.reset()


def escape(text: str, *, multiline: bool = False) -> str:
    """A value from the database or a device, ready for Rich markup: terminal control sequences
    escaped (:func:`edgelab.safetext.printable`; ``multiline`` keeps a message's newlines), URL
    passwords masked, markup brackets escaped (``rich.markup.escape``, imported only when used)."""
    from rich.markup import escape as rich_escape

    return rich_escape(printable(mask_text(str(text)), multiline=multiline))


def plain(text: object) -> str:
    """A value for output that is not Rich markup (plain ``print``): the same safety as :func:`escape`."""
    return printable(mask_text(str(text)))


LeaseOpt = Annotated[
    str | None,
    typer.Option(
        "--lease",
        envvar="EDGELAB_LEASE",
        help="Run under this lease (`edgelab reserve`); default: yours on the device, or a new one.",
    ),
]
"""``--lease ID`` / ``EDGELAB_LEASE``, the same on every command that uses a device."""


@dataclass
class CliState:
    db: str | None = None
    debug: bool = False


state = CliState()


def print_json(data: Any) -> None:
    """Machine-readable output on stdout, nothing else on it."""
    sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


def _colour(stream) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def error_lines(message: str, remedy: str | None = None, *, colour: bool = False) -> str:
    """``error: MESSAGE`` and ``  -> REMEDY``, as plain text: never wrapped, never read as markup."""
    red, dim, off = ("\x1b[1;31m", "\x1b[2m", "\x1b[0m") if colour else ("", "", "")
    message = printable(mask_text(message), multiline=True)  # a device's words: no escape, no password
    text = f"{red}error:{off} {message}\n"
    if remedy:
        text += f"  {dim}->{off} {printable(mask_text(remedy), multiline=True)}\n"
    return text


def emit_error(message: str, remedy: str | None = None) -> None:
    """Write one error (and its remedy on the next line) to stderr."""
    sys.stderr.write(error_lines(message, remedy, colour=_colour(sys.stderr)))
    sys.stderr.flush()


def fail(message: str, remedy: str | None = None, code: int = 1) -> NoReturn:
    """Exit with one clear line and what to do about it (exit 1: the thing asked failed; 2: usage)."""
    emit_error(message, remedy)
    raise typer.Exit(code)


def debug_enabled() -> bool:
    """``--debug`` or ``EDGELAB_DEBUG=1``: errors show their traceback instead of one line."""
    return state.debug or os.environ.get("EDGELAB_DEBUG", "") not in ("", "0")


def fail_from(err: EdgelabError, code: int = 1) -> NoReturn:
    """``err`` as one line + remedy; an error class that fixes its exit code (bad input files: 2) wins.
    With ``--debug`` it is raised instead, so its traceback shows, as at the root handler."""
    if debug_enabled():
        raise err
    fail(str(err), getattr(err, "remedy", None), getattr(err, "exit_code", None) or code)


JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
LabHostBuildOpt = Annotated[
    bool,
    typer.Option(
        "--lab-host-build",
        help="On a virtual device, run the lab host's build instead of the device's own (which runs "
        "emulated: qemu for aarch64, wine for Windows); faster, and labelled so in every result.",
    ),
]  # deploy and bench choose a build alike
ThreadsOpt = Annotated[
    int | None, typer.Option("--threads", help="Threads (default: the profile's).")
]  # deploy and bench override the profile's threads alike
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        help="Launch the build for this target (default: the device's own, most specific first); "
        "a build the device cannot run is refused before anything is pushed.",
    ),
]


def open_engine():
    """The database this command works on, migrated; an unusable ``--db`` is a usage error (exit 2)."""
    from edgelab.store.db import get_engine

    try:
        return get_engine(state.db)
    except ConfigError as err:
        fail_from(err, code=2)


def open_session(write: bool = True):
    """A session on :func:`open_engine` that commits on success."""
    from edgelab.store.db import session_scope

    return session_scope(open_engine(), write=write)
