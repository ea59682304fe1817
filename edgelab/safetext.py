"""Text that is safe to print on an operator's terminal and to put in an XML report.

A device name, a tag, a step name or a device's error message comes from someone else: another
operator's ``device add``, a playbook, a program on a device. Written raw, an escape sequence in
it would drive the reader's terminal (move the cursor, retitle the window, hide text), and a
control character makes a JUnit file that no XML parser accepts. So every such value passes
through one function on its way out: :func:`printable` for the terminal (CLI and TUI) and
:func:`xml_text` for JUnit. The raw value is kept where it is data (the database, ``--json``).

What is shown instead of a control character is its escape (``\\x1b``, ``\\u202e``), so the
operator sees that something odd is there. A device's multi-line message keeps its newlines and
tabs, and its colour (SGR) sequences are dropped: colour is the program's decoration, not text.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls; Unicode bidi embeddings/overrides/isolates (they reorder what is
# shown: "Trojan Source"); line/paragraph separators; lone surrogates; U+FFFE/U+FFFF
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
_UNSAFE_MULTILINE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
# characters XML 1.0 forbids (its Char production allows #x9 #xA #xD, #x20-#xD7FF, #xE000-#xFFFD, more)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# an SGR (colour) sequence: ESC [ params m
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def has_control(text: str) -> bool:
    """Whether ``text`` holds a character :func:`printable` would escape (names are refused for it)."""
    return bool(_UNSAFE.search(text))


def printable(text: object, *, multiline: bool = False) -> str:
    """``text`` for a terminal: every control character escaped (``\\x1b``). ``multiline`` (a
    device's message, a log): newlines and tabs kept, colour sequences dropped first."""
    s = str(text)
    if multiline:
        return _UNSAFE_MULTILINE.sub(_escape, _SGR.sub("", s))
    return _UNSAFE.sub(_escape, s)


def xml_text(text: object) -> str:
    """``text`` as XML 1.0 may hold it: colour sequences dropped, other forbidden characters escaped
    (``\\x1b``); the XML writer still escapes ``& < > "`` as usual."""
    return _NOT_XML.sub(_escape, _SGR.sub("", str(text)))
