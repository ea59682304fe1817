"""known_hosts reading without paramiko: which lines name a host, and the keys they record.

Fixtures of known_hosts text -> the entries ``known_hosts.lookup`` must return, over real keys
from ``ssh-keygen`` (and names hashed by ``ssh-keygen -H``). Each fixture is also checked against
``hostkeys.lookup`` (the paramiko keys built over it) and against the paramiko-based parser
edgelab used before (kept below as the reference): the trust rules did not move.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgelab.transport.ssh import hostkeys, known_hosts
from edgelab.transport.ssh.known_hosts import KnownKey

KINDS = ("ed25519", "ecdsa", "rsa")


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real public key file per kind, made by ssh-keygen."""
    root = tmp_path_factory.mktemp("keys")
    out = {}
    for kind in KINDS:
        path = root / f"host_{kind}"
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "x@y", "-f", str(path)], check=True)
        out[kind] = path.with_suffix(".pub")
    return out


@pytest.fixture(scope="module")
def lines(keys: dict[str, Path]) -> dict[str, str]:
    """``{ed}``/``{ec}``/``{rsa}``: the key part (type and base64) of each key's .pub line."""
    pub = {kind: " ".join(p.read_text().split()[:2]) for kind, p in keys.items()}
    return {"ed": pub["ed25519"], "ec": pub["ecdsa"], "rsa": pub["rsa"]}


def _paramiko_reference(files: list[Path], host: str, port: int = 22) -> list[tuple[int, bytes, bool]]:
    """The known_hosts parser edgelab used before this module (paramiko's HostKeyEntry)."""
    from paramiko.hostkeys import HostKeyEntry, HostKeys

    name = host if port == 22 else f"[{host}]:{port}"

    def matches(pattern: str) -> bool:
        if pattern.startswith("|1|"):
            try:
                return HostKeys.hash_host(name, pattern) == pattern
            except Exception:
                return False
        return pattern == name

    found = []
    for f in dict.fromkeys(files):
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            revoked = False
            if line.startswith("@"):
                marker, _, line = line.partition(" ")
                if marker != "@revoked":
                    continue
                revoked = True
            try:
                entry = HostKeyEntry.from_line(line.strip(), lineno)
            except Exception:
                continue
            if entry is not None and entry.valid and any(matches(p) for p in entry.hostnames):
                found.append((lineno, entry.key.asbytes(), revoked))
    return found


def _seen(found: list[KnownKey], lines: dict[str, str]) -> list[tuple[int, str, bool]]:
    """(line, which key, revoked) for each entry: what the fixtures spell out."""
    names = {v: k for k, v in lines.items()}
    return [(k.lineno, names[k.public_line], k.revoked) for k in found]


