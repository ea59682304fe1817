"""What every parser returns, and the small text helpers they share.

A parser is a pure function ``text -> ParseResult``. It never raises: garbled or unknown input gives
partial facts plus warnings. ``values`` is the flat view (keys named as the command prints them,
e.g. ``l4t_version``, ``ro.product.model``); ``facts`` is the typed fragment for the facts model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgelab.probe.facts import Facts

INTERNAL_ERROR = "internal parser error"


@dataclass
class ParseResult:
    command: str
    values: dict[str, Any] = field(default_factory=dict)
    facts: Facts = field(default_factory=Facts)
    warnings: list[str] = field(default_factory=list)

    def flat(self) -> dict[str, Any]:
        """The flat view: per-command keys as printed (what EXPECTED.yaml lists)."""
        return dict(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "values": self.values,
            "facts": self.facts.to_dict(),
            "warnings": list(self.warnings),
        }


def prepare(text: Any) -> str:
    """Bytes or str -> str with LF line ends and no BOM; pasted captures arrive in every shape."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def parser(command: str) -> Callable[[Callable[[str, ParseResult], None]], Callable[[Any], ParseResult]]:
    """Wrap a body ``fill(text, result)`` into a total function: any exception becomes a warning."""

    def deco(fill: Callable[[str, ParseResult], None]) -> Callable[[Any], ParseResult]:
        @functools.wraps(fill)
        def run(text: Any) -> ParseResult:
            res = ParseResult(command=command)
            try:
                clean = prepare(text)
                if not clean.strip():
                    res.warnings.append("empty input")
                    return res
                fill(clean, res)
            except Exception as exc:  # noqa: BLE001 - the contract is: never raise
                res.warnings.append(f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}")
            if not res.values and not any(w.startswith(INTERNAL_ERROR) for w in res.warnings):
                res.warnings.append(f"nothing recognized as {command} output")
            return res

        run.command = command  # type: ignore[attr-defined]
        return run

    return deco


_INT_RE = re.compile(r"^[-+]?\d+$")
_FLOAT_RE = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def to_int(s: Any) -> int | None:
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    if not isinstance(s, str):
        return None
    s = s.strip().replace(",", "")
    return int(s) if _INT_RE.match(s) and len(s) < 40 else None


def to_float(s: Any) -> float | None:
    if isinstance(s, int | float) and not isinstance(s, bool):
        return float(s)
    if not isinstance(s, str):
        return None
    s = s.strip()
    return float(s) if _FLOAT_RE.match(s) and len(s) < 60 else None


def to_bool(s: Any) -> bool | None:
    if isinstance(s, bool):
        return s
    v = str(s).strip().lower()
    if v in ("true", "yes", "on", "1", "enabled"):
        return True
    if v in ("false", "no", "off", "0", "disabled"):
        return False
    return None


def scalar(s: str) -> Any:
    """A printed value as its natural type: int, then bool, else the stripped string."""
    i = to_int(s)
    if i is not None:
        return i
    b = to_bool(s) if s.strip().lower() in ("true", "false") else None
    return b if b is not None else s.strip()


def snake(label: str) -> str:
    """'Max charging current' / 'NumberOfCores' / 'OS Name' -> 'max_charging_current' / 'number_of_cores'."""
    s = re.sub(r"\(.*?\)", "", label)
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", s)
    s = re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").lower()
    return s


def key_values(text: str, sep: str = ":") -> list[tuple[str, str, str]]:
    """Split 'label<sep> value' lines; returns (label, value, raw line) with label and value stripped."""
    out = []
    for line in text.split("\n"):
        if sep in line:
            k, _, v = line.partition(sep)
            out.append((k.strip(), v.strip(), line))
    return out


ARCH_ALIASES = {
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "armv8": "aarch64",
    "arm64-v8a": "aarch64",
    "arm64-based pc": "aarch64",
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "x64": "x86_64",
    "x64-based pc": "x86_64",
    "x86-64": "x86_64",
    "i386": "x86",
    "i686": "x86",
    "x86": "x86",
    "x86-based pc": "x86",
    "armv7l": "arm",
    "armv7": "arm",
    "armeabi-v7a": "arm",
    "arm": "arm",
}


def norm_arch(raw: str | None) -> str | None:
    if not raw:
        return None
    return ARCH_ALIASES.get(raw.strip().lower())
