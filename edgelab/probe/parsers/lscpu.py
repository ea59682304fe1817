"""lscpu in any locale: labels are mapped to canonical keys by the ``lscpu_labels`` table
(en, fr, de, es, zh, ja), so a French or Japanese paste reads the same as an English one."""

from __future__ import annotations

import re
from collections import Counter

from edgelab.probe import tables
from edgelab.probe.parsers.base import ParseResult, norm_arch, parser, to_float, to_int
from edgelab.probe.parsers.cpuinfo import normalize_features

_INT_KEYS = {
    "cpus",
    "cpu_family",
    "model",
    "threads_per_core",
    "cores_per_socket",
    "cores_per_cluster",
    "sockets",
    "clusters",
    "numa_nodes",
    "sockets_per_book",
    "books",
    "books_per_drawer",
    "drawers",
}
_TOPOLOGY = ("threads_per_core", "cores_per_socket", "cores_per_cluster", "sockets", "clusters") + (
    "sockets_per_book",
    "books",
    "books_per_drawer",
    "drawers",
)
_FLOAT_KEYS = {"cpu_max_mhz", "cpu_min_mhz", "cpu_mhz"}
_LABEL_RE = re.compile(r"^(\s*)([^:：]+?)\s*[:：](.*)$")


@parser("lscpu")
def parse_lscpu(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    votes: Counter = Counter()
    unmapped: dict[str, str] = {}
    last_key: str | None = None
    value_col = 0
    blocks: list[dict[str, int]] = [{}]  # one per "Model name" (a hybrid SoC lists each core type)
    for line in text.split("\n"):
        m = _LABEL_RE.match(line)
        if not m or (last_key == "flags" and line[:value_col].strip() == "" and ":" not in line):
            if last_key == "flags" and line.strip() and line[:value_col].strip() == "":
                v["flags"] = v.get("flags", "") + line[value_col:].rstrip()  # lscpu wraps mid-word
            continue
        label, value = m[2].strip(), m[3].strip()
        key, locales = tables.lscpu_key(label)
        votes.update(locales)
        last_key = key
        value_col = len(line) - len(m[3].lstrip()) if m[3].strip() else len(line)
        if key is None:
            unmapped.setdefault(label, value)
            continue
        if key == "model_name" and blocks[-1]:
            blocks.append({})
        count = to_int(value) if key in _TOPOLOGY else None
        if count is not None:
            blocks[-1].setdefault(key, count)
        if key in v:
            continue
        if key in _INT_KEYS:
            v[key] = to_int(value)
            if v[key] is None and value not in ("-", ""):
                v[key] = value
        elif key in _FLOAT_KEYS:
            v[key] = (
                to_float(value.replace(",", ".")) if to_float(value.replace(",", ".")) is not None else value
            )
        else:
            v[key] = value
    if not v:
        return
    if votes:
        best = max(votes.values())
        winners = sorted(loc for loc, n in votes.items() if n == best)
        v["locale"] = "en" if "en" in winners else winners[0]
    if unmapped:
        v["unmapped"] = unmapped
    flags = v.get("flags", "").split()
    if flags:
        v["flags"] = flags
        f.cpu.raw_flags = flags
        f.cpu.features = normalize_features(flags)
    f.cpu.arch = norm_arch(v.get("architecture")) or v.get("architecture")
    f.os.arch = f.cpu.arch
    f.cpu.vendor = v.get("vendor_id")
    f.cpu.model = v.get("model_name")
    if v.get("model_name") and v.get("vendor_id") == "ARM":
        f.cpu.core_names = [v["model_name"]]
    f.cpu.logical_cores = v.get("cpus") if isinstance(v.get("cpus"), int) else None
    sockets = v.get("sockets") if isinstance(v.get("sockets"), int) else None
    f.cpu.sockets = sockets
    per = v.get("cores_per_socket") if isinstance(v.get("cores_per_socket"), int) else None
    if per and sockets:
        f.cpu.physical_cores = per * sockets
    elif isinstance(v.get("cores_per_cluster"), int) and isinstance(v.get("clusters"), int):
        f.cpu.physical_cores = v["cores_per_cluster"] * v["clusters"]
    if v.get("architecture") is None:
        res.warnings.append("no Architecture line: not a full lscpu output")
    _check_topology(res, [b for b in blocks if b])


def _block_cpus(b: dict[str, int]) -> int | None:
    """threads x cores x sockets of one block; cores counted per cluster where lscpu prints
    clusters instead (ARM servers), sockets per book and drawer on s390x."""
    threads = b.get("threads_per_core")
    if threads is None:
        return None
    if "cores_per_socket" in b:
        cores = b["cores_per_socket"]
        sockets = b.get("sockets")
        if sockets is None and "sockets_per_book" in b:
            books = (
                b.get("books", 1)
                if "books_per_drawer" not in b
                else b["books_per_drawer"] * b.get("drawers", 1)
            )
            sockets = b["sockets_per_book"] * books
        return threads * cores * sockets if sockets is not None else None
    if "cores_per_cluster" in b and "clusters" in b:
        return threads * b["cores_per_cluster"] * b["clusters"]
    return None


def _check_topology(res: ParseResult, blocks: list[dict[str, int]]) -> None:
    """A topology that does not multiply out to CPU(s) is a hypervisor's (or firmware's) invention:
    say so, so nobody sizes threads from Core(s) per socket on that machine."""
    cpus = res.values.get("cpus")
    per_block = [_block_cpus(b) for b in blocks]
    if not isinstance(cpus, int) or not per_block or None in per_block:
        return
    total = sum(n for n in per_block if n is not None)
    if total == cpus:
        return
    shown = " + ".join(
        " x ".join(
            f"{b[k]} {k.replace('_', ' ')}"
            for k in _TOPOLOGY
            if k in b and not (k == "sockets" and "sockets_per_book" in b)
        )
        for b in blocks
    )
    res.values["topology_cpus"] = total
    res.warnings.append(
        f"lscpu topology does not multiply out: {shown} = {total}, but CPU(s) is {cpus} "
        "(a virtual machine or partition reporting a made-up topology; physical cores unknown)"
    )
    res.facts.cpu.physical_cores = None
