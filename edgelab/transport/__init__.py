"""Transports: one surface (run, stream, put, get, close) over ssh, adb and local.

``open_transport(endpoint)`` picks the implementation; the ssh and adb modules
are imported lazily so that a probe of a phone never loads paramiko.
"""

from __future__ import annotations

from edgelab.errors import ConfigError
from edgelab.transport.base import Endpoint, RemoteProcess, RunResult, Transport
from edgelab.transport.quoting import Shell

__all__ = ["Endpoint", "RemoteProcess", "RunResult", "Shell", "Transport", "open_transport"]


def open_transport(endpoint: Endpoint, **options) -> Transport:
    """A connected transport for ``endpoint`` (connections are pooled per process)."""
    if endpoint.kind == "local":
        from edgelab.transport.local import LocalTransport

        return LocalTransport(endpoint.name)
    if endpoint.kind == "ssh":
        from edgelab.transport.ssh import SSHTransport

        return SSHTransport.connect(endpoint, **options)
    if endpoint.kind == "adb":
        from edgelab.transport.adb import ADBTransport

        return ADBTransport.connect(endpoint, **options)
    raise ConfigError(f"unknown transport kind {endpoint.kind!r}", remedy="use ssh, adb or local")
