"""``uname -a`` and ``/proc/version``: kernel release, machine, and WSL detection.

WSL1 kernels say ``Microsoft`` (4.4.0-19041-Microsoft); WSL2 kernels say ``microsoft-standard``,
with ``-WSL2`` only from 5.10 on (early WSL2 shipped 4.19.104-microsoft-standard)."""

from __future__ import annotations

import re

from edgelab.probe.parsers.base import ParseResult, norm_arch, parser

_ARCH_TOKEN = re.compile(
    r"^(x86_64|aarch64|arm64|armv\w+|i[3-6]86|riscv64|ppc64le|ppc64|s390x|mips\w*|loongarch64)$"
)


def wsl_generation(release: str) -> int | None:
    if re.search(r"microsoft-standard|-WSL2", release, re.I):
        return 2
    if re.search(r"Microsoft", release):
        return 1
    return None


def _fill(res: ParseResult, release: str) -> None:
    v, f = res.values, res.facts
    v["kernel_release"] = release
    gen = wsl_generation(release)
    v["is_wsl"] = gen is not None
    if gen is not None:
        v["wsl_generation"] = gen
    f.os.kernel = release
    f.os.is_wsl = gen is not None
    f.os.wsl_generation = gen
    if "android" in release.lower():
        f.os.family = "android"
    else:
        f.os.family = "linux"
    if "tegra" in release:
        f.identity.vendor = f.identity.vendor or "NVIDIA"


@parser("uname -a")
def parse_uname(text: str, res: ParseResult) -> None:
    line = next((ln for ln in text.split("\n") if ln.strip()), "")
    tokens = line.split()
    if len(tokens) < 3 or tokens[0] not in ("Linux", "Darwin", "FreeBSD"):
        res.warnings.append("not a 'uname -a' line (expected: Linux HOST RELEASE ...)")
        return
    v = res.values
    v["kernel_name"], v["hostname"] = tokens[0], tokens[1]
    _fill(res, tokens[2])
    arch_idx = next((i for i in range(3, len(tokens)) if _ARCH_TOKEN.match(tokens[i])), None)
    if arch_idx is not None:
        v["machine"] = tokens[arch_idx]
        v["kernel_version"] = " ".join(tokens[3:arch_idx])
        res.facts.os.arch = norm_arch(tokens[arch_idx])
        res.facts.cpu.arch = res.facts.os.arch
    else:
        v["kernel_version"] = " ".join(tokens[3:])
        res.warnings.append("no machine architecture in the line")
    if tokens[-1] in ("GNU/Linux", "Android", "Toybox"):
        v["operating_system"] = tokens[-1]
    res.facts.identity.hostname = v["hostname"]


def _balanced(s: str, start: int) -> tuple[str, int] | None:
    """The text inside the parenthesis opening at s[start], and the index after it."""
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "(":
            depth += 1
        elif s[i] == ")":
            depth -= 1
            if depth == 0:
                return s[start + 1 : i], i + 1
    return None


@parser("cat /proc/version")
def parse_proc_version(text: str, res: ParseResult) -> None:
    line = next((ln for ln in text.split("\n") if ln.strip()), "").strip()
    m = re.match(r"^Linux version (\S+)\s*(.*)$", line)
    if not m:
        res.warnings.append("no 'Linux version ...' line")
        return
    _fill(res, m[1])
    rest = m[2]
    v = res.values
    pos = 0
    groups = []
    while pos < len(rest) and rest[pos] == "(":
        got = _balanced(rest, pos)
        if not got:
            break
        groups.append(got[0])
        pos = got[1]
        while pos < len(rest) and rest[pos] == " ":
            pos += 1
    if groups and "@" in groups[0]:
        v["builder"] = groups.pop(0)
    if groups:
        v["compiler"] = groups[0]
    if pos < len(rest):
        v["kernel_version"] = rest[pos:].strip()
