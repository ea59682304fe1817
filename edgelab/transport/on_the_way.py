"""A host-key refusal from a lab host on the way (a jump host, an ``ssh://`` adb server's host),
reworded for the device it carries.

Its own module because the SSH pool and the adb tunnel both raise it, and ``jump`` (which walks
the chain for ``edgelab device trust``) imports both of them: kept in ``jump`` it closed two
import cycles.
"""

from __future__ import annotations

from edgelab.errors import HostKeyError


def on_the_way(err: HostKeyError, gateway: str, device: str | None) -> HostKeyError:
    """``err`` about a lab host on the way, reworded for the device it carries: the trust command names the
    device (``edgelab device trust`` walks to that host from there), never the host, which is no device.
    Rewording again further out (a chain of jump hosts) keeps the first host's words."""
    text = getattr(err, "host_text", None) or str(err)
    host = getattr(err, "host_name", None) or gateway
    cmd, fixed = f"edgelab device trust {host}", f"edgelab device trust {device or 'DEVICE'}"
    where = f"on the way to {device}: " if device else ""
    new = HostKeyError(f"{where}lab host {text.replace(cmd, fixed)}",
                       remedy=(getattr(err, "host_remedy", None) or err.remedy or fixed).replace(cmd, fixed))
    # the host's own words ride on the error, for a rewording further out (read back with getattr above)
    new.host_text, new.host_name, new.host_remedy = (  # type: ignore[attr-defined]
        text, host, getattr(err, "host_remedy", None) or err.remedy)
    return new
