"""nvidia-smi: the default table (old ``Driver Version``/``CUDA Version`` header and the new
``KMD Version``/``CUDA UMD Version`` one; WSL's ``CUDA Version: ERR!``), ``--query-gpu`` CSV and
``-q -x`` XML. Each GPU becomes a discrete accelerator with its own VRAM pool."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from typing import Any

from edgelab.probe.facts import Accelerator, GpuProcess, MemoryPool
from edgelab.probe.parsers.base import ParseResult, parser, to_float, to_int
from edgelab.units import MIB


def _gpu(
    res: ParseResult,
    name: str | None,
    bus: str | None,
    total_mib: int | None,
    used_mib: int | None,
    driver: str | None,
    cuda: str | None,
    arch_cap: str | None = None,
) -> None:
    acc = Accelerator(
        kind="gpu",
        vendor="NVIDIA",
        name=name,
        bus_id=bus,
        driver_version=driver,
        memory_bytes=total_mib * MIB if total_mib is not None else None,
    )
    if arch_cap and re.fullmatch(r"\d+\.\d+", arch_cap):
        acc.cuda_arch = "sm_" + arch_cap.replace(".", "")
    if cuda == "ERR!":
        acc.apis = ["CUDA"]
        acc.usable = None
        acc.reason = (
            "nvidia-smi prints CUDA Version: ERR! (user-mode driver does not match; common under WSL)"
        )
    elif cuda:
        acc.apis = [f"CUDA {cuda}" + (f" {acc.cuda_arch}" if acc.cuda_arch else "")]
        acc.usable = True
        acc.reason = "nvidia-smi sees the GPU and a CUDA driver"
    res.facts.accelerators.append(acc)
    if total_mib is not None:
        res.facts.memory.pools.append(
            MemoryPool(
                kind="vram",
                device=bus or name,
                total_bytes=total_mib * MIB,
                used_bytes=used_mib * MIB if used_mib is not None else None,
            )
        )
    res.facts.memory.unified = False


_HDR = re.compile(r"(NVIDIA-SMI|Driver Version|KMD Version|CUDA UMD Version|CUDA Version):\s*(\S+)")
_HDR2 = re.compile(r"NVIDIA-SMI\s+(\S+)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _gpu_rows(block: list[str], second_col: str) -> dict[str, Any] | None:
    """One GPU's rows of the table (two before driver 450, three with the ``MIG M.`` row)."""
    first = _cells(block[0])
    m = re.match(r"^(\d+)\s+(.+?)\s{2,}(\S+)$", first[0]) if len(first) >= 3 else None
    if not m:
        return None
    gpu: dict[str, Any] = {"index": int(m[1]), "name": m[2].strip(), second_col: m[3]}
    bus = first[1].split()
    if bus:
        gpu["bus_id"] = bus[0]
        if len(bus) > 1:
            gpu["disp_a"] = bus[1]
    gpu["ecc"] = first[2]
    nxt = _cells(block[1]) if len(block) > 1 else []
    if len(nxt) >= 3:
        pm = re.match(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)$", nxt[0])
        if pm:
            gpu["fan_pct"] = to_int(pm[1].rstrip("%"))
            gpu["temp_c"] = to_int(pm[2].rstrip("C"))
            gpu["pstate"] = pm[3]
            gpu["power_w"] = to_int(pm[4].rstrip("W"))
            gpu["power_cap_w"] = to_int(pm[5].rstrip("W"))
        mm = re.match(r"^(\d+)MiB\s*/\s*(\d+)MiB$", nxt[1])
        if mm:
            gpu["mem_used_mib"], gpu["mem_total_mib"] = int(mm[1]), int(mm[2])
        um = re.match(r"^(\S+?)%?\s+(.+)$", nxt[2])
        if um:
            gpu["util_pct"] = to_int(um[1])
            gpu["compute_mode"] = um[2].strip()
    third = _cells(block[2]) if len(block) > 2 else []
    if len(third) >= 3 and third[2]:
        gpu["mig_mode"] = third[2]
    return gpu


