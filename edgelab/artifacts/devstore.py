"""A device's content-addressed store: where it lives per OS, and the few commands it needs.

Blobs are named by their SHA-256 (``<root>/<sha256>``); an upload in progress is ``<sha>.part``
(resumable) and never visible under the final name until verified and renamed.
Every command is an argv list quoted by the transport (POSIX/toybox), or a PowerShell script whose
arguments go through ``quote_powershell`` (Windows).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from edgelab.errors import HashMismatch, TransportError
from edgelab.transport import hashers, winscripts
from edgelab.transport.base import Capability, Progress, RemoteProcess, RunResult, Transport
from edgelab.transport.host import ANDROID_BASE, host_of

ANDROID_ROOT = ANDROID_BASE + "/store"
POSIX_ROOT = "~/.edgelab/store"  # resolved against $HOME on the device
WINDOWS_ROOT = r"%LOCALAPPDATA%\edgelab\store"
_SHA = re.compile(r"[0-9a-f]{64}")
_MEMO_KEY = "edgelab.store.posix"  # (root, hasher) in the transport's per-connection memo


def hash_timeout(size: int) -> float:
    """Time allowed to hash ``size`` bytes on a slow device (20 MB/s floor)."""
    return 60.0 + size / 20e6


# `h FILE...` prints "<sha256> ..." per file: the device's fastest SHA-256 tool
# (``transport.hashers``), probed in ``open_store``'s round trip; before a probe, openssl when
# present, else sha256sum (Android's toybox: sha256sum, built on the platform's libcrypto).


FOLLOW_STEP = 16 << 20  # the follower hashes .part in steps of this many bytes (whole MiB)
FOLLOW_STALL_S = 120.0  # a follower whose .part stops growing this long gives up
_FOLLOW_TICK_S = 0.05

# Hash ``.part`` WHILE it is written, as rsync checks what it received: wait until the file holds
# the next step, read that step with dd (skip seeks: each step is read once), pipe all steps into
# one hash. The device hashes the bytes it stored, not the bytes we sent; on a match the script
# renames into place. A mismatch (or a stall) exits 3 and leaves .part alone: the caller decides.
# While it waits it prints a "." about once a second: once its connection is gone (a cut upload)
# that write fails and the follower dies instead of lingering beside the retry's own follower.
# Should one still win the race and rename first, the blob (only ever renamed after a verified
# hash) is taken as done.
_FOLLOW_SCRIPT = r"""
part=$1 total=$2 step=$3 sha=$4 blob=$5 stall=$6 mib=1048576
exec 3>&1
follow() {
  off=0 idle=0
  while [ "$off" -lt "$total" ]; do
    end=$((off + step)); if [ "$end" -gt "$total" ]; then end=$total; fi
    while :; do
      have=$(stat -c %s "$part" 2>/dev/null) || have=0
      if [ "$have" -ge "$end" ]; then break; fi
      if [ ! -e "$part" ] && [ -f "$blob" ]; then return 6; fi
      idle=$((idle + 1)); if [ "$idle" -gt "$stall" ]; then echo "stalled at $have" >&2; return 4; fi
      if [ $((idle % 20)) -eq 0 ]; then echo . >&3 || exit 5; fi
      sleep 0.05 2>/dev/null || sleep 1
    done
    idle=0
    dd if="$part" bs=$mib skip=$((off / mib)) count=$(((end - off + mib - 1) / mib)) 2>/dev/null || return 1
    off=$end
  done
}
got=$(follow | h) || exit 1
if [ ! -e "$part" ] && [ -f "$blob" ]; then stat -c "%s|%z|%i" "$blob"; exit 0; fi
got=${got%% *}
if [ "$got" != "$sha" ]; then echo "mismatch $got"; exit 3; fi
mv -f "$part" "$blob" 2>/dev/null || { [ ! -e "$part" ] && [ -f "$blob" ]; } || exit 1
stat -c "%s|%z|%i" "$blob"
"""


RECEIVE_STEP = 16 << 20  # the receive's hasher reads .part in whole steps of this many bytes (MiB)
RECEIVE_WRONG_SIZE = 7

# The receive (``DeviceStore.receive``): the bytes arrive on stdin and ``cat`` appends them to .part
# while a follower in the background reads .part back as it grows (all the whole steps the file
# holds beyond what it read, by one dd that skips to them: each byte read once; it naps only when
# it caught up: 50 ms, or 10 ms once the last step is arriving, so the end waits little) into ONE
# hash of [0, size): the digest of what the device STORED, the resumed prefix included. After the
# last byte: the size must be exact, the hasher's output exactly 64 hex digits, the digest the
# blob's name; then rename into place. The follower ends
# when the receiving shell does (a cut: stdin ends early, exit 8, unless adbd ended the group
# first; .part keeps what arrived). A follower that could not read .part leaves a marker, and the
# whole file is hashed again.
# Exit 3: wrong digest (.part removed); 4: the hasher printed no digest; 7: .part is not the resume
# point; 8: stdin ended before the whole file arrived. stdout: the hasher's one line, then the stat.
_RECEIVE_SCRIPT = r"""
part=$1 off=$2 total=$3 sha=$4 blob=$5 step=$6 hashf=$7 mib=1048576 main=$$
if [ "$off" = 0 ]; then mkdir -p "${part%/*}" && : > "$part" || exit 1; fi
have=$(stat -c %s "$part" 2>/dev/null) || have=0
if [ "$have" -gt "$off" ]; then truncate -s "$off" "$part" || exit 1; have=$off; fi
[ "$have" = "$off" ] || { echo "$part holds $have bytes, not $off" >&2; exit 7; }
follow() {
  at=0
  while [ "$at" -lt "$total" ]; do
    have=$(stat -c %s "$part" 2>/dev/null) || return 1
    if [ "$have" -ge "$total" ]; then end=$total; else end=$((have / step * step)); fi
    if [ "$end" -le "$at" ]; then
      kill -0 "$main" 2>/dev/null || return 5
      if [ $((total - have)) -le "$step" ]; then nap=0.01; else nap=0.05; fi
      sleep "$nap" 2>/dev/null || sleep 1
      continue
    fi
    dd if="$part" bs=$mib skip=$((at / mib)) count=$(((end - at + mib - 1) / mib)) 2>/dev/null || return 1
    at=$end
  done
}
rm -f "$hashf" "$hashf.bad"
{ follow || : > "$hashf.bad"; } | h > "$hashf" &
f=$!
cat >> "$part" || { echo "writing $part failed" >&2; exit 1; }
have=$(stat -c %s "$part") || exit 1
[ "$have" = "$total" ] || { echo "$part holds $have of $total bytes: the upload ended early" >&2; exit 8; }
wait "$f"
if [ -e "$hashf.bad" ]; then h "$part" > "$hashf"; fi
{ IFS= read -r line || line=; if read -r more; then line=; fi; } < "$hashf"
rm -f "$hashf" "$hashf.bad"
got=${line%% *} && case $got in *[!0-9a-f]* | "") got= ;; esac
[ "${#got}" = 64 ] || { echo "the hasher printed no SHA-256 line: $line" >&2; exit 4; }
if [ "$got" != "$sha" ]; then rm -f "$part"; echo "mismatch $got"; exit 3; fi
mv -f "$part" "$blob" || exit 1
printf '%s\n' "$line"
stat -c "%s|%z|%i" "$blob"
"""
# The receive of many small files in one command (``DeviceStore.receive_many``): stdin is a tar
# stream (ustar: exact sizes on every tar there is, so nothing depends on how a ``head -c`` reads a
# pipe) of files named by their SHA-256. They land in a private directory of the store; what is
# left of stdin after the archive's end is drained; ONE hasher call reads them all back from disk
# (the digest of what the device STORED); the files whose digest is their name are renamed into
# place by one ``mv`` and said "ok SHA SIZE|STAMP|INODE" by one ``stat``, any other "mismatch SHA
# DIGEST" and removed with the directory. A file the hasher did not list is not said at all: the
# caller pushes it again alone. A directory a killed receive left (its shell gone) is removed by
# the next one. Exit 9: tar could not read the stream.
_RECEIVE_MANY_SCRIPT = r"""
root=$1 d=$1/.batch.$$
for o in "$root"/.batch.*; do  # what a killed receive left: its shell is gone
  [ -d "$o" ] && ! kill -0 "${o##*.}" 2>/dev/null && rm -rf "$o"
