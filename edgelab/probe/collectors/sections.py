"""Section markers: one remote exec prints many sources, each between markers that carry a nonce.

The nonce is fresh per probe, so no file content (a devicetree string, a getprop value, a
hostile hostname) can forge a marker. Output outside any section is ignored; a section whose
end marker never came (the probe was cut off) is kept with ``exit_code=None``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any

BEGIN = "@@edgelab-section"
END = "@@edgelab-end"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


@dataclass
class Section:
    """What one source printed on stdout, and its exit status (None: cut off before the end)."""

    name: str
    output: str
    exit_code: int | None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Section:
        code = data.get("exit_code")
        return cls(
            str(data.get("name", "")), str(data.get("output", "")), None if code is None else int(code)
        )


def new_nonce() -> str:
    return secrets.token_hex(6)


def check_name(name: str) -> str:
    """Section names go into shell and PowerShell scripts unquoted: keep them plain."""
    if not _NAME.match(name):
        raise ValueError(f"bad section name {name!r}")
    return name


def begin_marker(nonce: str, name: str) -> str:
    return f"{BEGIN} {nonce} {check_name(name)}@@"


def end_marker_prefix(nonce: str, name: str) -> str:
    """The end marker without its exit status (the script appends ``<rc>@@``)."""
    return f"{END} {nonce} {check_name(name)} "


def split_sections(stdout: str, nonce: str) -> tuple[dict[str, Section], list[str]]:
    """Cut collector output into sections; warnings name what looked wrong (never raises).

    The script prints a newline before every end marker (so output without a final newline
    still ends a line); exactly that one newline is removed again here.
    """
    begin = re.compile(rf"^{re.escape(BEGIN)} {re.escape(nonce)} ([a-z][a-z0-9_]*)@@\r?$")
    end = re.compile(rf"^{re.escape(END)} {re.escape(nonce)} ([a-z][a-z0-9_]*) (-?\d+)@@\r?$")
    sections: dict[str, Section] = {}
    warnings: list[str] = []
    current: str | None = None
    buf: list[str] = []
    for line in stdout.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare.startswith(BEGIN) and (m := begin.match(bare)):
            if current is not None:
                warnings.append(f"section {current}: no end marker before {m[1]}")
                sections[current] = Section(current, _strip_one(buf), None)
            current, buf = m[1], []
            continue
        if bare.startswith(END) and (m := end.match(bare)):
            if current != m[1]:
                warnings.append(f"end marker of {m[1]} outside its section")
                continue
            sections[current] = Section(current, _strip_one(buf), int(m[2]))
            current, buf = None, []
            continue
        if current is not None:
            buf.append(line)
    if current is not None:
        warnings.append(f"section {current}: cut off (no end marker)")
        sections[current] = Section(current, "".join(buf), None)
    return sections, warnings


def _strip_one(buf: list[str]) -> str:
    text = "".join(buf)
    if text.endswith("\r\n"):
        return text[:-2]
    if text.endswith("\n"):
        return text[:-1]
    return text