_PROC_ROW = re.compile(
    r"^\|\s+(\d+)\s+(?:(\S+)\s+(\S+)\s+)?(\d+)\s+(C\+G|G\+C|C|G|M|M\+C|M\+C\+G)\s+(.+?)\s+(\d+MiB|N/A)\s*\|$"
)


def _boxes(lines: list[str], title: str) -> list[str] | None:
    """The body rows (below the ``|===`` rule, up to the closing ``+---+``) of the box whose
    first row is ``title``; None when the output has no such box."""
    top = next((i for i, ln in enumerate(lines) if ln.startswith("|") and _cells(ln)[0] == title), None)
    if top is None:
        return None
    rule = next((i for i in range(top + 1, len(lines)) if re.match(r"^\|=+", lines[i])), len(lines))
    body: list[str] = []
    for ln in lines[rule + 1 :]:
        if not ln.strip() or re.fullmatch(r"\+-+\+", ln.strip()):
            break
        body.append(ln)
    return body


def _processes(lines: list[str]) -> list[dict[str, Any]] | None:
    body = _boxes(lines, "Processes:")
    if body is None:
        return None
    rows: list[dict[str, Any]] = []
    for ln in body:
        if "No running processes found" in ln:
            return []
        m = _PROC_ROW.match(ln.rstrip())
        if m:
            rows.append(
                {
                    "gpu": int(m[1]),
                    "gi": m[2],
                    "ci": m[3],
                    "pid": int(m[4]),
                    "type": m[5],
                    "name": m[6].strip(),
                    "memory_mib": int(m[7][:-3]) if m[7].endswith("MiB") else None,
                }
            )
    return rows


def _mig_devices(lines: list[str]) -> list[dict[str, Any]]:
    body = _boxes(lines, "MIG devices:") or []
    out = []
    for ln in body:
        c = _cells(ln)
        m = re.fullmatch(r"(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", c[0]) if c else None
        if not m or len(c) < 3:
            continue
        mem = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", c[1])
        sm = c[2].split()
        out.append(
            {
                "gpu": int(m[1]),
                "gi": int(m[2]),
                "ci": int(m[3]),
                "mig_dev": int(m[4]),
                "mem_used_mib": int(mem[1]) if mem else None,
                "mem_total_mib": int(mem[2]) if mem else None,
                "sm": to_int(sm[0]) if sm else None,
            }
        )
    return out


