"""/proc/meminfo: every 'Key: N kB' line; typed pools keep RAM, available and swap apart."""

from __future__ import annotations

import re

from edgelab.probe.facts import MemoryPool
from edgelab.probe.parsers.base import ParseResult, parser, snake

_LINE = re.compile(r"^\s*([A-Za-z0-9_()]+)\s*:\s*(\d+)\s*(kB|KB|k)?\s*$")


@parser("cat /proc/meminfo")
def parse_meminfo(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    for line in text.split("\n"):
        m = _LINE.match(line)
        if not m:
            if line.strip():
                res.warnings.append(f"unreadable line: {line.strip()[:60]}")
            continue
        key = snake(m[1].replace("(", "_").replace(")", ""))
        v.setdefault(key + ("_kb" if m[3] else ""), int(m[2]))
    kib = 1024
    if "mem_total_kb" in v:
        f.memory.pools.append(
            MemoryPool(
                kind="ram",
                total_bytes=v["mem_total_kb"] * kib,
                free_bytes=v.get("mem_free_kb", 0) * kib if "mem_free_kb" in v else None,
            )
        )
    if "mem_available_kb" in v:
        f.memory.pools.append(MemoryPool(kind="available", total_bytes=v["mem_available_kb"] * kib))
    if "swap_total_kb" in v:
        total = v["swap_total_kb"] * kib
        free = v.get("swap_free_kb")
        f.memory.pools.append(
            MemoryPool(kind="swap", total_bytes=total, free_bytes=free * kib if free is not None else None)
        )
    if len(res.warnings) > 5:
        res.warnings[5:] = [f"... {len(res.warnings) - 5} more unreadable lines"]
