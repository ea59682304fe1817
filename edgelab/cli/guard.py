"""The last line of the CLI: a fault becomes one error line and an exit code, never a traceback.

Commands handle the errors they expect (``fail_from``). Whatever escapes them lands in the root
group (:class:`edgelab.cli.root.ErrorsGroup`): an ``EdgelabError`` is the operator's error line; a
raw OS or socket fault (a timeout, a reset connection, a full disk) is an operational fault named in
one line (exit 1); anything else is a bug, still one line, with how to see the traceback.
``--debug`` (or ``EDGELAB_DEBUG=1``) lets every exception through with its traceback.
"""

from __future__ import annotations


def is_cli_framework(err: BaseException) -> bool:
    """Exit, Abort and usage errors of click or of typer's vendored copy of it."""
    mod = type(err).__module__
    return mod.startswith(("click.", "typer.", "click")) and mod != "typer.main"


def fail_for(err: BaseException):
    """One line for an exception that no command caught (see the module doc)."""
    from edgelab.cli.common import fail, fail_from
    from edgelab.errors import EdgelabError

    if isinstance(err, EdgelabError):
        fail_from(err)
    if isinstance(err, TimeoutError):
        fail(
            f"timed out: {err or 'no answer'}",
            "the device or server did not answer; check it (`edgelab device check`) and retry",
        )
    if isinstance(err, (OSError, EOFError)):
        fail(
            f"{type(err).__name__}: {err}",
            "an operational fault (network, disk, device); retry, or re-run with --debug for the traceback",
        )
    name = f"{type(err).__module__}.{type(err).__qualname__}".removeprefix("builtins.")
    fail(
        f"internal error: {name}: {err}",
        "this is a bug in edgelab: re-run with --debug and report the traceback",
    )
