"""The ``sync:`` service (adb push/pull/ls), confined to the device's own files.

Writes go only under the device root (a per-device directory in the lab
state dir: ``/data/local/tmp/x`` is ``<device_root>/data/local/tmp/x``).
Reads look in the device root first, then in the persona's read-only
``root/`` overlay, never anywhere else on the lab host. ``..`` is refused.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

from edgelab.sim.adb_emulator.connection import Stream
from edgelab.sim.adb_emulator.device import DeviceSpec

SYNC_DATA_MAX = 64 * 1024
_REQ = struct.Struct("<4sI")
_STAT_V1 = struct.Struct("<4sIII")
_STAT_V2 = struct.Struct("<4sIQQIIIIQqqq")
_DENT_V1 = struct.Struct("<4sIIII")
_DENT_V2 = struct.Struct("<4sIQQIIIIQqqqI")


class SandboxError(OSError):
    pass


def _parts(remote: str) -> list[str]:
    if not remote.startswith("/"):
        remote = "/data/local/tmp/" + remote  # adbd's cwd for relative sync paths is irrelevant; be explicit
    parts = [p for p in remote.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SandboxError(errno.EACCES, "'..' is not allowed in device paths", remote)
    return parts


def _inside(path: Path, base: Path) -> bool:
    try:
        path.resolve().relative_to(base.resolve())
        return True
    except ValueError:
        return False


def write_path(spec: DeviceSpec, remote: str) -> Path:
    """Where a pushed file lands; only the device root is writable."""
    parts = _parts(remote)
    if not parts:
        raise SandboxError(errno.EISDIR, "cannot write to /", remote)
    local = spec.device_root.joinpath(*parts)
    existing = local.parent
    while not existing.exists():
        existing = existing.parent
    if not _inside(existing, spec.device_root):  # a symlink on the way points off the device
        raise SandboxError(errno.EACCES, "path leaves the device", remote)
    return local


def read_path(spec: DeviceSpec, remote: str) -> Path:
    """Device root first, then the persona's files; FileNotFoundError otherwise."""
    parts = _parts(remote)
    for base in (spec.device_root, spec.persona_dir / "root"):
        local = base.joinpath(*parts)
        if os.path.lexists(local):
            if not _inside(local.parent, base):
                raise SandboxError(errno.EACCES, "path leaves the device", remote)
            return local
    if not parts:
        return spec.device_root
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", remote)


async def _fail(stream: Stream, message: str) -> None:
    data = message.encode()
    await stream.write(_REQ.pack(b"FAIL", len(data)) + data)


async def _do_stat_v1(stream: Stream, spec: DeviceSpec, remote: str) -> None:
    try:
        st = os.lstat(read_path(spec, remote))
        out = _STAT_V1.pack(b"STAT", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime))
    except OSError:
        out = _STAT_V1.pack(b"STAT", 0, 0, 0)
    await stream.write(out)


def _v2_fields(st: os.stat_result) -> tuple[int, ...]:
    """What STA2/LST2 and DNT2 both carry after their error field, in the sync protocol's order."""
    return (
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
        st.st_size,
        int(st.st_atime),
        int(st.st_mtime),
        int(st.st_ctime),
    )