done
trap 'rm -rf "$d"' EXIT
trap 'exit 129' HUP
trap 'exit 143' TERM
rm -rf "$d" && mkdir -p "$d" || exit 1
{ tar -xf - -C "$d"; t=$?; cat > /dev/null; [ "$t" = 0 ]; } || { echo "tar failed" >&2; exit 9; }
h "$d"/* > "$d/.sums"
set --
while IFS= read -r line; do
  got=${line%% *} f=${line#* }; f=${f#[* ]}; n=${f##*/}
  if [ "$got" = "$n" ]; then set -- "$@" "$n"; else echo "mismatch $n $got"; fi
done < "$d/.sums"
[ $# -gt 0 ] || exit 0
cd "$d" && mv -f -- "$@" "$root/" && cd "$root" && stat -c "ok %n %s|%z|%i" -- "$@"
"""
_RECEIVED = re.compile(r"ok ([0-9a-f]{64}) (\d+)\|([^\n|]*)\|(\d+)")
_MISMATCHED = re.compile(r"mismatch ([0-9a-f]{64}) (\S*)")

_STAT_LINE = re.compile(r"(\d+)\|([^\n|]*)\|(\d+)")
_MISMATCH = re.compile(r"mismatch ([0-9a-f]{64})\n?")


def parse_receive(res: RunResult, sha: str, name: str, hasher: str = "the hasher") -> tuple[int, str]:
    """The receive command's answer, read strictly: the blob's (size, stamp), or an error.

    On success stdout is exactly two lines: the hasher's own (``hashers.parse_digest``: one digest
    line, and that digest is ``sha``) and the blob's stat."""
    if res.exit_code == 3:
        m = _MISMATCH.fullmatch(res.stdout)
        got = m.group(1)[:12] if m else "?"
        raise HashMismatch(
            f"{name}: {sha[:12]} hashed {got} on the device after upload",
            remedy="the local file changed during the push, or the device's storage is failing",
        )
    if res.exit_code == RECEIVE_WRONG_SIZE:
        raise TransportError(
            f"{name}: cannot resume: {res.stderr.strip()[:200]}",
            remedy="push again: the partial upload is checked and restarted",
        )
    if not res.ok:
        raise TransportError(
            f"{name}: receive of {sha[:12]} with {hasher} failed (exit {res.exit_code}): "
            f"{res.stderr.strip()[:200]}",
            remedy="check free space and permissions of the device store, and its SHA-256 tool",
        )
    lines = res.stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    stat = _STAT_LINE.fullmatch(lines[1]) if len(lines) == 2 else None
    if stat is None or hashers.parse_digest(lines[0]) != sha:
        raise TransportError(f"{name}: unexpected answer from the receive: {res.stdout[:200]!r}")
    return int(stat.group(1)), f"{stat.group(2)}|{stat.group(3)}"


