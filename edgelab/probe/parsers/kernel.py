"""``uname -a`` and ``/proc/version``: kernel release, machine, WSL detection, the build toolchain.

WSL1 kernels say ``Microsoft`` (4.4.0-19041-Microsoft); WSL2 kernels say ``microsoft-standard``,
with ``-WSL2`` only from 5.10 on (early WSL2 shipped 4.19.104-microsoft-standard). WSL1 has no
kernel of its own: the number in its release is the Windows build it runs on (4.4.0-18985 is
build 18985); the first WSL (Windows 10 1607) printed a bare ``3.4.0-Microsoft`` without one."""

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


def wsl1_windows_build(release: str) -> str | None:
    """The Windows build a WSL1 release names (4.4.0-18985-Microsoft -> 18985); Windows 10 builds
    start at 10240, so a smaller number is not one."""
    m = re.fullmatch(r"\d+\.\d+\.\d+-(\d{5,})-Microsoft", release)
    return m[1] if m and int(m[1]) >= 10240 else None


def _fill(res: ParseResult, release: str) -> None:
    v, f = res.values, res.facts
    v["kernel_release"] = release
    gen = wsl_generation(release)
    v["is_wsl"] = gen is not None
    if gen is not None:
        v["wsl_generation"] = gen
    if gen == 1:
        build = wsl1_windows_build(release)
        if build:
            v["windows_build"] = build
            f.os.windows_build = build
        else:
            res.warnings.append(f"WSL1 release {release} names no Windows build")
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
        fill_toolchain(res, groups[0])
    if pos < len(rest):
        v["kernel_version"] = rest[pos:].strip()


_VERSION = r"(\d+(?:\.\d+)+[\w.+~-]*)"


def _tool(part: str) -> tuple[str | None, str | None]:
    """('gcc', '11.4.0') from 'gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0' or 'gcc version 5.4.0 (GCC)';
    ('clang', '14.0.6') from 'Android (...) clang version 14.0.6 (...)'; ('GNU ld', '2.38') ..."""
    flat = re.sub(r"\([^()]*\)", " ", part)  # vendor notes in parentheses are not the version
    if m := re.search(rf"\b(clang|gcc|cc)\s+version\s+{_VERSION}", part):
        return m[1], m[2]
    name = None
    if m := re.search(r"\b(clang|gcc|GNU ld|LLD|ld\.lld|ld)\b", flat):
        name = m[1]
    elif m := re.search(r"\b([\w.+-]*-(?:gcc|clang))\b", flat):
        name = m[1]
    versions = re.findall(_VERSION, flat)
    return name, versions[-1] if versions else None


def fill_toolchain(res: ParseResult, text: str) -> None:
    """The compiler (and, from gcc 9's banner on, the linker) the kernel was built with, as name and
    version; the printed text is kept, stripped, in ``compiler``."""
    v, f = res.values, res.facts
    v["compiler"] = text.strip()
    parts = [p.strip() for p in re.split(r",\s*(?![^()]*\))", text) if p.strip()]
    name, version = _tool(parts[0]) if parts else (None, None)
    if name:
        v["compiler_name"] = "gcc" if name.endswith("gcc") or name == "cc" else name
    if version:
        v["compiler_version"] = version
    if name and version:
        f.software["kernel_compiler"] = f"{v['compiler_name']} {version}"
    if len(parts) > 1:
        lname, lversion = _tool(parts[1])
        if lname:
            v["linker_name"] = lname
        if lversion:
            v["linker_version"] = lversion
