"""One system ``ssh`` process running a small request loop on the device: many commands, one login.

Why: a fresh push over SSH asks the store a question, then streams the bytes into the command that
stores and hashes them. Over paramiko that costs paramiko's import (about 70 ms), its own key
exchange, and a session per command beside the OpenSSH client that carries the bytes. Here the
system client logs in once and its remote shell serves every request of the push in turn, the last
one with the file on its stdin, as rsync does its whole job in one session.

The device side (``LOOP``) reads a request from its stdin: a line ``run N``, ``fed N`` or
``part N SIZE``, then N bytes, a command line quoted with ``join_posix``. ``read`` takes a pipe byte
by byte and ``dd bs=1`` reads exactly the bytes asked, so nothing beyond the request is consumed.
``run`` runs the command with no stdin. ``fed`` gives it the rest of the session's stdin (a file's
bytes, to the end) and is the session's last request. ``part`` gives it exactly SIZE bytes through
``head -c`` and the session goes on: the next blob of a push needs no new login, at the price of
one more copy of each byte on the device (measured: 256 MiB took 0.93 s instead of 0.79 s; a login
takes about 0.15 s), so the caller sends large files with ``fed``. Each answer is framed by length
(``edgelab-rc RC OUT ERR``, then OUT bytes of stdout and ERR bytes of stderr, captured in a private
directory), so no output of a command can pass for the frame. Every command runs in a subshell:
its ``exit`` ends only itself.

Nothing here decides trust: the caller hands in the argv of an ``ssh`` held to edgelab's own
config and known_hosts (``transport.ssh.fast``). This module only speaks the loop's protocol.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from edgelab.errors import RemoteTimeout, SessionEnded, TransportError
from edgelab.transport.base import Progress

READY = b"edgelab-session-ready\n"
FEED = 1 << 20  # bytes per progress report (and cancel check) while feeding
PIPE_SIZE = 1 << 20

LOOP = r"""
t=$(mktemp -d 2>/dev/null) || { t=${TMPDIR:-/tmp}/edgelab-session-$$; mkdir -m 700 "$t"; } || exit 1
trap 'rm -rf "$t"' EXIT
trap 'exit 129' HUP
trap 'exit 143' TERM
echo edgelab-session-ready
while IFS=' ' read -r kind n size; do
  case $n in ''|*[!0-9]*) echo "bad request" >&2; exit 2;; esac
  c=$(dd bs=1 count="$n" 2>/dev/null)
  case $kind in
  run) (eval "$c") < /dev/null > "$t/o" 2> "$t/e"; rc=$?;;
  fed) (eval "$c") > "$t/o" 2> "$t/e"; rc=$?;;
  part)
    case $size in ''|*[!0-9]*) echo "bad request" >&2; exit 2;; esac
    head -c "$size" | (eval "$c") > "$t/o" 2> "$t/e"; rc=$?;;
  *) echo "bad request" >&2; exit 2;;
  esac
  printf 'edgelab-rc %s %s %s\n' "$rc" $(wc -c < "$t/o") $(wc -c < "$t/e")
  cat "$t/o" "$t/e"
  if [ "$kind" = fed ]; then exit 0; fi
done
"""


def end_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a client we started: SIGTERM, then SIGKILL after ``grace`` seconds; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def send_file(out: int, local: Path, start: int, total: int, progress: Progress | None) -> int:
    """Bytes ``[start, total)`` of ``local`` into the pipe ``out`` (``sendfile``: the kernel copies
    them, Python only counts), reporting ``progress`` every ``FEED`` bytes (it may raise, e.g.
    Interrupted on a Ctrl-C). The position reached: ``total``, or less when the reader went away.
    TransportError when the file shrank meanwhile."""
    pos = start
    try:
        with open(local, "rb") as fin:
            src = fin.fileno()
            while pos < total:
                goal = min(total, pos + FEED)
                while pos < goal:
                    n = os.sendfile(out, src, pos, goal - pos)
                    if n == 0:
                        raise TransportError(f"{local} shrank while it was being pushed", remedy="push again")
                    pos += n
                if progress:
                    progress(pos, total)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return pos


class Answer(NamedTuple):
    """One command's exit status and output, as the loop framed them."""

    exit_code: int
    stdout: str
    stderr: str