def _parse_stat(line: str) -> tuple[int, str] | None:
    size, _, stamp = line.partition("|")
    return (int(size), stamp) if size.isdigit() else None


@dataclass(frozen=True)
class StoreEntry:
    name: str
    size: int
    age_s: float | None = None  # since its last write, by the device's clock (None: not known)

    @property
    def partial(self) -> bool:
        """An upload not finished: ours (``<sha>.part``, and the receive's hidden ``.<sha>.sha256``)
        or one adbd left hidden (``.<name>.adb-part``)."""
        return self.name.endswith((".part", ".adb-part")) or (
            self.name.startswith(".") and self.name.endswith(".sha256")
        )

    @property
    def sha256(self) -> str | None:
        return self.name if _SHA.fullmatch(self.name) else None


class DeviceStore:
    """The store on one device, reached through one transport (POSIX sh or Android toybox)."""

    os_family = "posix"

    def __init__(self, transport: Transport, root: str, hasher: hashers.Hasher | None = None):
        self.t = transport
        self.root = root
        self.hasher = hasher  # the probed SHA-256 tool (None: not probed, see _hash_fn)
        self._probed = hasher is not None
        # what open_store(inspect=sha) learnt in its own command: the first inspect(sha) is answered
        self._inspected: dict[str, tuple[tuple[int, str] | None, tuple[int, str] | None]] = {}

    # -- naming ---------------------------------------------------------------------------------
    def blob(self, sha: str) -> str:
        return posixpath.join(self.root, sha)

    def part(self, sha: str) -> str:
        return self.blob(sha) + ".part"

    def transfer_path(self, path: str) -> str:
        """``path`` as the transport's file transfer names it (the same here; SFTP's on Windows)."""
        return path

    # -- commands -------------------------------------------------------------------------------
    def _run(self, argv: list[str], timeout: float = 60.0) -> RunResult:
        return self.t.run(argv, timeout=timeout)

    def _must(self, argv: list[str], what: str, timeout: float = 60.0) -> RunResult:
        res = self._run(argv, timeout)
        if not res.ok:
            raise TransportError(
                f"{self.t_name}: {what} failed (exit {res.exit_code}): {res.stderr.strip()[:200]}",
                remedy="check free space and permissions of the device store",
            )
        return res

    @property
    def _hash_fn(self) -> str:
        if self.hasher is not None:
            return self.hasher.fn
        return hashers.fallback_fn(toybox=host_of(self.t).toybox)

    @property
    def hasher_name(self) -> str:
        """What hashes on the device, for reports: the probed tool, else what ``_hash_fn`` tries."""
        if self.hasher is not None:
            return self.hasher.name
        if os.environ.get(hashers.ENV, "").strip():
            return f"{hashers.candidates()[0].name} (not probed)"
        return "sha256sum" if host_of(self.t).toybox else "openssl or sha256sum (not probed)"

    def probe_hasher(self) -> hashers.Hasher | None:
        """Ask the device for its fastest working SHA-256 tool (one round trip; ``open_store``
        folds it into its own). Keeps the fallback when none answers right."""
        res = self._run(["sh", "-c", hashers.probe()])
        self.hasher = hashers.parse_probe(res.stdout) if res.ok else None
        self._probed = True
        return self.hasher

    @property
    def t_name(self) -> str:
        return getattr(self.t, "name", "device")

    def ensure(self) -> None:
        self._must(["mkdir", "-p", self.root], f"mkdir {self.root}")

    def stat(self, path: str) -> tuple[int, str] | None:
        """(size, change-time stamp) of a file, None when absent. Any write moves the stamp."""
        res = self._run(["stat", "-c", "%s|%z|%i", path])
        if not res.ok:
            return None
        size, _, stamp = res.stdout.strip().partition("|")
        try:
            return int(size), stamp
        except ValueError:
            return None

    def sha256(self, path: str, size: int, prefix: int | None = None) -> str:
        """SHA-256 computed on the device (openssl or sha256sum, see ``_hash_fn``), of a prefix if given."""
        if prefix is None:
            argv = ["sh", "-c", self._hash_fn + 'h "$1"', "edgelab-sha256", path]
        else:
            script = self._hash_fn + 'head -c "$1" "$2" | h'
            argv = ["sh", "-c", script, "edgelab-prefix", str(prefix), path]
        res = self._must(argv, f"sha256sum {path}", timeout=hash_timeout(size))
        digest = hashers.parse_digest(res.stdout)
        if digest is None:
            raise TransportError(
                f"{self.t_name}: {self.hasher_name} printed {res.stdout[:80]!r}",
                remedy="the device needs openssl or sha256sum",
            )
        return digest

    def rename(self, src: str, dst: str) -> None:
        """Atomic within one directory: readers see the old blob or the new one, never a mix."""
        self._must(["mv", "-f", src, dst], f"rename {src}")

    def remove(self, paths: list[str]) -> None:
        if paths:
            self._must(["rm", "-f", *paths], "rm")

    # -- one round trip each (a command costs a round trip; a push makes two) ------------------
    def inspect(
        self, sha: str, *, probe: bool = False
    ) -> tuple[tuple[int, str] | None, tuple[int, str] | None]:
        """Create the store if needed; (size, stamp) of the blob and of its ``.part``, None if absent.

        ``probe``: a push is about to hash; a store whose device hasher was not probed yet
        (Android's: ``open_store`` makes no round trip there) probes it in this same command
        (``hashers.probe()``: its one line comes first)."""
        if (known := self._inspected.pop(sha, None)) is not None:
            return known
        return self._inspect_all([sha], probe=probe)[0]

    def _inspect_all(
        self, shas: list[str], *, probe: bool
    ) -> list[tuple[tuple[int, str] | None, tuple[int, str] | None]]:
        """One command: make the store, then the stats of each blob and its ``.part`` (the hasher's
        probe first when ``probe`` and it is still due)."""
        probe = probe and self.hasher is None and not self._probed
        script = 'mkdir -p "$1" || exit 1; shift; ' + _INSPECT_LOOP
        if probe:
            script = hashers.probe() + "; " + script
        paths = [p for sha in shas for p in (self.blob(sha), self.part(sha))]
        res = self._must(["sh", "-c", script, "edgelab-inspect", self.root, *paths], "inspect the store")
        lines = [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]
        if probe and lines:
            self.hasher, self._probed = hashers.parse_probe(lines.pop(0)), True
        if len(lines) != len(paths):
            raise TransportError(f"{self.t_name}: unexpected store listing {res.stdout[:120]!r}")
        return [(_parse_stat(lines[i]), _parse_stat(lines[i + 1])) for i in range(0, len(lines), 2)]

    def prefetch(self, shas: list[str]) -> None:
        """``inspect`` every blob of ``shas`` now, in ONE command (with the hasher's probe when it is
        still due): a push of many files asks once, not once per file. Each answer is used by that
        blob's next ``inspect``; nothing else in the store changes those files meanwhile."""
        shas = [sha for sha in dict.fromkeys(shas) if sha not in self._inspected]
        if shas:
            self._inspected.update(zip(shas, self._inspect_all(shas, probe=True), strict=True))

    def peek(self, sha: str) -> tuple[tuple[int, str] | None, tuple[int, str] | None] | None:
        """What ``prefetch`` (or ``open_store``) learnt of ``sha``, left for its ``inspect``; None
        when nothing was asked yet."""
        return self._inspected.get(sha)

    def finalize(self, sha: str, size: int) -> tuple[int, str] | None:
        """Hash ``.part`` on the device; if it is ``sha``, rename it into place and return its stat.

        A wrong hash removes the ``.part`` and raises HashMismatch.
        """
        script = self._hash_fn + (
            'got=$(h "$1") || exit 1; got=${got%% *}; '
            'if [ "$got" != "$2" ]; then rm -f "$1"; echo "mismatch $got"; exit 3; fi; '
            'mv -f "$1" "$3" || exit 1; stat -c "%s|%z|%i" "$3"'
        )
        argv = ["sh", "-c", script, "edgelab-finalize", self.part(sha), sha, self.blob(sha)]
        res = self._run(argv, timeout=hash_timeout(size))
        if res.exit_code == 3:
            raise HashMismatch(
                f"{self.t_name}: {sha[:12]} hashed {res.stdout.split()[-1][:12]} on the device after upload",
                remedy="the local file changed during the push, or the device's storage is failing",
            )
        if not res.ok:
            raise TransportError(
                f"{self.t_name}: verify/rename of {sha[:12]} failed: {res.stderr.strip()[:200]}"
            )
        return _parse_stat(res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "-")

    # -- hash while receiving ------------------------------------------------------------------
    follows = True
    """Whether ``follow`` works here (POSIX sh with stat, dd, sleep); else ``finalize`` after upload."""

    def follow(self, sha: str, size: int) -> RemoteProcess:
        """Start the device-side hash of ``.part`` as it grows to ``size`` (see ``_FOLLOW_SCRIPT``).

        Start it only once ``.part`` holds no stale bytes beyond the verified prefix; then upload.
        """
        ticks = int(FOLLOW_STALL_S / _FOLLOW_TICK_S)
        script = self._hash_fn + _FOLLOW_SCRIPT
        argv = ["sh", "-c", script, "edgelab-follow", self.part(sha), str(size), str(FOLLOW_STEP), sha]
        return self.t.stream([*argv, self.blob(sha), str(ticks)])

    def finish_follow(self, proc: RemoteProcess, sha: str, size: int) -> tuple[int, str] | None | bool:
        """Wait for the follower after the upload: the blob's stat once renamed into place, or
        False when it did not confirm the hash (mismatch, stall, error): then ``finalize`` decides."""
        lines = [ln.strip() for ln in proc.lines() if ln.strip() not in ("", ".")]
        code = proc.wait(timeout=hash_timeout(size))
        if code is None:
            proc.cancel()
            return False
        if code != 0 or not lines:
            return False
        return _parse_stat(lines[-1])

    # -- bytes, hash and rename in one command (transports that FEED) --------------------------
    @property
    def receives(self) -> bool:
        """Whether ``receive`` works here: the transport streams a file into a command (ADB shell v2)."""
        return self.t.feeds

    def receive(
        self, local: Path, sha: str, offset: int, size: int, progress: Progress | None = None
    ) -> tuple[int, str]:
        """Bytes ``[offset, size)`` of ``local`` onto ``.part``, hashed on the device while they
        land, renamed into place on a match: one command, one round trip (``_RECEIVE_SCRIPT``).

        ``.part`` must hold the verified prefix ``[0, offset)`` (cut back beyond it; one holding
        fewer is refused: TransportError). Returns the blob's (size, stamp). A whole file whose
        SHA-256 is not ``sha`` is removed and raises HashMismatch; a cut raises TransportError and
        leaves ``.part`` holding what arrived, for the next try to resume.
        """
        argv = ["sh", "-c", self._hash_fn + _RECEIVE_SCRIPT, "edgelab-receive", self.part(sha), str(offset)]
        argv += [str(size), sha, self.blob(sha), str(RECEIVE_STEP), self.hash_file(sha)]
        res = self.t.run_fed(argv, local, offset=offset, progress=progress, timeout=hash_timeout(size))
        return parse_receive(res, sha, self.t_name, self.hasher_name)

    def receive_many(
        self, stream: Path, shas: list[str], progress: Progress | None = None
    ) -> dict[str, tuple[int, str] | None]:
        """Files named by ``shas`` from ``stream`` (a tar of them, see ``_RECEIVE_MANY_SCRIPT``),
        each renamed into place only once its SHA-256 on the device is its name: one command for
        them all. Per sha: the blob's (size, stamp), or None when its digest did not match. A sha
        missing from the answer was not confirmed (the caller pushes it alone); a stream the
        device's tar cannot read raises TransportError."""
        size = stream.stat().st_size
        argv = ["sh", "-c", self._hash_fn + _RECEIVE_MANY_SCRIPT, "edgelab-receive-many", self.root]
        res = self.t.run_fed(argv, stream, progress=progress, timeout=hash_timeout(size))
        if not res.ok:
            raise TransportError(
                f"{self.t_name}: receiving {len(shas)} files in one stream failed (exit "
                f"{res.exit_code}): {res.stderr.strip()[:200]}",
                remedy="push again: each file then goes on its own",
            )
        want = set(shas)
        out: dict[str, tuple[int, str] | None] = {}
        for line in res.stdout.splitlines():
            if (m := _RECEIVED.fullmatch(line)) and m.group(1) in want:
                out[m.group(1)] = (int(m.group(2)), f"{m.group(3)}|{m.group(4)}")
            elif (m := _MISMATCHED.fullmatch(line)) and m.group(1) in want:
                out[m.group(1)] = None
        return out

    def hash_file(self, sha: str) -> str:
        """Where the receiving command's hasher leaves its digest (hidden: not a store entry)."""
        return posixpath.join(self.root, f".{sha}.sha256")

    def list(self) -> list[StoreEntry]:
        # the device's clock first, then "size mtime name" per file (hidden adb leftovers included)
        script = (
            'cd "$1" 2>/dev/null || exit 0; date +%s; for f in * .*.adb-part .*.sha256; do '
            'if [ -f "$f" ]; then stat -c "%s %Y %n" "$f"; fi; done; true'
        )
        res = self._must(["sh", "-c", script, "edgelab-ls", self.root], "list the store")
        out = []
        lines = res.stdout.splitlines()
        now = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        for line in lines[1:] if now is not None else lines:
            size, _, rest = line.strip().partition(" ")
            mtime, _, name = rest.partition(" ")
            if name and size.isdigit() and mtime.isdigit():
                out.append(StoreEntry(name, int(size), float(now - int(mtime)) if now is not None else None))
        return sorted(out, key=lambda e: e.name)