@parser("nvidia-smi")
def parse_nvidia_smi_table(text: str, res: ParseResult) -> None:
    """The default table: header versions, per GPU the rows up to ``MIG M.``, then the
    ``MIG devices:`` and ``Processes:`` boxes (``No running processes found`` is an empty list)."""
    v = res.values
    if m := re.search(r"^\s*(\w{3} \w{3}\s+\d+ \d{2}:\d{2}:\d{2} \d{4})\s*$", text, re.M):
        v["timestamp"] = m[1]
    if m := _HDR2.search(text):
        v["smi_version"] = m[1]
    keys = {
        "Driver Version": "driver_version",
        "KMD Version": "kmd_version",
        "CUDA UMD Version": "cuda_umd_version",
        "CUDA Version": "cuda_version",
    }
    for label, val in _HDR.findall(text):
        if label in keys:
            v.setdefault(keys[label], val)
    if v.get("cuda_version") == "ERR!":
        res.warnings.append(
            "CUDA Version: ERR! - the CUDA user-mode driver does not match the kernel driver "
            "(typical in WSL when nvidia-smi and the Windows driver differ)"
        )
    second_col = "driver_model" if re.search(r"Driver-Model|TCC/WDDM", text) else "persistence_mode"
    lines = text.split("\n")
    try:
        start = next(i for i, ln in enumerate(lines) if re.match(r"^\|=+\+", ln))
    except StopIteration:
        if not v:
            return
        res.warnings.append("no GPU table found below the header")
        start = len(lines)
    gpus: list[dict[str, Any]] = []
    block: list[str] = []
    for ln in [*lines[start + 1 :], ""]:
        if ln.startswith("|") and not re.match(r"^\|[-=]+[+|]", ln):
            block.append(ln)
            continue
        if block:
            gpu = _gpu_rows(block, second_col)
            if gpu is not None:
                gpus.append(gpu)
            block = []
        if not ln.strip() or "Processes:" in ln:
            break
    v["gpu_count"] = len(gpus) if gpus else v.get("gpu_count", 0)
    procs = _processes(lines)
    migs = _mig_devices(lines)
    if migs:
        v["mig_devices"] = migs
    if procs is not None:
        v["processes"] = procs
    driver = v.get("driver_version") or v.get("kmd_version")
    cuda = v.get("cuda_version") or v.get("cuda_umd_version")
    for g in gpus:
        p = f"gpu{g['index']}_"
        name = g.pop("name")
        v[p + ("name_truncated" if name.endswith("...") else "name")] = name
        for k, val in g.items():
            if k != "index":
                v[p + k] = val
        _gpu(res, name, g.get("bus_id"), g.get("mem_total_mib"), g.get("mem_used_mib"), driver, cuda)
        acc = res.facts.accelerators[-1]
        acc.temperature_c = float(g["temp_c"]) if g.get("temp_c") is not None else None
        acc.power_draw_w = float(g["power_w"]) if g.get("power_w") is not None else None
        acc.power_cap_w = float(g["power_cap_w"]) if g.get("power_cap_w") is not None else None
        acc.fan_pct, acc.perf_state = g.get("fan_pct"), g.get("pstate")
        acc.utilization_pct, acc.mig_mode = g.get("util_pct"), g.get("mig_mode")
        mine = [d for d in migs if d["gpu"] == g["index"]]
        acc.mig_devices = len(mine) if mine else None
        if procs is not None:
            acc.processes = [
                GpuProcess(
                    pid=r["pid"],
                    type=r["type"],
                    name=r["name"],
                    memory_mib=r["memory_mib"],
                    gpu_instance=r["gi"],
                    compute_instance=r["ci"],
                )
                for r in procs
                if r["gpu"] == g["index"]
            ]
    if not gpus and v:
        res.warnings.append("header read but no GPU rows")


def _csv_num(rec: dict[str, str], *keys: str) -> int | None:
    for k in keys:
        if k in rec:
            return to_int(rec[k].split()[0]) if rec[k].split() else None
    return None


@parser("nvidia-smi --query-gpu=... --format=csv")
def parse_nvidia_smi_csv(text: str, res: ParseResult) -> None:
    v = res.values
    rows = [r for r in csv.reader(io.StringIO(text.strip("\n"))) if r]
    if len(rows) < 2:
        res.warnings.append("CSV without data rows")
        return
    header = [h.strip() for h in rows[0]]
    for idx, row in enumerate(rows[1:]):
        if len(row) != len(header):
            res.warnings.append(f"row {idx}: {len(row)} fields for {len(header)} columns")
        rec = {h: c.strip() for h, c in zip(header, row, strict=False)}
        prefix = "" if idx == 0 else f"gpu{idx}."
        for h, c in rec.items():
            v[prefix + h] = c
        uuid = rec.get("uuid", "")
        if uuid:
            v[prefix + "uuid_masked"] = bool(re.fullmatch(r"GPU-[0-]+", uuid))

        _gpu(
            res,
            rec.get("name"),
            rec.get("pci.bus_id"),
            _csv_num(rec, "memory.total [MiB]", "memory.total"),
            _csv_num(rec, "memory.used [MiB]", "memory.used"),
            rec.get("driver_version"),
            None,
            rec.get("compute_cap"),
        )
        acc = res.facts.accelerators[-1]
        if acc.cuda_arch:
            acc.apis = [f"CUDA {acc.cuda_arch}"]
            acc.usable = True
            acc.reason = "nvidia-smi reports the GPU with its compute capability"


