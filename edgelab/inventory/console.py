"""Operator tools over a device's own transport: one command with its exit code, the system log.

``shell`` runs under a lease like every workload (someone else's device is refused naming the
holder); reading the log disturbs nothing and needs none. The log command is chosen by the
device's shell family: ``logcat`` on Android, ``journalctl`` (``dmesg`` where there is no journal)
on Linux and Jetson, the System event log on Windows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from sqlalchemy import Engine

from edgelab.errors import ConfigError
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.transport import Capability, Transport, open_transport
from edgelab.transport.host import host_class
from edgelab.transport.quoting import Shell

Out = Callable[[str], None]


def _open(engine: Engine, name: str, **options) -> tuple[Transport, Shell]:
    with session_scope(engine, write=False) as s:
        device = get_device(s, name)
        endpoint = device.endpoint()
    return open_transport(endpoint, **options), endpoint.shell


def run_command(
    engine: Engine, name: str, argv: Sequence[str], *, on_stdout: Out, lease_id: str | None = None, **options
) -> tuple[int | None, str]:
    """Run ``argv`` on the device (quoted for its shell), stdout line by line; returns (exit code, stderr)."""
    from edgelab.lease import held

    if not argv:
        raise ConfigError("no command given", remedy="put it after --: `edgelab shell DEVICE -- uname -a`")
    with held(engine, [name], f"shell {' '.join(argv)}"[:200], lease_id=lease_id):
        t, _shell = _open(engine, name, **options)
        try:
            with t.stream(list(argv)) as proc:
                for line in proc.lines():
                    on_stdout(line)
                code = proc.wait(timeout=30)
                return code, proc.stderr
        finally:
            t.close()


def log_argv(shell: Shell, *, lines: int = 200, follow: bool = False) -> list[str]:
    """The command that prints (or follows) the device's system log, for its shell family."""
    if lines < 1:
        raise ConfigError("--lines must be at least 1", remedy="pass e.g. --lines 200")
    return host_class(shell).system_log_argv(int(lines), follow)


def log_lines(
    engine: Engine, name: str, *, lines: int = 200, follow: bool = False, **options
) -> Iterator[str | tuple[int | None, str]]:
    """The log's lines; the last item is (exit code, stderr) of the log command."""
    t, shell = _open(engine, name, **options)
    try:
        with t.stream(log_argv(shell, lines=lines, follow=follow)) as proc:
            yield from proc.lines()
            code = proc.wait(timeout=30)
            yield code, proc.stderr
    finally:
        t.close()


def interactive(engine: Engine, name: str, *, lease_id: str | None = None, **options) -> int:
    """An interactive shell on the device, the local terminal in raw mode; returns the remote exit status.

    SSH: a session channel with a pty (the terminal's size and $TERM); ADB: the ``shell:`` service,
    which gives a pty on a real device.
    """
    import os
    import shutil

    from edgelab.lease import held

    with held(engine, [name], "interactive shell", lease_id=lease_id):
        with session_scope(engine, write=False) as s:
            endpoint = get_device(s, name).endpoint()
        t = open_transport(endpoint, **options)
        try:
            if not t.supports(Capability.INTERACTIVE):
                raise ConfigError(
                    f"{name}: an interactive shell needs an ssh or adb device",
                    remedy=f"run one command: `edgelab shell {name} -- CMD`",
                )
            size = shutil.get_terminal_size()
            session = t.interactive(
                term=os.environ.get("TERM", "xterm"), columns=size.columns, lines=size.lines
            )
            try:
                _bridge(session.fileno(), lambda: session.recv(65536), session.send)
                return session.exit_code()
            finally:
                session.close()
        finally:
            t.close()


def _bridge(remote_fd: int, recv: Callable[[], bytes], send: Callable[[bytes], None]) -> None:
    """Copy stdin to the remote and the remote to stdout until either side ends (raw tty if stdin is one)."""
    import os
    import select
    import sys

    fd_in, fd_out = sys.stdin.fileno(), sys.stdout.fileno()
    saved = None
    if os.isatty(fd_in):
        import termios
        import tty

        saved = termios.tcgetattr(fd_in)
        tty.setraw(fd_in, termios.TCSANOW)  # keep what was typed before the connection came up
    try:
        stdin_open = True
        while True:
            ready, _, _ = select.select([remote_fd] + ([fd_in] if stdin_open else []), [], [])
            if remote_fd in ready:
                data = recv()
                if not data:
                    return
                os.write(fd_out, data)
            if fd_in in ready:
                data = os.read(fd_in, 4096)
                if not data:
                    stdin_open = False
                    continue
                send(data)
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(fd_in, termios.TCSADRAIN, saved)


def forward(
    engine: Engine,
    name: str,
    remote_port: int,
    *,
    local_port: int | None = None,
    lease_id: str | None = None,
    on_ready: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    **options,
) -> None:
    """Join a lab-side 127.0.0.1 port to ``remote_port`` on the device's loopback until ``stop()`` or Ctrl-C.

    Built on the transport's ``forward()`` (``ssh -L``-style channels, ``adb forward``); ``local_port``
    puts a relay on a port of the operator's choosing in front of it. Runs under a lease.
    """
    import time

    from edgelab.lease import held

    if not 0 < remote_port < 65536 or (local_port is not None and not 0 < local_port < 65536):
        raise ConfigError("ports are 1-65535", remedy="e.g. `edgelab forward orin-agx 8091 --local 8091`")
    with held(engine, [name], f"forward port {remote_port}", lease_id=lease_id):
        t, _shell = _open(engine, name, **options)
        try:
            with t.forward(remote_port) as fwd:
                relay = _Relay(local_port, fwd.local_port) if local_port else None
                try:
                    if on_ready:
                        on_ready(local_port or fwd.local_port)
                    while not (stop and stop()):
                        time.sleep(0.2)
                finally:
                    if relay is not None:
                        relay.close()
        finally:
            t.close()


class _Relay:
    """127.0.0.1:``port`` relayed to the forward's own lab-side port (the operator chose the number)."""

    def __init__(self, port: int, target: int):
        import socket
        import threading

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind(("127.0.0.1", port))
        except OSError as e:
            self._sock.close()
            raise ConfigError(
                f"cannot listen on 127.0.0.1:{port}: {e.strerror}",
                remedy="pick another --local port, or leave it out for a free one",
            ) from e
        self._sock.listen(16)
        self._target = target
        self._done = threading.Event()
        threading.Thread(target=self._accept, name=f"relay-{port}", daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        from edgelab.transport.forward import _pump

        while not self._done.is_set():
            try:
                client, _peer = self._sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b, self._done), daemon=True).start()

    def close(self) -> None:
        self._done.set()
        try:
            self._sock.close()
        except OSError:
            pass