class WindowsStore(DeviceStore):
    """``%LOCALAPPDATA%\\edgelab\\store`` over OpenSSH for Windows; hashes with Get-FileHash.

    Paths are Windows paths for PowerShell and ``/C:/...`` for SFTP (``sftp_path``), as OpenSSH
    for Windows' sftp-server names them. Every script comes from ``edgelab.transport.winscripts``.
    """

    os_family = "windows"
    follows = False

    @property
    def hasher_name(self) -> str:
        """Windows hashes with PowerShell's Get-FileHash, whatever else the host has."""
        return "Get-FileHash"

    def blob(self, sha: str) -> str:
        return self.root.rstrip("\\") + "\\" + sha

    def sftp_path(self, path: str) -> str:
        return "/" + path.replace("\\", "/")

    def transfer_path(self, path: str) -> str:
        return self.sftp_path(path)

    def _ps(self, script: str, timeout: float = 60.0) -> RunResult:
        if not self.t.supports(Capability.WINDOWS_SHELL):
            raise TransportError(f"{self.t_name}: a Windows store needs an SSH transport")
        return self.t.run_ps(script, timeout=timeout)

    def _ps_must(self, script: str, what: str, timeout: float = 60.0) -> RunResult:
        res = self._ps(script, timeout)
        if not res.ok:
            raise TransportError(
                f"{self.t_name}: {what} failed: {res.stderr.strip()[:200]}",
                remedy="check free space and permissions of the device store",
            )
        return res

    def ensure(self) -> None:
        self._ps_must(winscripts.mkdir(self.root), "mkdir")

    def stat(self, path: str) -> tuple[int, str] | None:
        res = self._ps(winscripts.stat(path))
        return _parse_stat(res.stdout.strip()) if res.ok else None

    def sha256(self, path: str, size: int, prefix: int | None = None) -> str:
        script = winscripts.sha256(path) if prefix is None else winscripts.sha256_prefix(path, prefix)
        res = self._ps_must(script, f"Get-FileHash {path}", timeout=hash_timeout(size))
        digest = res.stdout.strip().lower()
        if not _SHA.fullmatch(digest):
            raise TransportError(f"{self.t_name}: Get-FileHash printed {res.stdout[:80]!r}")
        return digest

    def prefetch(self, shas: list[str]) -> None:
        """Windows asks per blob (``inspect``): a push there goes over SFTP, file by file, anyway."""

    def inspect(
        self, sha: str, *, probe: bool = False
    ) -> tuple[tuple[int, str] | None, tuple[int, str] | None]:
        """One round trip: make the store, then the stat of the blob and of its ``.part`` (Windows
        hashes with Get-FileHash: nothing to probe)."""
        res = self._ps_must(
            winscripts.inspect(self.root, [self.blob(sha), self.part(sha)]), "inspect the store"
        )
        lines = [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]
        if len(lines) != 2:
            raise TransportError(f"{self.t_name}: unexpected store listing {res.stdout[:120]!r}")
        return _parse_stat(lines[0]), _parse_stat(lines[1])

    def finalize(self, sha: str, size: int) -> tuple[int, str] | None:
        """One round trip: Get-FileHash of ``.part``; on a match Move-Item into place, else remove it."""
        res = self._ps(winscripts.finalize(self.part(sha), sha, self.blob(sha)), timeout=hash_timeout(size))
        if res.exit_code == 3:
            got = res.stdout.split()[-1] if res.stdout.split() else "?"
            raise HashMismatch(
                f"{self.t_name}: {sha[:12]} hashed {got[:12].lower()} on the device after upload",
                remedy="the local file changed during the push, or the device's storage is failing",
            )
        if not res.ok:
            raise TransportError(
                f"{self.t_name}: verify/rename of {sha[:12]} failed: {res.stderr.strip()[:200]}"
            )
        return _parse_stat(res.stdout.strip().splitlines()[-1] if res.stdout.strip() else "-")

    def rename(self, src: str, dst: str) -> None:
        self._ps_must(winscripts.move(src, dst), "rename")

    def remove(self, paths: list[str]) -> None:
        if paths:
            self._ps_must(winscripts.remove(paths), "rm")

    def list(self) -> list[StoreEntry]:
        res = self._ps_must(winscripts.list_files(self.root), "list the store")
        out = []
        for line in res.stdout.splitlines():
            size, _, name = line.strip().partition(" ")
            if name and size.isdigit():
                out.append(StoreEntry(name, int(size)))
        return sorted(out, key=lambda e: e.name)


