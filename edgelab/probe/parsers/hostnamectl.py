"""hostnamectl: right-aligned 'Label: value' lines."""

from __future__ import annotations

from edgelab.probe.parsers.base import ParseResult, key_values, norm_arch, parser, snake

_KEYS = {"Static hostname": "hostname", "Operating System": "os", "Architecture": "arch", "Kernel": "kernel"}


@parser("hostnamectl")
def parse_hostnamectl(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    for label, value, _ in key_values(text):
        if not label or len(label) > 40:
            continue
        key = _KEYS.get(label) or snake(label)
        if key and key not in v:
            v[key] = value
    if not v.get("hostname") and not v.get("os"):
        res.warnings.append("no 'Static hostname' / 'Operating System' lines")
    f.identity.hostname = v.get("hostname")
    f.identity.vendor = v.get("hardware_vendor")
    f.identity.model = v.get("hardware_model")
    f.os.distro = v.get("os")
    kernel = v.get("kernel") or ""
    f.os.kernel = kernel.split(" ", 1)[1] if kernel.startswith("Linux ") else (kernel or None)
    f.os.family = "linux" if kernel.startswith("Linux") else None
    f.os.arch = norm_arch(v.get("arch"))
    f.cpu.arch = f.os.arch
