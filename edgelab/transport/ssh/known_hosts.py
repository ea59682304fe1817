"""Reading OpenSSH known_hosts files with the standard library alone.

The system-ssh push path must enforce edgelab's host-key trust without importing paramiko (its
import alone is a noticeable part of a short command), so the one known_hosts parser lives here;
``hostkeys.lookup`` builds paramiko keys on top of it. What a line must be to count, and which
names it matches, follow what edgelab accepted when paramiko parsed the files: fields split on one
space or tab, comma-separated exact names (no wildcards; a negated ``!name`` equals no name),
hashed ``|1|salt|hash`` names, ``@revoked`` kept, every other marker skipped. A key counts only
when its base64 decodes strictly and the blob names the line's key type (then its fields, framed
as SSH strings: the key material itself is not checked, no crypto library is loaded here).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KnownKey:
    """One known_hosts line that names the host: where it is and the public key it records."""

    path: Path
    lineno: int
    key_type: str  # "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
    blob: bytes  # the decoded public key blob (SSH wire format)
    revoked: bool = False

    @property
    def b64(self) -> str:
        """The key's base64, as the file holds it."""
        return base64.b64encode(self.blob).decode("ascii")

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.blob)

    @property
    def public_line(self) -> str:
        """``<type> <base64>``: the key part of a known_hosts line."""
        return f"{self.key_type} {self.b64}"


def fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint: unpadded base64 of the SHA-256 of the key blob."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def host_name(host: str, port: int = 22) -> str:
    """The name known_hosts uses: ``host`` on port 22, ``[host]:port`` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


def _hashed_matches(pattern: str, name: str) -> bool:
    """``|1|salt|hash``: HMAC-SHA1 of ``name`` keyed by the salt; a corrupt entry matches nothing."""
    parts = pattern.split("|")
    if len(parts) != 4:
        return False
    try:
        salt = base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(salt) != hashlib.sha1().digest_size:
        return False
    digest = hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest()
    # the whole entry written back from the salt must equal it, as paramiko compared it
    expected = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    return expected == pattern


def _name_matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        return _hashed_matches(pattern, name)
    return pattern == name


# How many fields (SSH strings; an mpint is one) follow the type name in a public key blob of each
# type OpenSSH knows (sshkey.c); a type not listed needs at least one.
_FIELDS = {
    "ssh-ed25519": 1,  # the 32-byte key
    "ecdsa": 2,  # curve name, point
    "ssh-rsa": 2,  # e, n
    "ssh-dss": 4,  # p, q, g, y
    "sk-ssh-ed25519@openssh.com": 2,  # key, application
    "sk-ecdsa-sha2-nistp256@openssh.com": 3,  # curve name, point, application
}


def _ssh_strings(blob: bytes) -> list[bytes] | None:
    """``blob`` split into SSH strings (4-byte big-endian length + bytes), or None unless it is
    exactly a sequence of them."""
    out, i = [], 0
    while i < len(blob):
        if i + 4 > len(blob):
            return None
        n = int.from_bytes(blob[i : i + 4], "big")
        if i + 4 + n > len(blob):
            return None
        out.append(blob[i + 4 : i + 4 + n])
        i += 4 + n
    return out


def _key_blob(key_type: str, b64: str) -> bytes | None:
    """The blob of a key field, or None unless it decodes strictly and is framed as a public key
    of ``key_type``: that type's name, then its key fields, each an SSH string (an mpint is one)."""
    try:
        blob = binascii.a2b_base64(b64.encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    fields = _ssh_strings(blob)
    if fields is None or len(fields) < 2 or fields[0] != key_type.encode("utf-8"):
        return None
    want = _FIELDS.get("ecdsa" if key_type.startswith("ecdsa-sha2-") else key_type)
    if want is not None and len(fields) - 1 != want:
        return None  # cut, or data after the key: OpenSSH refuses both
    return blob


def _parse(path: Path, lineno: int, raw: str, name: str) -> KnownKey | None:
    """The key a line records for ``name``, or None (blank, comment, other marker, invalid, no match)."""
    line = raw.strip()
    if not line or line.startswith("#"):
        return None
    revoked = False
    if line.startswith("@"):
        marker, _, line = line.partition(" ")
        if marker != "@revoked":
            return None  # @cert-authority: certificates are not used here
        revoked = True
        line = line.strip()
    fields = line.replace("\t", " ").split(" ")  # as paramiko: each single space or tab separates
    if len(fields) < 3:
        return None
    names, key_type, b64 = fields[:3]  # anything after the key is a comment
    blob = _key_blob(key_type, b64)
    if blob is None:
        return None
    if not any(_name_matches(p, name) for p in names.split(",")):
        return None
    return KnownKey(path, lineno, key_type, blob, revoked)


def lookup(files: Iterable[os.PathLike | str], host: str, port: int = 22) -> list[KnownKey]:
    """Every known_hosts entry for ``host``/``port`` across ``files``, in file then line order.

    A file named twice is read once; one that cannot be read is skipped.
    """
    name = host_name(host, port)
    found: list[KnownKey] = []
    for f in dict.fromkeys(Path(p) for p in files):
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for lineno, raw in enumerate(text.splitlines(), 1):
            key = _parse(f, lineno, raw, name)
            if key is not None:
                found.append(key)
    return found


def normalize_fingerprint(fp: str) -> str:
    """Accept ``SHA256:xxx`` with or without base64 padding; compare in one form."""
    fp = fp.strip()
    if not fp.startswith("SHA256:"):
        fp = "SHA256:" + fp
    return fp.rstrip("=")


def default_files() -> list[Path]:
    """The user's and system's known_hosts, then edgelab's own (written by ``device trust``)."""
    from edgelab.config import known_hosts_path

    return [
        Path("~/.ssh/known_hosts").expanduser(),
        Path("/etc/ssh/ssh_known_hosts"),
        known_hosts_path(),
    ]