# ``stat`` of each blob ``$r/SHA``, "-" for one that is absent. Read-only: blobs that are there need no mkdir.
_STAT_LOOP = (
    'for s in "$@"; do if [ -f "$r/$s" ]; then stat -c "%s|%z|%i" "$r/$s" || exit 1; else echo -; fi; done'
)


def stat_blobs(
    transport: Transport, shas: list[str]
) -> tuple[DeviceStore, list[tuple[int, str] | None]] | None:
    """The device's store and the (size, stamp) of each blob (None: absent), in ONE round trip.

    What an unchanged re-push asks: ``open_store`` (on POSIX a command of its own, for ``$HOME`` and
    the hasher, unless the connection already knows them) and a stat per blob, as one command. What
    ``open_store`` learns it remembers for the connection here too, so a push that follows (a blob
    was missing) asks nothing again. ``None`` where the store is not reached so (Windows) or the
    answer is not plain: the caller asks ``open_store`` and ``inspect``.
    """
    host = host_of(transport)
    if not host.sh:
        return None
    known = transport.memo.get(_MEMO_KEY)
    fixed = host.store_root()
    if fixed is not None or known is not None:
        store = DeviceStore(transport, *known) if known is not None else DeviceStore(transport, fixed)
        script = "r=$1; shift; " + _STAT_LOOP
        res = transport.run(["sh", "-c", script, "edgelab-stat", store.root, *shas], timeout=30)
        lines = res.stdout.splitlines()
    else:  # open_store's question ($HOME, then the hasher's one line) and the stats, in one command
        script = f'case "$HOME" in /*) ;; *) exit 2 ;; esac; printf "%s\\n" "$HOME"; {hashers.probe()}; '
        script += "r=$HOME/$1; shift; " + _STAT_LOOP
        res = transport.run(["sh", "-c", script, "edgelab-stat", POSIX_ROOT[2:], *shas], timeout=30)
        lines = res.stdout.splitlines()
        if not res.ok or len(lines) != len(shas) + 2 or not lines[0].startswith("/"):
            return None
        known = transport.memo[_MEMO_KEY] = (
            posixpath.join(lines[0].strip(), POSIX_ROOT[2:]),
            hashers.parse_probe(lines[1]),
        )
        store, lines = DeviceStore(transport, *known), lines[2:]
    if not res.ok or len(lines) != len(shas):
        return None
    return store, [_parse_stat(ln.strip()) for ln in lines]


