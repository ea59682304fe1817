"""Transports: one surface (run, stream, put, get, forward, close) over ssh, adb and local.

``open_transport(endpoint, **knobs)`` picks the implementation and ``check(endpoint)`` asks whether
the device answers; both build the transport's options record (``options.options_for``) from the
caller's knobs, so callers never branch on how a device is reached. The ssh and adb modules are
imported lazily so that a probe of a phone never loads paramiko.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from edgelab.errors import ConfigError

if TYPE_CHECKING:
    from edgelab.transport.base import Capability, Endpoint, Reachability, RemoteProcess, RunResult, Transport
    from edgelab.transport.options import TransportOptions, options_for
    from edgelab.transport.quoting import Shell

# The names above load on first use (PEP 562): a listing that only formats addresses
# (``edgelab.transport.address``) must not pay for the transport base classes (hashlib, dataclasses).
_LAZY = {
    "Capability": "base",
    "Endpoint": "base",
    "Reachability": "base",
    "RemoteProcess": "base",
    "RunResult": "base",
    "Transport": "base",
    "TransportOptions": "options",
    "options_for": "options",
    "Shell": "quoting",
}


if not TYPE_CHECKING:  # the type checker reads the imports above, and still flags unknown names

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value


__all__ = [
    "Capability",
    "Endpoint",
    "Reachability",
    "RemoteProcess",
    "RunResult",
    "Shell",
    "Transport",
    "TransportOptions",
    "check",
    "open_push_transport",
    "start_push_session",
    "open_transport",
    "options_for",
    "transport_class",
]


def transport_class(kind: str) -> type[Transport]:
    """The Transport class for an endpoint kind (imported on first use)."""
    if kind == "local":
        from edgelab.transport.local import LocalTransport

        return LocalTransport
    if kind == "ssh":
        from edgelab.transport.ssh import SSHTransport

        return SSHTransport
    if kind == "adb":
        from edgelab.transport.adb import ADBTransport

        return ADBTransport
    raise ConfigError(f"unknown transport kind {kind!r}", remedy="use ssh, adb or local")


def open_transport(endpoint: Endpoint, options: TransportOptions | None = None, **knobs: Any) -> Transport:
    """A connected transport for ``endpoint`` (connections are pooled per process).

    ``knobs`` (timeout, ssh_config, known_hosts) apply where they mean something for this
    endpoint; or pass a ready ``options`` record."""
    from edgelab.transport.options import options_for

    cls = transport_class(endpoint.kind)
    opts = options if options is not None else options_for(endpoint, **knobs)
    return cls.open(endpoint, opts)


def start_push_session(
    endpoint: Endpoint, options: TransportOptions | None = None, **knobs: Any
) -> Transport | None:
    """A transport for a push whose login has started: over SSH to a POSIX device, one system
    ``ssh`` login that serves the whole push without loading paramiko
    (``transport.ssh.session_transport``; it opens the paramiko transport itself where it must).
    None where no such session can carry ``endpoint``: the caller opens ``open_transport``'s."""
    if endpoint.kind != "ssh":
        return None
    from edgelab.transport.options import options_for
    from edgelab.transport.ssh.session_transport import start_session

    opts = options if options is not None else options_for(endpoint, **knobs)
    return start_session(endpoint, opts)  # type: ignore[arg-type]


def open_push_transport(
    endpoint: Endpoint, options: TransportOptions | None = None, **knobs: Any
) -> Transport:
    """``start_push_session``'s transport where there is one, else ``open_transport``'s."""
    return start_push_session(endpoint, options, **knobs) or open_transport(endpoint, options, **knobs)


def check(endpoint: Endpoint, *, timeout: float = 5.0, **knobs: Any) -> Reachability:
    """``(state, detail)`` for ``endpoint``: online, offline, untrusted, auth-failed, unauthorized, absent."""
    from edgelab.transport.options import options_for

    cls = transport_class(endpoint.kind)
    opts = options_for(endpoint, **knobs).kwargs()
    opts.pop("timeout", None)
    return cls.check(endpoint, timeout=timeout, **opts)
