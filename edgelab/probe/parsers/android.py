"""Android: ``getprop`` dumps (``[key]: [value]``, values may span lines), ``build.prop`` (``key=value``)
and ``dumpsys battery``. The SoC comes from ``ro.soc.model`` first, then the board platform table."""

from __future__ import annotations

import re

from edgelab.probe import tables
from edgelab.probe.facts import Accelerator, Battery
from edgelab.probe.parsers.base import ParseResult, norm_arch, parser, scalar, snake, to_int

_PROP_START = re.compile(r"^\[([^\]\n]+)\]:\s*\[(.*)$")


def read_getprop(text: str, warnings: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    key: str | None = None
    buf: list[str] = []
    for line in text.split("\n"):
        if key is None:
            m = _PROP_START.match(line)
            if not m:
                if line.strip():
                    warnings.append(f"unreadable getprop line: {line.strip()[:60]}")
                continue
            key, rest = m[1], m[2]
            if rest.endswith("]"):
                props.setdefault(key, rest[:-1])
                key = None
            else:
                buf = [rest]
        else:
            if line.endswith("]"):
                buf.append(line[:-1])
                props.setdefault(key, "\n".join(buf))
                key = None
            elif _PROP_START.match(line):  # previous value never closed: keep what we have
                warnings.append(f"unterminated value for {key}")
                props.setdefault(key, "\n".join(buf))
                m = _PROP_START.match(line)
                key, rest = m[1], m[2]
                if rest.endswith("]"):
                    props.setdefault(key, rest[:-1])
                    key = None
                else:
                    buf = [rest]
            else:
                buf.append(line)
    if key is not None:
        warnings.append(f"unterminated value for {key}")
        props.setdefault(key, "\n".join(buf))
    if len(warnings) > 5:
        warnings[5:] = [f"... {len(warnings) - 5} more"]
    return props


def hexagon_apis(version: str) -> list[str]:
    """QNN's backend for a Hexagon version: HTP from v68 on, the DSP backend for v65/v66, none
    before (HVX only)."""
    n = int(version.lstrip("v")) if version.lstrip("v").isdigit() else 0
    if n >= 68:
        return [f"QNN HTP {version}"]
    if n >= 65:
        return [f"QNN DSP {version}"]
    return [f"Hexagon DSP {version} (HVX)"]


def fill_from_props(res: ParseResult, props: dict[str, str]) -> None:
    """Typed facts from Android properties; unknown SoC parts and platforms are kept raw."""
    f = res.facts

    def p(*keys: str) -> str | None:
        for k in keys:
            if props.get(k):
                return props[k]
        return None

    f.os.family = "android"
    f.os.android_release = p("ro.build.version.release", "ro.system.build.version.release")
    f.os.android_sdk = to_int(p("ro.build.version.sdk", "ro.system.build.version.sdk") or "")
    f.os.distro = f"Android {f.os.android_release}" if f.os.android_release else None
    f.os.kernel = None
    f.identity.vendor = p(
        "ro.product.manufacturer", "ro.product.vendor.manufacturer", "ro.product.system.manufacturer"
    )
    f.identity.model = p(
        "ro.product.marketname",
        "ro.product.vendor.marketname",
        "ro.display.series",  # OnePlus: the marketing name
        "ro.product.model",
        "ro.product.vendor.model",
    )
    f.identity.board = p("ro.product.board", "ro.product.vendor.board")
    f.identity.device = p("ro.product.device", "ro.product.vendor.device", "ro.build.product")
    abi = p("ro.product.cpu.abi", "ro.vendor.product.cpu.abilist", "ro.product.cpu.abilist")
    f.os.arch = norm_arch(abi.split(",")[0]) if abi else None
    f.cpu.arch = f.os.arch
    platform = p("ro.board.platform", "ro.vendor.board.platform")
    f.identity.board_platform = platform
    soc_key = next(
        (k for k in ("ro.soc.model", "ro.vendor.soc.model.part_name", "ro.vendor.soc.model") if props.get(k)),
        None,
    )
    if soc_key is None and (props.get("ro.boot.platform_name") or "").upper().startswith(
        ("SM", "SDM", "MSM")
    ):
        soc_key = "ro.boot.platform_name"  # the bootloader's name for the part (Android 11 and before)
    soc_model = props[soc_key] if soc_key else None
    if soc_key:
        res.values["soc_model_from"] = soc_key
    soc_maker = p("ro.soc.manufacturer", "ro.vendor.soc.manufacturer")
    candidates = tables.board_platform(platform)
    part = None
    if soc_model:
        row = tables.qualcomm_part(soc_model)
        part = row["part"] if row else soc_model
        if candidates and part not in candidates:
            res.warnings.append(f"{soc_key} {soc_model} is not a usual part for platform {platform}")
    elif candidates:
        part = candidates[0] if len(candidates) == 1 else None
        if part is None:
            res.warnings.append(
                f"platform {platform} is one of {', '.join(candidates)}; no ro.soc.model to decide (kept raw)"
            )
    elif platform:
        res.warnings.append(f"board platform {platform} not in the qualcomm table (kept raw)")
    f.identity.soc_part = part or soc_model
    is_qcom = (
        (soc_maker or "").upper() in ("QTI", "QUALCOMM")
        or bool(candidates)
        or ((p("ro.hardware") or "").lower() == "qcom")
    )
    if is_qcom:
        f.identity.soc_vendor = "Qualcomm"
        row = tables.qualcomm_part(part) if part else None
        if row:
            f.identity.soc_name = row["name"]
            if row.get("gpu"):
                f.accelerators.append(
                    Accelerator(kind="gpu", vendor="Qualcomm", name=row["gpu"], apis=["Vulkan", "OpenCL"])
                )
            if row.get("hexagon"):
                f.accelerators.append(
                    Accelerator(
                        kind="npu",
                        vendor="Qualcomm",
                        name=f"Hexagon {row['hexagon']}",
                        apis=hexagon_apis(str(row["hexagon"])),
                    )
                )
        elif part:
            res.warnings.append(
                f"Qualcomm part {part} not in the qualcomm table: no name, GPU or NPU (kept raw)"
            )
    elif soc_maker:
        f.identity.soc_vendor = soc_maker
    f.memory.unified = True


@parser("getprop")
def parse_getprop(text: str, res: ParseResult) -> None:
    props = read_getprop(text, res.warnings)
    res.values.update(props)
    if props:
        fill_from_props(res, props)


@parser("cat build.prop")
def parse_build_prop(text: str, res: ParseResult) -> None:
    props: dict[str, str] = {}
    for line in text.split("\n"):
        s = line.strip()
        if not s or s.startswith("#") or "=" not in s:
            continue
        k, _, val = s.partition("=")
        if re.fullmatch(r"[\w.\-]+", k.strip()):
            props.setdefault(k.strip(), val.strip())
    res.values.update(props)
    if props:
        fill_from_props(res, props)


_BATTERY_RENAME = {"voltage": "voltage_mv", "temperature": "temperature_decic"}
_STATUS = {1: "unknown", 2: "charging", 3: "discharging", 4: "not charging", 5: "full"}


@parser("dumpsys battery")
def parse_dumpsys_battery(text: str, res: ParseResult) -> None:
    v, f = res.values, res.facts
    in_block = "Current Battery Service state" not in text  # a paste may lack the header
    for line in text.split("\n"):
        if line.startswith("Current Battery Service state"):
            in_block = True
            continue
        if not in_block or not line.startswith("  ") or line.startswith("    ") or ":" not in line:
            if in_block and line.strip() and not line.startswith(" "):
                in_block = False
            continue
        label, _, val = line.strip().partition(":")
        key = snake(label)
        if not key or key in v:
            continue
        v[_BATTERY_RENAME.get(key, key)] = scalar(val)
    if not v:
        return
    level, scale = v.get("level"), v.get("scale")
    b = Battery(technology=v.get("technology") if isinstance(v.get("technology"), str) else None)
    if isinstance(level, int):
        b.level_pct = (
            round(100.0 * level / scale, 1) if isinstance(scale, int) and scale > 0 else float(level)
        )
    if isinstance(v.get("status"), int):
        b.status = _STATUS.get(v["status"], str(v["status"]))
    plugged = [name for name in ("ac", "usb", "wireless", "dock") if v.get(f"{name}_powered") is True]
    b.plugged = ",".join(plugged) if plugged else "unplugged"
    if isinstance(v.get("temperature_decic"), int):
        b.temperature_c = v["temperature_decic"] / 10.0
    if isinstance(v.get("voltage_mv"), int):
        b.voltage_mv = v["voltage_mv"]
    f.power.battery = b
    f.os.family = "android"
