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
from edgelab.transport import winscripts
from edgelab.transport.base import Capability, Transport
from edgelab.transport.quoting import Shell

# $1 pgid: "rss_kB hwm_kB" summed / maxed over live members of the group.
_STAT = r"""
P=$1; rss=0; hwm=0; n=0
for s in /proc/[0-9]*/stat; do
  read -r l < "$s" 2>/dev/null || continue
  r=${l##*) }; set -- $r
  [ "$3" = "$P" ] || continue
  d=${s%/stat}
  while read -r k v _; do
    case $k in VmRSS:) rss=$((rss+v)); n=$((n+1));; VmHWM:) [ "$v" -gt "$hwm" ] && hwm=$v;; esac
  done < "$d/status"
done
echo "$n $rss $hwm"
"""


def memory(t: Transport, pgid: int) -> tuple[int | None, int | None]:
    """(resident bytes now, peak bytes of the largest member); (None, None) when unknown or gone."""
    if t.shell is Shell.POWERSHELL:
        if not t.supports(Capability.WINDOWS_SHELL):
            return None, None
        parts = t.run_ps(winscripts.tree_memory(pgid), timeout=20).stdout.split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts[0] == "0":
            return None, None
        return int(parts[1]), int(parts[2]) * 1024  # working set in bytes, peak in KiB
    res = t.run(["sh", "-c", _STAT, "edgelab", str(int(pgid))], timeout=20)
    parts = res.stdout.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts[0] == "0":
        return None, None
    return int(parts[1]) * 1024, int(parts[2]) * 1024


def sample(t: Transport, pgid: int, run: str | None, device: str | None) -> ev.ResourceSample | None:
    """A resource event for the group: ``rss_bytes`` is its peak so far (the figure a run reports)."""
    rss, hwm = memory(t, pgid)
    if rss is None:
        return None
    return ev.ResourceSample(t=time.time(), run=run, device=device, source="proc", rss_bytes=hwm or rss)