def _xml_text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    t = node.text.strip()
    return t if t and t != "N/A" else None


def _float_of(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _num(s: str | None) -> float | None:
    if not s:
        return None
    return to_float(s.split()[0])


@parser("nvidia-smi -q -x")
def parse_nvidia_smi_xml(text: str, res: ParseResult) -> None:
    v = res.values
    body = re.sub(r"<!DOCTYPE[^>\[]*(\[[^\]]*\])?\s*>", "", text, count=1)
    if "<!ENTITY" in body:
        res.warnings.append("XML entities refused")
        return
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        res.warnings.append(f"XML not well-formed ({exc}); read top-level tags by pattern")
        for tag in ("driver_version", "cuda_version", "attached_gpus", "product_name"):
            if m := re.search(rf"<{tag}>([^<]*)</{tag}>", text):
                v[tag] = m[1].strip()
        return
    for tag in ("timestamp", "driver_version", "cuda_version"):
        if (t := _xml_text(root, tag)) is not None:
            v[tag] = t
    if (t := _xml_text(root, "attached_gpus")) is not None:
        v["attached_gpus"] = to_int(t) if to_int(t) is not None else t
    for idx, gpu in enumerate(root.findall("gpu")):
        p = "" if idx == 0 else f"gpu{idx}_"
        g: dict[str, object] = {}
        for tag in (
            "product_name",
            "product_brand",
            "product_architecture",
            "serial",
            "uuid",
            "vbios_version",
            "persistence_mode",
            "performance_state",
            "board_part_number",
        ):
            if (t := _xml_text(gpu, tag)) is not None:
                g[tag] = t
        g["pci_bus_id"] = _xml_text(gpu, "pci/pci_bus_id") or gpu.get("id")
        for tag, key in (
            ("fb_memory_usage/total", "fb_total_mib"),
            ("fb_memory_usage/used", "fb_used_mib"),
            ("fb_memory_usage/free", "fb_free_mib"),
            ("temperature/gpu_temp", "gpu_temp_c"),
            ("fan_speed", "fan_pct"),
            ("utilization/gpu_util", "util_pct"),
        ):
            n = _num(_xml_text(gpu, tag))
            if n is not None:
                g[key] = int(n)
        for tag, key in (
            ("gpu_power_readings/current_power_limit", "current_power_limit_w"),
            ("power_readings/current_power_limit", "current_power_limit_w"),
            ("gpu_power_readings/instant_power_draw", "power_draw_w"),
            ("gpu_power_readings/power_draw", "power_draw_w"),
        ):
            n = _num(_xml_text(gpu, tag))
            if n is not None and key not in g:
                g[key] = n
        for k, val in g.items():
            v[p + k] = val
        total = g.get("fb_total_mib")
        used = g.get("fb_used_mib")
        _gpu(
            res,
            g.get("product_name"),
            g.get("pci_bus_id"),
            total if isinstance(total, int) else None,
            used if isinstance(used, int) else None,
            v.get("driver_version"),
            v.get("cuda_version"),
        )
        acc = res.facts.accelerators[-1]
        acc.temperature_c = _float_of(g.get("gpu_temp_c"))
        acc.power_draw_w = _float_of(g.get("power_draw_w"))
        acc.power_cap_w = _float_of(g.get("current_power_limit_w"))
        fan, util = _float_of(g.get("fan_pct")), _float_of(g.get("util_pct"))
        acc.fan_pct = int(fan) if fan is not None else None
        acc.utilization_pct = int(util) if util is not None else None
        state = g.get("performance_state")
        acc.perf_state = state if isinstance(state, str) else None
        node = gpu.find("mig_mode/current_mig")
        mig = (node.text or "").strip() if node is not None else ""
        if mig:  # "N/A" kept: the GPU is not MIG-capable, as the table's MIG M. column says
            acc.mig_mode = mig
            g["mig_mode"] = mig
            v[p + "mig_mode"] = mig
