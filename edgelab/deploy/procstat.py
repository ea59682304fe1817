"""Memory of a launched process group, read on the device from ``/proc/<pid>/status``.

A deployed process is a group (the launch wrapper and the runtime under it); its resident set is
the sum over members now (``VmRSS``) and its peak the largest member's high-water mark
(``VmHWM``, what the kernel kept since the process started; the wrapper's is a few hundred kB).
On Windows the group is the process tree (by ParentProcessId) and the figures are Win32_Process's
working sets (``winscripts.tree_memory``). Elsewhere the numbers are unknown (None), never zero.
"""

from __future__ import annotations

import time

from edgelab.metrics import events as ev
from edgelab.transport.base import Transport
from edgelab.transport.host import host_of


def memory(t: Transport, pgid: int) -> tuple[int | None, int | None]:
    """(resident bytes now, peak bytes of the largest member); (None, None) when unknown or gone."""
    return host_of(t).memory(pgid)


def sample(t: Transport, pgid: int, run: str | None, device: str | None) -> ev.ResourceSample | None:
    """A resource event for the group: ``rss_bytes`` is its peak so far (the figure a run reports)."""
    rss, hwm = memory(t, pgid)
    if rss is None:
        return None
    return ev.ResourceSample(t=time.time(), run=run, device=device, source="proc", rss_bytes=hwm or rss)