# (known_hosts text, host, port, expected [(line, key, revoked)])
CASES = {
    "bracketed port": ("[127.0.0.1]:2222 {ed}\n", "127.0.0.1", 2222, [(1, "ed", False)]),
    "bracketed is not port 22": ("[127.0.0.1]:2222 {ed}\n", "127.0.0.1", 22, []),
    "bracketed other port": ("[127.0.0.1]:2222 {ed}\n", "127.0.0.1", 2223, []),
    "port 22 plain name": ("127.0.0.1 {ed}\nlab.invalid {ec}\n", "127.0.0.1", 22, [(1, "ed", False)]),
    "plain name is port 22 only": ("127.0.0.1 {ed}\n", "127.0.0.1", 2222, []),
    "explicit [host]:22 is not the port-22 name": ("[127.0.0.1]:22 {ed}\n", "127.0.0.1", 22, []),
    "comma patterns, first": ("a.lab,b.lab,[c.lab]:2200 {ec}\n", "a.lab", 22, [(1, "ec", False)]),
    "comma patterns, middle": ("a.lab,b.lab,[c.lab]:2200 {ec}\n", "b.lab", 22, [(1, "ec", False)]),
    "comma patterns, port": ("a.lab,b.lab,[c.lab]:2200 {ec}\n", "c.lab", 2200, [(1, "ec", False)]),
    "comma patterns, no prefix match": ("a.lab,b.lab {ec}\n", "lab", 22, []),
    "several keys of one host": (
        "h.lab {ed}\nother.lab {ec}\nh.lab {ec}\nh.lab,x.lab {rsa}\n",
        "h.lab",
        22,
        [(1, "ed", False), (3, "ec", False), (4, "rsa", False)],
    ),
    "no wildcards": ("*.lab {ed}\nh.* {ec}\nh.la? {rsa}\n", "h.lab", 22, []),
    "negated pattern equals no name": ("!h.lab {ed}\n", "h.lab", 22, []),
    "negated pattern beside the name": ("!h.lab,h.lab {ed}\n", "h.lab", 22, [(1, "ed", False)]),
    "revoked kept": ("@revoked h.lab {rsa}\nh.lab {ed}\n", "h.lab", 22, [(1, "rsa", True), (2, "ed", False)]),
    "cert-authority skipped": ("@cert-authority h.lab {ed}\n@cert-authority *.lab {ec}\n", "h.lab", 22, []),
    "unknown marker skipped": ("@whatever h.lab {ed}\n", "h.lab", 22, []),
    "comments and blanks": (
        "# h.lab {ed}\n\n   \n  # h.lab {ec}\nh.lab {rsa} root@host and more words\n",
        "h.lab",
        22,
        [(5, "rsa", False)],
    ),
    "leading and trailing blanks": ("   h.lab {ed}   \n", "h.lab", 22, [(1, "ed", False)]),
    "tab separated": ("h.lab\t{ed_tab}\n", "h.lab", 22, [(1, "ed", False)]),
    "crlf line ends": ("x.lab {ec}\r\nh.lab {ed}\r\n", "h.lab", 22, [(2, "ed", False)]),
    "two spaces is an empty field (as paramiko)": ("h.lab  {ed}\n", "h.lab", 22, []),
    "too few fields": ("h.lab ssh-ed25519\nh.lab\n", "h.lab", 22, []),
    "corrupt hashed entries match nothing": (
        "|1|not*base64|AAAA {ed}\n|1|c2FsdA==|c2FsdA== {ec}\n|1||| {rsa}\n|1| {ed}\n",
        "h.lab",
        22,
        [],
    ),
    "corrupt hashed pattern beside a plain one": ("|1|bad|bad,h.lab {ed}\n", "h.lab", 22, [(1, "ed", False)]),
    "bad base64": (
        "h.lab ssh-ed25519 AAAA!!!!\nh.lab ssh-ed25519 AAAAC3NzaC1lZDI1NTE\nh.lab {ec}\n",
        "h.lab",
        22,
        [(3, "ec", False)],
    ),
    "type string does not match the blob": (
        "h.lab ssh-rsa {ed_b64}\nh.lab ssh-ed25519 {rsa_b64}\n",
        "h.lab",
        22,
        [],
    ),
}


def _render(text: str, lines: dict[str, str]) -> str:
    extra = {f"{k}_b64": v.split()[1] for k, v in lines.items()}
    extra["ed_tab"] = lines["ed"].replace(" ", "\t")
    return text.format(**lines, **extra)


@pytest.mark.parametrize("case", CASES)
def test_lookup_fixture(case: str, lines: dict[str, str], tmp_path: Path) -> None:
    text, host, port, expected = CASES[case]
    kh = tmp_path / "known_hosts"
    kh.write_text(_render(text, lines), newline="")
    found = known_hosts.lookup([kh], host, port)
    assert _seen(found, lines) == expected
    assert all(k.path == kh for k in found)
    # the paramiko layer and the parser it replaced see the same entries
    got = [(k.lineno, k.blob, k.revoked) for k in found]
    assert [(e.lineno, e.key.asbytes(), e.revoked) for e in hostkeys.lookup([kh], host, port)] == got
    assert _paramiko_reference([kh], host, port) == got


def _hashed_file(path: Path, text: str) -> str:
    """``text`` written to ``path`` and hashed in place by ``ssh-keygen -H``; the new text."""
    path.write_text(text)
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    Path(str(path) + ".old").unlink()
    return path.read_text()


