"""Quoting: what goes in as an argument comes out as that argument, in every shell we speak."""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgelab.transport.quoting import (
    Shell,
    encode_powershell,
    join,
    join_posix,
    quote_posix,
    quote_powershell,
)

NASTY = [
    "",
    " ",
    "a b",
    "it's",
    '"double"',
    "$(touch /tmp/edgelab-pwned)",
    "`id`",
    "a;b",
    "*",
    "?[a-z]",
    "line1\nline2",
    "tab\there",
    "back\\slash",
    "~root",
    "-n",
    "$HOME",
    "!event",
    "{a,b}",
    "ünïcødé ✓",
    "0\n",  # a safe word with a trailing newline: `$` in a regex matches before it
]

# Text the shells can carry: anything but NUL (and lone surrogates, which are not text).
shell_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)

SHELLS = [s for s in ("sh", "dash", "bash", "mksh") if shutil.which(s)]


def _echo_args(shell: str, args: list[str]) -> list[str]:
    """Run ``printf '%s\\0' args...`` through ``shell -c`` and return what it received."""
    line = join_posix(["printf", "%s\\0", *args])
    out = subprocess.run([shell, "-c", line], capture_output=True, check=True).stdout
    return out.decode("utf-8").split("\0")[:-1]


@pytest.mark.parametrize("shell", SHELLS)
def test_nasty_arguments_arrive_verbatim(shell: str) -> None:
    assert _echo_args(shell, NASTY) == NASTY


@pytest.mark.parametrize("shell", SHELLS)
@settings(max_examples=60, deadline=None)
@given(args=st.lists(shell_text, min_size=1, max_size=5))
def test_any_arguments_arrive_verbatim(shell: str, args: list[str]) -> None:
    assert _echo_args(shell, args) == args


def test_mksh_is_tested_when_present() -> None:
    """Android's shell is mksh: CI installs it, so the toybox rule is checked against the real thing."""
    if not shutil.which("mksh"):
        pytest.skip("mksh not installed (apt-get install mksh)")
    assert "mksh" in SHELLS


def test_a_trailing_newline_is_quoted() -> None:
    assert quote_posix("0\n") == "'0\n'"


def test_safe_words_stay_bare() -> None:
    assert quote_posix("/data/local/tmp/edgelab") == "/data/local/tmp/edgelab"
    assert quote_posix("a b") == "'a b'"
    assert quote_posix("it's") == "'it'\"'\"'s'"


def test_nul_is_refused() -> None:
    with pytest.raises(ValueError):
        quote_posix("a\x00b")
    with pytest.raises(ValueError):
        quote_powershell("a\x00b")


def test_empty_command_is_refused() -> None:
    with pytest.raises(ValueError):
        join([], Shell.POSIX)


def test_powershell_literal_doubles_every_quote_kind() -> None:
    assert quote_powershell("it's") == "'it''s'"
    assert quote_powershell("a\u2019b") == "'a\u2019\u2019b'"
    assert quote_powershell("$env:PATH; rm -r C:\\") == "'$env:PATH; rm -r C:\\'"


def _parse_powershell_literal(lit: str) -> str:
    """Undo PowerShell single-quote rules (the same rules the language spec gives)."""
    assert lit[0] == "'" and lit[-1] == "'"
    body, out, i = lit[1:-1], [], 0
    quotes = "'\u2018\u2019\u201a\u201b"
    while i < len(body):
        ch = body[i]
        if ch in quotes:
            assert i + 1 < len(body) and body[i + 1] == ch, "an unpaired quote would end the literal"
            i += 2
        else:
            i += 1
        out.append(ch)
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(arg=shell_text)
def test_powershell_literal_round_trips(arg: str) -> None:
    assert _parse_powershell_literal(quote_powershell(arg)) == arg


def test_powershell_call_operator_and_encoding() -> None:
    assert join(["Get-FileHash", "C:\\a b.bin"], Shell.POWERSHELL) == "& 'Get-FileHash' 'C:\\a b.bin'"
    argv = encode_powershell("Write-Output 'hi'")
    assert argv[:4] == ["powershell", "-NoProfile", "-NonInteractive", "-EncodedCommand"]
    assert base64.b64decode(argv[4]).decode("utf-16-le") == "Write-Output 'hi'"