async def _do_stat_v2(stream: Stream, spec: DeviceSpec, remote: str, ident: bytes) -> None:
    try:
        path = read_path(spec, remote)
        st = os.stat(path) if ident == b"STA2" else os.lstat(path)
        out = _STAT_V2.pack(ident, 0, *_v2_fields(st))
    except OSError as e:
        out = _STAT_V2.pack(ident, e.errno or errno.EIO, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    await stream.write(out)


async def _do_list(stream: Stream, spec: DeviceSpec, remote: str, v2: bool) -> None:
    try:
        path = read_path(spec, remote)
        names = [".", ".."] + sorted(os.listdir(path))
    except OSError:
        names, path = [], None
    for name in names:
        try:
            st = os.lstat(path / name)
        except OSError:
            continue
        raw = name.encode("utf-8", "surrogateescape")
        if v2:
            head = _DENT_V2.pack(b"DNT2", 0, *_v2_fields(st), len(raw))
        else:
            head = _DENT_V1.pack(b"DENT", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(raw))
        await stream.write(head + raw)
    size = (_DENT_V2 if v2 else _DENT_V1).size
    await stream.write(b"DONE" + bytes(size - 4))


async def _do_send(stream: Stream, spec: DeviceSpec, arg: str) -> None:
    remote, _, mode_text = arg.rpartition(",")
    if not remote:
        remote, mode_text = arg, "33188"
    try:
        mode = int(mode_text)
    except ValueError:
        mode = 0o100644
    error: str | None = None
    fh = None
    target = tmp = None
    try:
        target = write_path(spec, remote)
        target.parent.mkdir(parents=True, exist_ok=True)  # fixed_push_mkdir
        if not _inside(target.parent, spec.device_root):
            raise SandboxError(errno.EACCES, "path leaves the device", remote)
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", remote)
        tmp = target.with_name(f".{target.name}.adb-part")
        fh = open(tmp, "wb")  # noqa: SIM115 - closed below on every path
    except OSError as e:
        error = f"couldn't create file: {e.strerror or e}"
    link_target = bytearray()
    mtime = 0
    cut = True  # until DONE or a protocol error: a cut connection must not leave the hidden file
    try:
        while True:
            ident, length = _REQ.unpack(await stream.readexactly(_REQ.size))
            if ident == b"DATA":
                data = await stream.readexactly(length)
                if stat.S_ISLNK(mode):
                    link_target += data
                elif fh is not None:
                    fh.write(data)
            elif ident == b"DONE":
                mtime = length
                break
            else:
                error = f"invalid data message: expected DATA or DONE, got {ident!r}"
                break
        cut = False
    finally:
        if fh is not None:
            fh.close()
        if cut and tmp is not None:
            tmp.unlink(missing_ok=True)  # adbd removes a half-received file as well
    if error is None and target is not None and tmp is not None:
        try:
            if stat.S_ISLNK(mode):
                tmp.unlink(missing_ok=True)
                if os.path.lexists(target):
                    target.unlink()
                os.symlink(link_target.decode("utf-8", "surrogateescape"), target)
            else:
                os.chmod(tmp, mode & 0o7777 or 0o644)
                os.replace(tmp, target)
                if mtime:
                    os.utime(target, (mtime, mtime))
        except OSError as e:
            error = f"couldn't finish {remote}: {e.strerror or e}"
    if tmp is not None and tmp.exists():
        tmp.unlink(missing_ok=True)
    if error is None:
        await stream.write(_REQ.pack(b"OKAY", 0))
    else:
        await _fail(stream, error)


async def _do_recv(stream: Stream, spec: DeviceSpec, remote: str) -> None:
    try:
        path = read_path(spec, remote)
        base = spec.device_root if _inside(path, spec.device_root) else spec.persona_dir / "root"
        if not _inside(path, base):
            raise SandboxError(errno.EACCES, "symlink leaves the device", remote)
        fh = open(path, "rb")  # noqa: SIM115
    except OSError as e:
        await _fail(stream, f"{remote}: {e.strerror or e}")
        return
    with fh:
        while block := fh.read(SYNC_DATA_MAX):
            await stream.write(_REQ.pack(b"DATA", len(block)) + block)
    await stream.write(_REQ.pack(b"DONE", 0))


async def serve_sync(stream: Stream, spec: DeviceSpec) -> None:
    while True:
        ident, length = _REQ.unpack(await stream.readexactly(_REQ.size))
        if ident == b"QUIT":
            return
        if length > 4096:
            await _fail(stream, "path too long")
            return
        arg = (await stream.readexactly(length)).decode("utf-8", "surrogateescape")
        if ident == b"STAT":
            await _do_stat_v1(stream, spec, arg)
        elif ident in (b"STA2", b"LST2"):
            await _do_stat_v2(stream, spec, arg, ident)
        elif ident in (b"LIST", b"LIS2"):
            await _do_list(stream, spec, arg, ident == b"LIS2")
        elif ident == b"SEND":
            await _do_send(stream, spec, arg)
        elif ident == b"RECV":
            await _do_recv(stream, spec, arg)
        else:
            await _fail(stream, f"unknown sync request {ident!r}")
            return
