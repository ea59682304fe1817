"""The lab host itself as a device: subprocesses in their own process group."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from edgelab.errors import RemoteTimeout, TransportError
from edgelab.transport.base import (
    Capability,
    Endpoint,
    Progress,
    RemoteProcess,
    RunResult,
    Transport,
    TransportOptions,
)
from edgelab.transport.forward import Forward

_COPY_CHUNK = 1 << 20


def _kill_group(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """TERM the process group, then KILL whatever is left after ``grace`` seconds."""
    if proc.poll() is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of a finished leader
        except (ProcessLookupError, PermissionError):
            pass
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; members that ignore TERM (trap '' TERM, nohup) are not
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return


class LocalProcess(RemoteProcess):
    def __init__(self, argv: Sequence[str]):
        self._stderr_parts: list[bytes] = []
        try:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            raise TransportError(f"cannot start {argv[0]!r}: {e.strerror}") from e
        self._err_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err_thread.start()

    def _drain_stderr(self) -> None:
        stderr = self._proc.stderr
        assert isinstance(stderr, io.BufferedReader)  # a PIPE with Popen's default buffering
        for chunk in iter(lambda: stderr.read1(65536), b""):
            self._stderr_parts.append(chunk)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def lines(self) -> Iterator[str]:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            yield raw.decode("utf-8", "replace").rstrip("\r\n")

    def cancel(self) -> None:
        _kill_group(self._proc)
        for stream in (self._proc.stdout, self._proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr_parts).decode("utf-8", "replace")


class LocalTransport(Transport):
    """Runs argv directly (no shell in between), so there is nothing to quote."""

    kind = "local"
    capabilities = Capability.FORWARD | Capability.PROCESS_GROUPS | Capability.RESUMABLE_PUT

    def __init__(self, name: str = "localhost"):
        self.name = name

    @classmethod
    def open(cls, endpoint: Endpoint, options: TransportOptions) -> LocalTransport:
        return cls(endpoint.name)

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: bytes | None = None) -> RunResult:
        argv = [str(a) for a in argv]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            # The same outcome a shell gives for a missing or unrunnable command.
            code = 127 if isinstance(e, FileNotFoundError) else 126
            return RunResult(tuple(argv), code, "", f"{argv[0]}: {e.strerror}\n", time.monotonic() - start)
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise RemoteTimeout(
                f"{argv[0]} ran past {timeout:g}s on {self.name} and was killed",
                remedy="raise the timeout or check the device's load",
            ) from None
        return RunResult(
            tuple(argv),
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.monotonic() - start,
        )

    def stream(self, argv: Sequence[str]) -> RemoteProcess:
        return LocalProcess([str(a) for a in argv])

    def _copy(self, src: Path, dst: Path, progress: Progress | None) -> str:
        total = src.stat().st_size
        h = hashlib.sha256()
        done = 0
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".edgelab-part")
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            while block := fin.read(_COPY_CHUNK):
                fout.write(block)
                h.update(block)
                done += len(block)
                if progress:
                    progress(done, total)
        shutil.copymode(src, tmp)
        os.replace(tmp, dst)
        return h.hexdigest()

    def _put_whole(self, local: Path, remote: str, progress: Progress | None) -> str:
        return self._copy(local, Path(remote).expanduser(), progress)

    def _put_from(self, local: Path, remote: str, offset: int, progress: Progress | None) -> None:
        dst = Path(remote).expanduser()
        total = local.stat().st_size
        if offset > total:
            raise TransportError(
                f"{self.name}: cannot resume {remote} at {offset}: {local} has only {total} bytes"
            )
        if offset == 0:
            dst.parent.mkdir(parents=True, exist_ok=True)
        elif not dst.is_file():
            raise TransportError(
                f"{self.name}: cannot resume {remote}: it is not there", remedy="upload from offset 0"
            )
        done = offset
        with open(local, "rb") as fin, open(dst, "r+b" if offset else "wb") as fout:
            fout.truncate(offset)
            fin.seek(offset)
            fout.seek(offset)
            while block := fin.read(_COPY_CHUNK):
                fout.write(block)
                done += len(block)
                if progress:
                    progress(done, total)
        if progress and done == total == offset:
            progress(done, total)

    def get(self, remote: str, local: Path, *, progress: Progress | None = None) -> str:
        src = Path(remote).expanduser()
        if not src.is_file():
            raise TransportError(f"{remote}: no such file on {self.name}")
        return self._copy(src, Path(local), progress)

    def forward(self, remote_port: int) -> Forward:
        """The device is this host: its loopback port is already here."""
        return Forward(int(remote_port), int(remote_port))
