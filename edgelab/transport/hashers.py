"""Which SHA-256 tool a device hashes with: the fastest one it has, probed once, parsed strictly.

A verified push is bounded by the device-side hash as much as by the link, and the tools differ by
about 3x on the same CPU: OpenSSL's digest uses the SHA extensions (SHA-NI on x86, ARMv8 SHA2 on
Jetsons and phones), coreutils' ``sha256sum`` does not (256 MiB here: ``openssl dgst`` 0.20 s,
``sha256sum`` 0.55 s). So a device is asked once (``PROBE``, one short shell snippet that can ride
in a round trip the caller makes anyway) which candidate, fastest first, is present AND prints the
right digest of the empty input; the answer (``parse_probe``) names a ``Hasher`` whose shell
function ``h`` the store's scripts call (``h FILE`` or ``... | h``). Every digest a device prints
is read by ``parse_digest``: exactly one line, 64 lowercase hex digits, then the tool's own
separator; anything else is an error, never a guess.

Usable from any transport's commands (POSIX sh, Android toybox, busybox); a Windows device hashes
with PowerShell's Get-FileHash (``winscripts``) instead.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from edgelab.errors import ConfigError

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@dataclass(frozen=True)
class Hasher:
    """One device-side SHA-256 tool: its name (what a push reports) and the shell words that run it."""

    name: str
    command: str  # shell words, fixed text (no user input): the file names follow as "$@"

    @property
    def fn(self) -> str:
        """The shell function ``h`` (``h FILE...`` or ``... | h``) that prints ``<sha256> ...`` lines."""
        return f'h() {{ {self.command} "$@"; }}; '


# Fastest first (measured on the lab host and known of the targets): OpenSSL's assembly with the
# CPU's SHA instructions, then the coreutils/toybox/busybox applets, then perl's shasum.
OPENSSL = Hasher("openssl", "openssl dgst -sha256 -r")
SHA256SUM = Hasher("sha256sum", "sha256sum")
BUSYBOX = Hasher("busybox sha256sum", "busybox sha256sum")
TOYBOX = Hasher("toybox sha256sum", "toybox sha256sum")
SHASUM = Hasher("shasum", "shasum -a 256")
CANDIDATES: tuple[Hasher, ...] = (OPENSSL, SHA256SUM, BUSYBOX, TOYBOX, SHASUM)
BY_NAME = {h.name: h for h in CANDIDATES}

_PROBE_MARK = "edgelab-hasher="


ENV = "EDGELAB_HASHERS"


def candidates() -> tuple[Hasher, ...]:
    """The tools a device is asked for, fastest first; ``EDGELAB_HASHERS`` (names, comma-separated,
    in the order to try) pins them: to hash with the same tool as a hand-verified peer, or to keep
    clear of a device's broken one."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return CANDIDATES
    names = [n.strip() for n in raw.split(",") if n.strip()]
    for n in names:
        if n not in BY_NAME:
            raise ConfigError(
                f"{ENV}={raw}: {n!r} is not a hasher edgelab knows",
                remedy=f"name some of: {', '.join(BY_NAME)}",
            )
    return tuple(BY_NAME[n] for n in names)


def _probe(order: tuple[Hasher, ...]) -> str:
    tries = []
    for h in order:
        tool = h.command.split()[0]
        tries.append(
            f"if command -v {tool} >/dev/null 2>&1; then "
            f"d=$(printf '' | {h.command} 2>/dev/null); "
            f'if [ "${{d%% *}}" = {EMPTY_SHA256} ]; then echo {_PROBE_MARK}{h.name.replace(" ", "+")}; '
            "return 0; fi; fi"
        )
    return "edgelab_hasher() { " + "; ".join(tries) + f"; echo {_PROBE_MARK}none; }}; edgelab_hasher"


PROBE = _probe(CANDIDATES)
"""A shell snippet printing one ``edgelab-hasher=NAME`` line (``none`` when no tool works); it
exits 0 whatever it finds, so it can follow or precede other commands in one ``sh -c``."""


def probe() -> str:
    """``PROBE`` over ``candidates()``: what a store asks its device (``EDGELAB_HASHERS`` respected)."""
    order = candidates()
    return PROBE if order == CANDIDATES else _probe(order)


def parse_probe(text: str) -> Hasher | None:
    """The hasher ``PROBE`` found in ``text`` (other lines ignored); None when none works or no
    probe line is there."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(_PROBE_MARK):
            return BY_NAME.get(line[len(_PROBE_MARK) :].replace("+", " "))
    return None


# "<64 hex> *name" (openssl -r, binary mode), "<64 hex>  name" (text mode), "<64 hex>  -" (stdin)
_DIGEST_LINE = re.compile(r"([0-9a-f]{64})(?:  | \*)(.*)")


def parse_digest(text: str) -> str | None:
    """The SHA-256 of one ``h`` call's output: exactly one line ``<64 hex>  NAME`` or ``<64 hex> *NAME``
    (NAME ``-``/``stdin`` for a pipe); None for anything else (an error text, two lines, upper case)."""
    lines = text.splitlines()
    if len(lines) != 1:
        return None
    m = _DIGEST_LINE.fullmatch(lines[0].rstrip("\r"))
    return m.group(1) if m else None


def fallback_fn(toybox: bool = False) -> str:
    """The shell function ``h`` for a device not probed yet: openssl when present, else sha256sum
    (Android's toybox has no openssl binary; its sha256sum uses the platform's libcrypto)."""
    if os.environ.get(ENV, "").strip():
        return candidates()[0].fn  # pinned: never another tool than the operator named
    if toybox:
        return SHA256SUM.fn
    return (
        'h() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r "$@"; '
        'else sha256sum "$@"; fi; }; '
    )
