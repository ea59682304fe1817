"""A captured command output read from a file: refused in one ``file:line`` line when it cannot be one.

Parsers never raise (they turn anything into warnings), so the checks live before them: a binary
file (NUL bytes, without a UTF-16 byte-order mark), text that is not UTF-8, a file far larger than
any command prints, and JSON nested deeper than any real capture. PowerShell's UTF-16 redirects
(``systeminfo > out.txt``) are decoded, not refused.
"""

from __future__ import annotations

from edgelab.errors import BadCapture

MAX_CAPTURE_BYTES = 64 << 20
MAX_JSON_DEPTH = 64


def _line_at(data: bytes, offset: int) -> int:
    return data[:offset].count(b"\n") + 1


def read_capture(path: str, data: bytes) -> str | bytes:
    """The capture's text (decoded UTF-16, or the UTF-8 bytes as they are), or BadCapture."""
    if len(data) > MAX_CAPTURE_BYTES:
        raise BadCapture(
            f"{path}:1: {len(data)} bytes is larger than any command output "
            f"({MAX_CAPTURE_BYTES >> 20} MiB limit)"
        )
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise BadCapture(f"{path}:1: broken UTF-16 text ({err.reason})") from None
    if b"\0" in data:
        line = _line_at(data, data.index(b"\0"))
        raise BadCapture(f"{path}:{line}: binary data (a NUL byte), not command output")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadCapture(
            f"{path}:{_line_at(data, err.start)}: not UTF-8 text (byte 0x{data[err.start]:02x})",
            remedy="save the capture as UTF-8 (iconv -f latin1 -t utf-8)",
        ) from None
    head = text.lstrip("\ufeff \t\r\n")[:1]
    if head in ("[", "{"):
        from edgelab.strictjson import too_deep

        if too_deep(text, MAX_JSON_DEPTH):
            raise BadCapture(f"{path}:1: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return data