def test_hashed_names(lines: dict[str, str], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    hashed = _hashed_file(
        kh,
        f"[127.0.0.1]:2222 {lines['ed']}\nh.lab,[h.lab]:2200 {lines['ec']}\nother.lab {lines['rsa']}\n",
    )
    assert "127.0.0.1" not in hashed and "h.lab" not in hashed and hashed.startswith("|1|")
    # ssh-keygen writes one hashed line per name
    assert _seen(known_hosts.lookup([kh], "127.0.0.1", 2222), lines) == [(1, "ed", False)]
    assert _seen(known_hosts.lookup([kh], "h.lab"), lines) == [(2, "ec", False)]
    assert _seen(known_hosts.lookup([kh], "h.lab", 2200), lines) == [(3, "ec", False)]
    assert _seen(known_hosts.lookup([kh], "other.lab"), lines) == [(4, "rsa", False)]
    assert known_hosts.lookup([kh], "127.0.0.1") == []
    assert known_hosts.lookup([kh], "h.lab", 2222) == []
    for host, port in [("127.0.0.1", 2222), ("h.lab", 22), ("h.lab", 2200), ("other.lab", 22), ("nope", 22)]:
        got = [(k.lineno, k.blob, k.revoked) for k in known_hosts.lookup([kh], host, port)]
        assert [(e.lineno, e.key.asbytes(), e.revoked) for e in hostkeys.lookup([kh], host, port)] == got
        assert _paramiko_reference([kh], host, port) == got


def test_hashed_entry_with_one_changed_character_matches_nothing(
    lines: dict[str, str], tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    hashed = _hashed_file(kh, f"h.lab {lines['ed']}\n")
    _, _, salt, digest = hashed.split()[0].split("|")
    flipped = ("B" if digest[0] == "A" else "A") + digest[1:]
    short_salt = base64.b64encode(base64.b64decode(salt)[:19]).decode()
    kh.write_text(
        f"|1|{salt}|{flipped} {lines['ed']}\n"  # the hash of another name
        f"|1|{short_salt}|{digest} {lines['ed']}\n"  # a salt that is not 20 bytes
        f"|1|{salt}|{digest}|x {lines['ed']}\n"  # a fourth field
        f"|2|{salt}|{digest} {lines['ed']}\n"  # an unknown hash kind is a plain name
        f"|1|{salt}|{digest} {lines['ec']}\n"  # the intact entry
    )
    assert _seen(known_hosts.lookup([kh], "h.lab"), lines) == [(5, "ec", False)]
    assert _paramiko_reference([kh], "h.lab") == [(5, base64.b64decode(lines["ec"].split()[1]), False)]


def test_files_deduplicated_by_path_only(lines: dict[str, str], tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(f"h.lab {lines['ed']}\n")
    b.write_text(f"# the same entry again\nh.lab {lines['ed']}\n")
    files = [a, str(b), tmp_path / "missing", tmp_path, a, os.fspath(b)]  # a dir and a missing file: skipped
    found = known_hosts.lookup(files, "h.lab")
    assert [(k.path, k.lineno) for k in found] == [(a, 1), (b, 2)]
    assert found[0].blob == found[1].blob
    assert [(e.path, e.lineno, e.key.asbytes()) for e in hostkeys.lookup(files, "h.lab")] == [
        (k.path, k.lineno, k.blob) for k in found
    ]


def test_unreadable_files_skipped_undecodable_bytes_replaced(lines: dict[str, str], tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    kh.write_bytes(
        b"\xff\xfe h.lab " + lines["ed"].encode() + b"\nh.lab " + lines["ec"].encode() + b" \xe9t\xe9\n"
    )
    files = [kh / "below-a-file", kh]  # NotADirectoryError: skipped like a missing file
    assert _seen(known_hosts.lookup(files, "h.lab"), lines) == [(2, "ec", False)]
    assert [(e.lineno, e.key.asbytes()) for e in hostkeys.lookup(files, "h.lab")] == [
        (ln, blob) for ln, blob, _ in _paramiko_reference(files, "h.lab")
    ]


def test_key_parts_and_fingerprint_as_openssh_prints_them(keys: dict[str, Path], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(f"h.lab {p.read_text()}" for p in keys.values()))  # with the .pub comment
    found = known_hosts.lookup([kh], "h.lab")
    assert [k.key_type for k in found] == ["ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"]
    for k, pub in zip(found, keys.values(), strict=True):
        assert k.public_line == " ".join(pub.read_text().split()[:2])
        assert k.b64 == pub.read_text().split()[1]
        printed = subprocess.run(
            ["ssh-keygen", "-lf", str(pub), "-E", "sha256"], check=True, capture_output=True, text=True
        ).stdout.split()[1]
        assert k.fingerprint == printed == known_hosts.fingerprint(k.blob)
        assert hostkeys.fingerprint(k.blob) == printed
        assert not k.revoked


def test_host_name() -> None:
    assert known_hosts.host_name("10.0.0.5") == "10.0.0.5"
    assert known_hosts.host_name("10.0.0.5", 22) == "10.0.0.5"
    assert known_hosts.host_name("10.0.0.5", 2222) == "[10.0.0.5]:2222"
    assert known_hosts.host_name("::1", 2222) == "[::1]:2222"
    assert hostkeys.known_host_name("h.lab", 2200) == "[h.lab]:2200"


def test_stricter_than_paramiko(lines: dict[str, str], tmp_path: Path) -> None:
    """Two lines paramiko loaded that count no more: junk inside the base64 (paramiko's decoder
    dropped it) and an ECDSA line whose type names another curve than its blob (paramiko loaded
    the blob's curve). Both are refused here and by hostkeys, so an unknown key is the result."""
    ed, ec = lines["ed"].split()[1], lines["ec"].split()[1]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"h.lab ssh-ed25519 {ed[:10]}*{ed[10:]}\nh.lab ecdsa-sha2-nistp384 {ec}\n")
    assert [e for e, _, _ in _paramiko_reference([kh], "h.lab")] == [1, 2]
    assert known_hosts.lookup([kh], "h.lab") == []
    assert hostkeys.lookup([kh], "h.lab") == []


def test_padding_is_required(lines: dict[str, str], tmp_path: Path) -> None:
    b64 = lines["ec"].split()[1]  # a nistp256 blob is 104 bytes: one pad character
    assert b64.endswith("=")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"h.lab ecdsa-sha2-nistp256 {b64.rstrip('=')}\nh.lab ecdsa-sha2-nistp256 {b64}==\n")
    assert known_hosts.lookup([kh], "h.lab") == []
    # paramiko refused the missing padding too, and (lenient) took the excess padding
    assert [e for e, _, _ in _paramiko_reference([kh], "h.lab")] == [2]


def test_blob_must_be_framed_as_openssh_reads_it(keys: dict[str, Path], tmp_path: Path) -> None:
    """A blob of the type name alone, a cut one, or one with bytes after the key's fields is no
    key: ``ssh-keygen -l`` says "is not a public key file" for each (paramiko loaded the last one)."""
    key_type, b64 = keys["ed25519"].read_text().split()[:2]
    blob = base64.b64decode(b64)
    bad = {
        "type only": _ssh_string(key_type.encode()),
        "cut": blob[:-1],
        "trailing": blob + _ssh_string(b"x"),
        "trailing byte": blob + b"\0",
    }
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(f"h.lab {key_type} {base64.b64encode(b).decode()}\n" for b in bad.values()))
    assert known_hosts.lookup([kh], "h.lab") == []
    assert hostkeys.lookup([kh], "h.lab") == []
    for what, b in bad.items():
        pub = tmp_path / f"{what.replace(' ', '_')}.pub"
        pub.write_text(f"{key_type} {base64.b64encode(b).decode()}\n")
        r = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True)
        assert r.returncode != 0, what


def test_key_type_paramiko_cannot_load(tmp_path: Path) -> None:
    """A well-formed entry of a type paramiko does not know is found, and skipped by hostkeys."""
    blob = _ssh_string(b"ssh-future") + _ssh_string(b"\x01" * 32)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"h.lab ssh-future {base64.b64encode(blob).decode()}\n")
    [k] = known_hosts.lookup([kh], "h.lab")
    assert (k.key_type, k.blob, k.lineno) == ("ssh-future", blob, 1)
    assert hostkeys.lookup([kh], "h.lab") == []


def test_import_loads_no_crypto_library() -> None:
    """The system-ssh push path reads known_hosts in a process that never loads paramiko."""
    code = (
        "import sys; import edgelab.transport.ssh.known_hosts; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('paramiko', 'cryptography', 'nacl'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == ""
    # and it can tell that it would have: the probe sees paramiko once it is imported
    code2 = code.replace("import edgelab.transport.ssh.known_hosts", "import edgelab.transport.ssh.hostkeys")
    out2 = subprocess.run([sys.executable, "-c", code2], check=True, capture_output=True, text=True).stdout
    assert "paramiko" in out2.split(",")
