"""A host-key refusal from a lab host on the way (a jump host, an ``ssh://`` adb server's host),
reworded for the device it carries.

Its own module because the SSH pool and the adb tunnel both raise it, and ``jump`` (which walks
the chain for ``edgelab device trust``) imports both of them: kept in ``jump`` it closed two
import cycles.
"""

from __future__ import annotations

from edgelab.errors import HostKeyError, LabHostKeyError


def on_the_way(err: HostKeyError, gateway: str, device: str | None) -> HostKeyError:
    """``err`` about a lab host on the way, reworded for the device it carries: the trust command names the
    device (``edgelab device trust`` walks to that host from there), never the host, which is no device.
    Rewording again further out (a chain of jump hosts) keeps the first host's words."""
    first = err if isinstance(err, LabHostKeyError) else None
    text = (first.host_text if first else None) or str(err)
    host = (first.host_name if first else None) or gateway
    host_remedy = (first.host_remedy if first else None) or err.remedy
    cmd, fixed = f"edgelab device trust {host}", f"edgelab device trust {device or 'DEVICE'}"
    where = f"on the way to {device}: " if device else ""
    return LabHostKeyError(
        f"{where}lab host {text.replace(cmd, fixed)}",
        remedy=(host_remedy or fixed).replace(cmd, fixed),
        host_text=text,
        host_name=host,
        host_remedy=host_remedy,
    )