class Session:
    """One running ``ssh`` whose remote shell runs ``LOOP``; its stderr goes to ``log_path``."""

    def __init__(self, argv: Sequence[str], log_path: Path, *, name: str):
        self.name = name
        self.log_path = log_path
        with open(log_path, "wb") as err:
            self.proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,  # a Ctrl-C reaches edgelab, which ends the session itself
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self.proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self._out = self.proc.stdout.fileno()
        self._buf = bytearray()
        self.ready = False
        self.ended = False  # the last (fed) request was answered, or the session was stopped

    # -- reading ---------------------------------------------------------------------------------

    def _fill(self, deadline: float | None) -> None:
        """Read what the device sent; SessionEnded at the end of its output, RemoteTimeout past
        ``deadline`` (monotonic)."""
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise RemoteTimeout(f"{self.name}: no answer in time")
        ready, _, _ = select.select([self._out], [], [], left)
        if not ready:
            raise RemoteTimeout(f"{self.name}: no answer in time")
        chunk = os.read(self._out, 1 << 16)
        if not chunk:
            raise SessionEnded(f"{self.name}: the ssh session ended")
        self._buf += chunk

    def _line(self, deadline: float | None) -> bytes:
        while (i := self._buf.find(b"\n")) < 0:
            self._fill(deadline)
        line = bytes(self._buf[: i + 1])
        del self._buf[: i + 1]
        return line

    def _exactly(self, n: int, deadline: float | None) -> bytes:
        while len(self._buf) < n:
            self._fill(deadline)
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def wait_ready(self, deadline: float | None) -> None:
        """Until the device's loop says it is ready (login done): SessionEnded if ssh ended first."""
        if self.ready:
            return
        line = self._line(deadline)
        while line != READY:  # a login banner or rc script may print first
            line = self._line(deadline)
        self.ready = True

    def _answer(self, deadline: float | None) -> Answer:
        line = self._line(deadline)
        head = line.split()
        if len(head) != 4 or head[0] != b"edgelab-rc" or not all(x.isdigit() for x in head[1:]):
            self.stop()  # out of step with the loop: nothing it says later can be trusted
            raise TransportError(f"{self.name}: the session's answer is garbled: {line[:80]!r}")
        rc, n_out, n_err = (int(x) for x in head[1:])
        out = self._exactly(n_out, deadline)
        err = self._exactly(n_err, deadline)
        return Answer(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    # -- requests --------------------------------------------------------------------------------

    def _request(self, kind: str, line: str, size: int | None = None) -> None:
        body = line.encode()
        stdin = self.proc.stdin
        assert stdin is not None
        extra = "" if size is None else f" {size}"
        try:
            stdin.write(f"{kind} {len(body)}{extra}\n".encode() + body)
            stdin.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise SessionEnded(f"{self.name}: the ssh session ended") from None

    def run(self, line: str, *, timeout: float) -> Answer:
        """``line`` (a POSIX command line) to completion, with no stdin."""
        if self.ended:
            raise SessionEnded(f"{self.name}: the session already ended")
        deadline = time.monotonic() + timeout
        try:
            self.wait_ready(deadline)
            self._request("run", line)
            return self._answer(deadline)
        except RemoteTimeout:
            self.stop()
            raise RemoteTimeout(
                f"{self.name}: command did not finish within {timeout:g}s and was stopped"
            ) from None
        except BaseException:  # ended, garbled, or a Ctrl-C between request and answer: out of step
            self.stop()  # the next request logs in again
            raise

    def run_fed(
        self,
        line: str,
        local: Path,
        *,
        offset: int,
        progress: Progress | None,
        timeout: float,
        keep: bool = False,
    ) -> tuple[Answer, int]:
        """``line`` with bytes ``[offset, size)`` of ``local`` on its stdin: its result and the
        position reached. The session ends with it (``fed``), or with ``keep`` goes on (``part``:
        the device reads exactly those bytes). The kernel copies the bytes into ssh's stdin
        (``sendfile``); Python only counts them. ``timeout``: how long the command may run on
        after the last byte."""
        if self.ended:
            raise SessionEnded(f"{self.name}: the session already ended")
        try:
            total = local.stat().st_size
        except OSError as e:
            raise TransportError(f"cannot read {local}: {e.strerror}") from e
        self.wait_ready(time.monotonic() + timeout)
        if keep:
            self._request("part", line, size=total - offset)
        else:
            self._request("fed", line)
            self.ended = True
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            pos = send_file(stdin.fileno(), local, offset, total, progress)
            if pos < total:
                self.ended = True  # ssh quit: the answer (or its absence) says why
            elif keep:
                stdin.flush()
            else:
                stdin.close()
        except BaseException:  # a shrunk file, a Ctrl-C (Interrupted from ``progress``)
            self.stop()
            raise
        try:
            return self._answer(time.monotonic() + timeout), pos
        except RemoteTimeout:
            self.stop()
            raise RemoteTimeout(
                f"{self.name}: the command ran on past {timeout:g}s after its input ended and was stopped"
            ) from None
        except SessionEnded:
            self.stop()
            return Answer(-1, "", ""), pos
        except BaseException:  # a Ctrl-C while the device hashes: the answer will never be read
            self.stop()
            raise

    # -- ending ----------------------------------------------------------------------------------

    def close(self, wait: float = 5.0) -> int | None:
        """End the session (its stdin closed: the loop ends); ssh's exit status, None if it had to
        be stopped."""
        with contextlib.suppress(OSError):
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        try:
            code = self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.stop()
            return None
        finally:
            self.ended = True
            with contextlib.suppress(OSError):
                if self.proc.stdout:
                    self.proc.stdout.close()
        return code

    def stop(self) -> None:
        """Stop ssh now (the device's shell sees its input end: what arrived stays)."""
        self.ended = True
        end_process(self.proc)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if f:
                    f.close()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
