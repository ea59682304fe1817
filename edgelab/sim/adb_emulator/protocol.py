"""ADB transport-protocol framing: 24-byte little-endian headers, then the payload.

The host ignores checksums once both sides speak version 0x01000001, but we
still compute them when sending so older hosts accept our packets; incoming
checksums are never enforced.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

A_SYNC = 0x434E5953
A_CNXN = 0x4E584E43
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_AUTH = 0x48545541
A_STLS = 0x534C5453

AUTH_TOKEN = 1
AUTH_SIGNATURE = 2
AUTH_RSAPUBLICKEY = 3

VERSION = 0x01000001  # skip-checksum version
MAX_PAYLOAD = 1024 * 1024  # what we accept per packet: adbd's MAX_PAYLOAD since Android 9 (adb.h)
MAX_HEADER_PAYLOAD = 16 * 1024 * 1024  # refuse absurd lengths from a broken peer

_HEADER = struct.Struct("<6I")

NAMES = {
    A_SYNC: "SYNC",
    A_CNXN: "CNXN",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_CLSE: "CLSE",
    A_WRTE: "WRTE",
    A_AUTH: "AUTH",
    A_STLS: "STLS",
}


class ProtocolError(Exception):
    """The peer sent something that is not an ADB packet."""


@dataclass(frozen=True)
class Message:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return NAMES.get(self.command, hex(self.command))


def checksum(data: bytes) -> int:
    return sum(data) & 0xFFFFFFFF


def encode(msg: Message) -> bytes:
    header = _HEADER.pack(
        msg.command,
        msg.arg0 & 0xFFFFFFFF,
        msg.arg1 & 0xFFFFFFFF,
        len(msg.data),
        checksum(msg.data),
        msg.command ^ 0xFFFFFFFF,
    )
    return header + msg.data


async def read_message(reader: asyncio.StreamReader) -> Message:
    """Next packet from the host; IncompleteReadError at EOF."""
    header = await reader.readexactly(_HEADER.size)
    command, arg0, arg1, length, _crc, magic = _HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic for command {command:#x}")
    if length > MAX_HEADER_PAYLOAD:
        raise ProtocolError(f"payload of {length} bytes is too large")
    data = await reader.readexactly(length) if length else b""
    return Message(command, arg0, arg1, data)


def parse_banner(data: bytes) -> tuple[str, dict[str, str], set[str]]:
    """``system:serial:key=value;...;features=a,b`` -> (system type, props, features)."""
    text = data.rstrip(b"\0").decode("utf-8", "replace")
    parts = text.split(":", 2)
    kind = parts[0]
    props: dict[str, str] = {}
    features: set[str] = set()
    if len(parts) == 3:
        for item in parts[2].split(";"):
            key, _, value = item.partition("=")
            if key == "features":
                features = {f for f in value.split(",") if f}
            elif key:
                props[key] = value
    return kind, props, features


def make_banner(props: dict[str, str], features: list[str]) -> bytes:
    items = [f"{k}={v}" for k, v in props.items()]
    items.append("features=" + ",".join(features))
    return ("device::" + ";".join(items)).encode()
