"""Readiness checks a launch template declares: a log line, an HTTP 200, a listening port, or alive.

``log`` reads the process's stdout; ``http`` asks ``GET path`` through a port forwarded to the lab
(the way a lab-side client will reach the server, so "ready" means reachable from here); ``port``
looks for a listening socket in the device's ``/proc/net/tcp`` (no client needed); ``alive``
only asks that the process still runs (or finished cleanly: a one-shot program is done).
"""

from __future__ import annotations

import re

from edgelab.transport.base import Transport

# $1 port (decimal): exit 0 when a socket listens on it (state 0A) over IPv4 or IPv6.
_LISTENING = r"""
h=$(printf '%04X' "$1")
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ l _ st _; do
  [ "$st" = 0A ] && [ "${l##*:}" = "$h" ] && { echo yes; break; }
done
"""


def http_ok(t: Transport, port: int, path: str, timeout: float = 3.0) -> bool:
    """GET ``path`` on the device's ``port`` through a forward; True on HTTP 200."""
    import httpx

    try:
        with t.forward(port) as fw:
            r = httpx.get(f"http://127.0.0.1:{fw.local_port}{path}", timeout=timeout)
            return r.status_code == 200
    except (httpx.HTTPError, OSError):
        return False
    except Exception:  # noqa: BLE001 - a transport that cannot forward is "not ready yet"
        return False


def listening(t: Transport, port: int) -> bool:
    res = t.run(["sh", "-c", _LISTENING, "edgelab", str(int(port))], timeout=20)
    return "yes" in res.stdout


def matches(pattern: str | None, lines: list[str]) -> bool:
    if not pattern:
        return False
    rx = re.compile(pattern)
    return any(rx.search(x) for x in lines)