_INSPECT_LOOP = (
    'for f in "$@"; do if [ -f "$f" ]; then stat -c "%s|%z|%i" "$f" || exit 1; else echo -; fi; done'
)


def open_store(transport: Transport, root: str | None = None, *, inspect: str | None = None) -> DeviceStore:
    """The store of the device behind ``transport``, its root resolved to an absolute path.

    ``root`` overrides the per-OS default (tests and benches keep their blobs in a scratch dir).
    ``inspect``: a blob the caller will ``inspect`` first (a push); where resolving the store costs a
    command of its own, that command answers it too (one round trip less before the bytes go).
    """
    host = host_of(transport)
    cls = DeviceStore if host.sh else WindowsStore
    if root is not None:
        return cls(transport, root)
    fixed = host.store_root()  # Android: fixed (the shell user's home is not writable); Windows: asked
    if fixed is not None:
        return cls(transport, fixed)
    known = transport.memo.get(_MEMO_KEY)  # asked once per connection
    if known is not None:
        return DeviceStore(transport, *known)
    # $HOME and the device's SHA-256 tool in one round trip (and the first blob's stats)
    script = 'printf "%s\\n" "$HOME"; ' + hashers.probe()
    argv = ["sh", "-c", script]
    if inspect is not None:  # then the blob's and its .part's stats, one line each (as inspect)
        script += '; r=$HOME/$1; mkdir -p "$r" || exit 1; set -- "$r/$2" "$r/$2.part"; '
        argv = ["sh", "-c", script + _INSPECT_LOOP, "edgelab-open", POSIX_ROOT[2:], inspect]
    res = transport.run(argv, timeout=30)
    lines = res.stdout.splitlines()
    home = lines[0].strip() if lines else ""
    if not res.ok or not home.startswith("/"):
        raise TransportError(
            f"{getattr(transport, 'name', 'device')}: cannot resolve $HOME",
            remedy="check the login shell",
        )
    known = transport.memo[_MEMO_KEY] = (
        posixpath.join(home, POSIX_ROOT[2:]),
        hashers.parse_probe(res.stdout),
    )
    store = DeviceStore(transport, *known)
    if inspect is not None and len(lines) == 4:  # $HOME, the hasher, the two stats; else: asked again
        store._inspected[inspect] = (_parse_stat(lines[2].strip()), _parse_stat(lines[3].strip()))
    return store
